"""The contract's JSON Schema check: the schema compiled to Python (fastjsonschema) says whether a contract is
valid; jsonschema validates again any contract the compiled check rejects and words its message, so the
verdict and the reason are jsonschema's, ten times faster for the valid contracts a build audits.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path

import fastjsonschema
import jsonschema

SCHEMA = Path(__file__).resolve().parents[1] / "contracts" / "world_contract.schema.json"


@functools.cache
def _contract_validator() -> jsonschema.protocols.Validator:
    """The schema is checked once per process, not once per world (it is most of a validation's time)."""
    schema = json.loads(SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)
    return validator(_inlined(schema, schema.get("$defs", {})))


def _inlined(node, defs: dict, seen: tuple[str, ...] = ()):
    """The schema with each local `{"$ref": "#/$defs/X"}` (beside annotations only) replaced by X itself: the
    same keywords checked in the same order, without resolving a reference at every node of every contract.
    Anything else (a recursive or foreign reference, a reference beside other keywords) is kept as it is."""
    if isinstance(node, list):
        return [_inlined(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    name = ref.removeprefix("#/$defs/") if isinstance(ref, str) else None
    if name in defs and name not in seen and set(node) <= {"$ref", *ANNOTATIONS}:
        return _inlined(defs[name], defs, (*seen, name))
    return {k: v if k in ("$defs", "enum", "const", "default") else _inlined(v, defs, seen) for k, v in node.items()}


ANNOTATIONS = ("description", "title")  # keywords that validate nothing

# The schema's keywords (draft 2020-12, as pydantic writes it) that mean the same in draft 7, the newest draft
# fastjsonschema compiles, plus `prefixItems`, which `_as_draft7` rewrites. A schema with any other keyword
# is validated by jsonschema alone.
DRAFT7_KEYWORDS = {
    *ANNOTATIONS,
    *("$id", "$defs", "$ref", "default"),
    *("type", "enum", "const", "anyOf", "allOf", "oneOf", "not"),
    *("properties", "required", "additionalProperties"),
    *("items", "prefixItems", "minItems", "maxItems"),
    *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern"),
}
NAMED_SUBSCHEMAS = ("properties", "$defs")  # keywords whose value maps names (not keywords) to schemas


def _as_draft7(node):
    """The draft 2020-12 schema `node` in draft 7 with the same meaning, or None if it uses a keyword
    whose meaning this translation does not know to be the same (then only jsonschema validates).

    `prefixItems` (without `items`) is draft 7's array form of `items`; a `$ref` beside anything but
    annotations would lose its siblings in draft 7 (a reference overrides them there), so it is refused."""
    if isinstance(node, bool):
        return node
    if not isinstance(node, dict) or not set(node) <= DRAFT7_KEYWORDS:
        return None
    if "$ref" in node and not set(node) <= {"$ref", "default", *ANNOTATIONS}:
        return None
    if "prefixItems" in node and "items" in node:
        return None
    out = {}
    for key, value in node.items():
        if key in NAMED_SUBSCHEMAS:
            value = {name: _as_draft7(schema) for name, schema in value.items()}
            translated = list(value.values())
        elif key in ("anyOf", "allOf", "oneOf", "prefixItems"):
            value = translated = [_as_draft7(schema) for schema in value]
        elif key in ("items", "additionalProperties", "not"):
            value = _as_draft7(value)
            translated = [value]
        else:  # data, annotations, names, patterns and bounds: the same in both drafts
            translated = []
        if any(schema is None for schema in translated):
            return None
        out["items" if key == "prefixItems" else key] = value
    return out


@functools.cache
def _fast_contract_check() -> Callable[[dict], bool] | None:
    """Whether a contract is valid against the schema, by the schema compiled to Python (fastjsonschema,
    ten times faster than jsonschema); None if the schema does not translate to draft 7 (`_as_draft7`).

    Only its 'valid' is trusted: a contract it rejects is validated again by jsonschema, whose verdict and
    message the report keeps. It may be stricter, never looser: a pattern's `$` is the end of the text for
    it, also before a final line break for jsonschema's `re.search`. Formats are not asserted (jsonschema
    does not by default) and defaults are not filled in (the contract is read, never changed). References
    stay references (each definition its own function: a failed `anyOf` branch then builds its message
    from a few local names, not from all of an inlined schema's), and none is ever fetched."""
    schema = json.loads(SCHEMA.read_text())
    _contract_validator()  # the schema itself is checked there
    draft7 = _as_draft7(schema)
    if draft7 is None:
        return None
    validate = fastjsonschema.compile(
        {**draft7, "$schema": "http://json-schema.org/draft-07/schema#"},
        handlers={"http": _no_fetch, "https": _no_fetch},
        use_default=False,
        use_formats=False,
    )

    def valid(document: dict) -> bool:
        try:
            validate(document)
        except Exception:  # noqa: BLE001 - anything but a clean pass is left to jsonschema
            return False
        return True

    return valid


def _no_fetch(uri: str):
    raise ValueError(f"the contract schema refers to {uri}, which is not fetched")


def contract_schema_error(raw: dict) -> str | None:
    """jsonschema's message for a contract invalid against the schema, None for a valid one; asked only
    of a contract the compiled schema does not pass."""
    fast = _fast_contract_check()
    if fast is not None and fast(raw):
        return None
    try:
        _contract_validator().validate(raw)
    except jsonschema.ValidationError as exc:
        return exc.message
    return None

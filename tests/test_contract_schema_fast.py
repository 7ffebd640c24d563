"""The contract check's compiled schema (fastjsonschema) against jsonschema, the reference: on real contracts
and on mutated ones (wrong types, missing and extra keys, enum, const, pattern and bound violations), the
check reports exactly what jsonschema alone reports, and the compiled schema is never looser."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest

from auditors.schema import _as_draft7, _contract_validator, _fast_contract_check, contract_schema_error

MUTANTS_PER_CONTRACT = 120  # jsonschema takes ~60 ms a contract: a few hundred mutants in all
OTHER_VALUES = (None, True, False, 0, -1, 1, 1.0, 1.5, -0.5, 1e12, "", "x", "Bad Name", [], [1], {}, {"x": 1})


def _plain_error(raw) -> str | None:
    try:
        _contract_validator().validate(raw)
    except jsonschema.ValidationError as exc:
        return exc.message
    return None


def _paths(node, path=()):
    """Every (path, value) in a JSON document, the root included."""
    yield path, node
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in items:
        yield from _paths(value, (*path, key))


def _set(doc, path, value):
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def _delete(doc, path):
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return doc


def _mutants(raw: dict, rng: random.Random, n: int):
    """n documents, each the contract with one change somewhere."""
    paths = [(p, v) for p, v in _paths(raw) if p]
    for _ in range(n):
        path, value = rng.choice(paths)
        match rng.randrange(6):
            case 0:
                yield _set(raw, path, rng.choice(OTHER_VALUES))  # another type or a bound's edge
            case 1 if isinstance(path[-1], str):
                yield _delete(raw, path)  # a required key missing (or an optional one)
            case 2 if isinstance(value, dict):
                yield _set(raw, path, {**value, "unexpected": 1})  # an extra property
            case 3 if isinstance(value, str):
                yield _set(raw, path, rng.choice([value + "\n", value.upper(), value + "_x", "nowhere"]))
            case 4 if isinstance(value, int | float) and not isinstance(value, bool):
                yield _set(raw, path, rng.choice([-value, value - 1, value + 0.5, float(value), -1e9]))
            case _ if isinstance(value, list) and value:
                yield _set(raw, path, rng.choice([[], value * 2, value[:1], [None, *value[1:]]]))
            case _:
                yield _set(raw, path, rng.choice(OTHER_VALUES))


@pytest.fixture(scope="module")
def contracts(world_dirs) -> list[dict]:
    return [json.loads((w / "contract.json").read_text()) for w in world_dirs[:3]]


def test_the_schema_translates_and_compiles():
    assert _fast_contract_check() is not None, "the contract schema no longer translates to draft 7"


def test_real_contracts_pass_both_ways(contracts):
    for raw in contracts:
        assert _fast_contract_check()(raw)
        assert _plain_error(raw) is None
        assert contract_schema_error(raw) is None


@pytest.mark.parametrize("seed", range(3))
def test_mutated_contracts_get_jsonschemas_verdict_and_message(contracts, seed):
    rng = random.Random(seed)
    raw = contracts[seed % len(contracts)]
    fast = _fast_contract_check()
    rejected = stricter = 0
    for mutant in _mutants(raw, rng, MUTANTS_PER_CONTRACT):
        want = _plain_error(mutant)
        assert contract_schema_error(mutant) == want
        if fast(mutant):
            assert want is None, "the compiled schema passed a contract jsonschema rejects"
        elif want is None:
            stricter += 1
        else:
            rejected += 1
    assert rejected >= MUTANTS_PER_CONTRACT // 3  # the mutations do break contracts
    assert stricter <= MUTANTS_PER_CONTRACT // 20  # only a pattern's "$" before a final line break


def _hours(raw, value):
    return _set(raw, ("calendar", "hours"), value)


EDGE_CASES = {
    "prefix item of the wrong type": lambda r: _hours(r, [5.0, "20"]),
    "prefix items too many": lambda r: _hours(r, [5.0, 20.0, 21.0]),
    "prefix items too few": lambda r: _hours(r, [5.0]),
    "prefix items as integers": lambda r: _hours(r, [5, 20]),
    "prefix item a boolean": lambda r: _hours(r, [True, 20.0]),
    "integer written as a float": lambda r: _set(r, ("seed",), float(r["seed"])),
    "integer with a fraction": lambda r: _set(r, ("seed",), r["seed"] + 0.5),
    "integer a boolean": lambda r: _set(r, ("index",), True),
    "enum violated": lambda r: _set(r, ("deliverables", 0, "grain"), "weekly"),
    "const violated": lambda r: _set(r, ("timeline", "period"), "week"),
    "const in an anyOf violated": lambda r: _set(r, ("deliverables", 0, "format"), "mdx"),
    "boolean a number": lambda r: _set(r, ("sealed",), 1),
    "pattern violated": lambda r: _set(r, ("calendar", "dates", 0, "date"), "13-01"),
    "pattern with a final line break": lambda r: _set(r, ("calendar", "dates", 0, "date"), "12-18\n"),
    "extra property": lambda r: {**r, "extra": 1},
    "required property missing": lambda r: _delete(r, ("variables",)),
    "nested required property missing": lambda r: _delete(r, ("edges", 0, "parent")),
    "not an object": lambda r: [r],
}


@pytest.mark.parametrize("case", EDGE_CASES)
def test_edge_cases_get_jsonschemas_verdict_and_message(contracts, case):
    mutant = EDGE_CASES[case](contracts[0])
    want = _plain_error(mutant)
    assert contract_schema_error(mutant) == want
    if _fast_contract_check()(mutant):
        assert want is None


def test_translation_refuses_what_it_does_not_know():
    assert _as_draft7({"type": "string", "format": "date"}) is None
    assert _as_draft7({"properties": {"a": {"dependentRequired": {}}}}) is None
    assert _as_draft7({"$ref": "#/$defs/A", "minimum": 1}) is None  # draft 7 would drop the sibling
    assert _as_draft7({"prefixItems": [{"type": "number"}], "items": {"type": "string"}}) is None
    assert _as_draft7({"prefixItems": [{"type": "number"}], "minItems": 1}) == {
        "items": [{"type": "number"}],
        "minItems": 1,
    }
    # Names under `properties` are names, not keywords.
    assert _as_draft7({"properties": {"format": {"type": "string"}}}) == {"properties": {"format": {"type": "string"}}}

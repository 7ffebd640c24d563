"""Rubric scoring on plain JSON data, with Python's standard library only.

The one implementation behind `worldgen grade`'s rules judge, the RL reward (`worldgen.reward`) and the
grader shipped in every exported Harbor task: `worldgen export bench` copies this file byte for byte into
each task's tests/, where the task image's Python runs it with no third-party package and no network. So
the exported grader cannot drift from `worldgen grade`. Keep it standard-library only (a test enforces it).

A positive item earns its points when its check holds on the answer; a negative item costs its points when
its check holds (the answer commits that error). Score = (earned - triggered) / total positive, in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

LIST_KEYS = ("drivers", "effects")  # the answer lists whose entries are sanitised before grading

# --- checks ---------------------------------------------------------------------------------------------


def lookup(answer: Any, path: str) -> Any:
    """`change.relative_change` -> answer["change"]["relative_change"]; None when absent."""
    node = answer
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def number(value: Any) -> float | None:
    """A finite JSON number as a float; None for anything else (booleans, strings, NaN, overflow)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def _entry(answer: Any, check: Mapping[str, Any]) -> dict | None:
    entries = lookup(answer, check["path"])
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("variable") == check.get("variable"):
            return entry
    return None


def _outside_carry(answer: Any, check: Mapping[str, Any], tolerance: float) -> bool:
    """Whether an entry for a variable outside `allowed` carries more than `tolerance` of the field."""
    allowed, field = set(check.get("allowed") or []), check.get("field")
    entries = lookup(answer, check["path"])
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("variable") not in allowed:
            value = number(entry.get(field))
            if value is not None and abs(value) > tolerance:
                return True
    return False


def holds(check: Mapping[str, Any], answer: Any) -> bool:
    """Whether the answer satisfies the check (for a negative item: commits the error).

    `check` is a rubric item's check as plain data: kind, path and the optional expected, tolerance,
    unless, variable, direction, field, allowed (see rubrics.model.Check for their meaning).
    """
    expected, tolerance = check.get("expected"), check.get("tolerance")
    match check.get("kind"):
        case "number":
            value = number(lookup(answer, check["path"]))
            if value is None or expected is None or tolerance is None:
                return False
            near = abs(value - expected) <= tolerance
            unless = check.get("unless")
            if unless is not None and abs(value - unless) <= tolerance:
                return False
            return near
        case "sign":
            value = number(lookup(answer, check["path"]))
            return value is not None and expected is not None and value * expected > 0
        case "named":
            entry = _entry(answer, check)
            direction = check.get("direction")
            return entry is not None and (direction is None or entry.get("direction") == direction)
        case "named_outside":
            entries = lookup(answer, check["path"])
            allowed = set(check.get("allowed") or [])
            return isinstance(entries, list) and any(
                isinstance(e, dict) and e.get("variable") not in allowed for e in entries
            )
        case "entry_number":
            entry = _entry(answer, check)
            field = check.get("field")
            value = number(entry.get(field)) if entry and field else None
            if value is None or expected is None or abs(value - expected) > (tolerance or 0):
                return False
            return check.get("allowed") is None or not _outside_carry(answer, check, tolerance or 0)
    return False


def score(rubric: Sequence[Mapping[str, Any]], decisions: Mapping[str, bool]) -> float:
    """(positive points earned - negative points triggered) / total positive points, clipped to [0, 1]."""
    total = sum(i["points"] for i in rubric if i["polarity"] == "positive")
    earned = sum(i["points"] for i in rubric if i["polarity"] == "positive" and decisions.get(i["id"]))
    lost = sum(i["points"] for i in rubric if i["polarity"] == "negative" and decisions.get(i["id"]))
    return 0.0 if total == 0 else min(1.0, max(0.0, (earned - lost) / total))


def sub_scores(rubric: Sequence[Mapping[str, Any]], decisions: Mapping[str, bool]) -> dict[str, float]:
    """Share of positive points earned per item kind (computation, insight) and negative items triggered."""
    shares = {}
    for kind in ("computation", "insight"):
        items = [i for i in rubric if i["polarity"] == "positive" and i["kind"] == kind]
        total = sum(i["points"] for i in items)
        earned = sum(i["points"] for i in items if decisions.get(i["id"]))
        shares[kind] = round(earned / total, 6) if total else 0.0
    shares["negatives_triggered"] = float(
        sum(1 for i in rubric if i["polarity"] == "negative" and decisions.get(i["id"]))
    )
    return shares


# --- the answer schema subset ---------------------------------------------------------------------------

# Keywords this validator implements with Draft 2020-12 semantics; annotations are accepted and ignored.
# A schema using any other keyword is refused (`unsupported_keywords`), so it can never be judged loosely.
ASSERTIONS = frozenset({"type", "enum", "required", "properties", "items"})
ANNOTATIONS = frozenset({"$schema", "title", "description", "default", "examples", "$comment"})


def unsupported_keywords(schema: Any) -> list[str]:
    """Keywords in `schema` (at any depth) that `is_valid` does not implement; [] when it is fully supported."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            found.add(f"<schema of type {type(node).__name__}>")
            return
        found.update(k for k in node if k not in ASSERTIONS | ANNOTATIONS)
        for sub in (node.get("properties") or {}).values():
            walk(sub)
        if "items" in node:
            walk(node["items"])

    walk(schema)
    return sorted(found)


def _is_type(instance: Any, name: str) -> bool:
    match name:
        case "object":
            return isinstance(instance, dict)
        case "array":
            return isinstance(instance, list)
        case "string":
            return isinstance(instance, str)
        case "boolean":
            return isinstance(instance, bool)
        case "null":
            return instance is None
        case "number":
            return not isinstance(instance, bool) and isinstance(instance, int | float)
        case "integer":
            return (not isinstance(instance, bool) and isinstance(instance, int)) or (
                isinstance(instance, float) and instance.is_integer()
            )
    return False


def _equal(one: Any, two: Any) -> bool:
    """JSON equality as JSON Schema's `enum` defines it: booleans are not numbers; containers compare deeply."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return one == two


def problems(schema: Any, instance: Any, where: str = "") -> list[str]:
    """Every violation of `schema` by `instance`, as `path: message` (the schema must be fully supported)."""
    if schema is True:
        return []
    if schema is False:
        return [f"{where or '(root)'}: no value is allowed here"]
    found = []
    types = schema.get("type")
    if types is not None and not any(_is_type(instance, t) for t in ([types] if isinstance(types, str) else types)):
        found.append(f"{where or '(root)'}: {_short(instance)} is not of type {types!r}")
    if "enum" in schema and not any(_equal(each, instance) for each in schema["enum"]):
        found.append(f"{where or '(root)'}: {_short(instance)} is not one of {schema['enum']!r}")
    if isinstance(instance, dict):
        found += [
            f"{where or '(root)'}: {k!r} is a required property"
            for k in schema.get("required", [])
            if k not in instance
        ]
        for key, sub in (schema.get("properties") or {}).items():
            if key in instance:
                found += problems(sub, instance[key], f"{where}/{key}" if where else key)
    if isinstance(instance, list) and "items" in schema:
        for k, item in enumerate(instance):
            found += problems(schema["items"], item, f"{where}/{k}" if where else str(k))
    return found


def is_valid(schema: Any, instance: Any) -> bool:
    return not problems(schema, instance)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- grading --------------------------------------------------------------------------------------------


def sanitise(
    answer_schema: Mapping[str, Any],
    answer: Mapping[str, Any],
    compile_schema: Callable[[Any], Callable[[Any], bool]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Drop list entries the schema rejects and repeated variables (the first entry counts).

    Returns the cleaned answer and a note per repeated variable. `compile_schema` turns an item schema into
    a validity test; the default is this module's validator (worldgen grade passes jsonschema's, and a test
    shows the two agree on every schema our tasks use).
    """
    compile_schema = compile_schema or (lambda schema: lambda instance: is_valid(schema, instance))
    notes: list[str] = []
    clean = dict(answer)
    for key in LIST_KEYS:
        entries = answer.get(key)
        if not isinstance(entries, list):
            continue
        valid = compile_schema(answer_schema.get("properties", {}).get(key, {}).get("items", {}))
        kept, seen = [], set()
        for entry in entries:
            if not valid(entry) or not isinstance(entry, dict) or not isinstance(entry.get("variable"), str):
                continue
            if entry["variable"] in seen:
                notes.append(f"{key}: {entry['variable']!r} listed more than once; only the first entry counts")
                continue
            seen.add(entry["variable"])
            kept.append(entry)
        clean[key] = kept
    return clean, notes


def decide(rubric: Sequence[Mapping[str, Any]], clean_answer: Mapping[str, Any]) -> dict[str, bool]:
    """The rules judge: each item's machine check on the sanitised answer."""
    return {item["id"]: holds(item["check"], clean_answer) for item in rubric}


def grade_answer(spec: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """Grade a structured answer against a task's grading spec (task_id, answer_schema, rubric) as plain data.

    Returns what `worldgen grade` prints for the rules judge: task_id, score (rounded to 6 places), items
    and schema_problems (this module's wording; `worldgen grade` words schema problems as jsonschema does).
    """
    clean, notes = sanitise(spec["answer_schema"], answer)
    decisions = decide(spec["rubric"], clean)
    return result(spec, decisions, problems(spec["answer_schema"], answer)[:10] + notes)


def result(spec: Mapping[str, Any], decisions: Mapping[str, bool], schema_problems: list[str]) -> dict[str, Any]:
    items = [
        {
            "id": i["id"],
            "polarity": i["polarity"],
            "kind": i["kind"],
            "points": i["points"],
            "decision": bool(decisions.get(i["id"])),
            "criterion": i["criterion"],
        }
        for i in spec["rubric"]
    ]
    return {
        "task_id": spec["task_id"],
        "score": round(score(spec["rubric"], decisions), 6),
        "items": items,
        "schema_problems": schema_problems,
    }


# --- the LLM judge's prompt (rubrics/judge_anthropic.py and the exported grader both send exactly this) ---

DEFAULT_JUDGE_MODEL = "claude-sonnet-4-6"
JUDGE_SYSTEM = (
    "You grade a data-analysis report against one rubric criterion. Decide only whether the report does what "
    "the criterion describes; ignore everything else in it. Reply with exactly one word: YES or NO."
)
JUDGE_MAX_TOKENS = 5


def judge_question(task_prompt: str, polarity: str, criterion: str, report: str) -> str:
    """The user message asking whether `report` does what one rubric item's criterion describes."""
    return (
        f"Task given to the analyst:\n{task_prompt}\n\n"
        f"Criterion ({'an error to detect' if polarity == 'negative' else 'a finding to credit'}):\n{criterion}\n\n"
        f"Report:\n{report}\n\nDoes the report do what the criterion describes? Answer YES or NO."
    )


def judge_verdict(text: str) -> bool | None:
    """YES -> True, NO -> False, anything else -> None (the judge gave no decision)."""
    text = text.strip().upper()
    if not text.startswith(("YES", "NO")):
        return None
    return text.startswith("YES")

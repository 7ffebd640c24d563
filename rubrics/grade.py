"""Grading an answer against a task's rubric: the offline `rules` judge and the dispatcher.

The rules judge decides each item with its machine check on the structured answer. The `anthropic` judge
(rubrics/judge_anthropic.py) decides each item's criterion from a free-text report instead. Both return
`{"score": float, "items": [...]}`; scoring is `rubrics.scoring` either way (the code the exports ship).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from contracts.errors import WorldgenError
from contracts.safeio import MIB, one_line, read_json
from rubrics import scoring
from rubrics.model import TASK_SCHEMA_VERSION, Task, holds


class GradeError(WorldgenError):
    """A task or answer file that cannot be graded."""


# Limits on what a grader reads. Our tasks are ~10 KiB and name at most ~16 variables per answer list.
MAX_TASK_BYTES = 4 * MIB
MAX_ANSWER_BYTES = 1 * MIB
MAX_REPORT_BYTES = 1 * MIB
MAX_ANSWER_ENTRIES = 300  # per list; a world has ~16 variables, so more is junk, and validation is per entry
MAX_ANSWER_VALUES = 5_000  # every value in the answer, nested ones included
MAX_PROBLEMS = 20  # problems reported back; the rest are counted
MAX_PROBLEM_CHARS = 200
# The JSON Schema keywords our answer schemas use (worldgen/tasks.py::answer_schema) plus two annotations.
# Anything else (pattern, format, $ref, if/then, dependentSchemas, ...) could run a user's regex or fetch
# a document; a task that needs it is refused rather than evaluated.
SCHEMA_KEYWORDS = frozenset({"type", "required", "properties", "items", "enum", "description", "title"})
SCHEMA_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def load_task(path: Path) -> Task:
    raw = read_json(path, max_bytes=MAX_TASK_BYTES, what="task", error=GradeError)
    if isinstance(raw, dict) and raw.get("schema_version") != TASK_SCHEMA_VERSION:
        raise GradeError(
            f"{one_line(path)}: task schema_version {one_line(repr(raw.get('schema_version')), 60)} "
            f"is not the supported {TASK_SCHEMA_VERSION!r}"
        )
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise GradeError(
            f"{one_line(path)}: not a task: field {one_line('.'.join(map(str, err['loc'])), 120)}: {one_line(err['msg'], 160)}"
        ) from None
    problem = unsafe_schema(task.answer_schema)
    if problem:
        raise GradeError(f"{one_line(path)}: answer_schema {problem}; refusing to grade with it")
    try:
        jsonschema.Draft202012Validator.check_schema(task.answer_schema)
    except jsonschema.SchemaError as exc:
        raise GradeError(
            f"{one_line(path)}: answer_schema is not a valid JSON Schema: {one_line(exc.message, 120)}"
        ) from None
    return task


def unsafe_schema(schema: Any, where: str = "", root: bool = True) -> str | None:
    """Why `schema` uses more of JSON Schema than our answer schemas do (None when it does not)."""
    if not isinstance(schema, dict):
        return f"at {where or '(root)'} is not an object"
    for key, value in schema.items():
        at = f"{where}/{key}"
        if key == "$schema" and root:
            if value != DRAFT_2020_12:
                return f"$schema must be {DRAFT_2020_12!r}"
        elif key not in SCHEMA_KEYWORDS:
            allowed = ", ".join(sorted(SCHEMA_KEYWORDS | {"$schema"}))
            return f"uses keyword {one_line(repr(key), 60)} at {where or '(root)'}; only {allowed} are accepted"
        elif key in ("description", "title"):
            if not isinstance(value, str):
                return f"at {at} must be a string"
        elif key == "type":
            types = value if isinstance(value, list) else [value]
            if not types or not all(isinstance(t, str) and t in SCHEMA_TYPES for t in types):
                return f"at {at} names an unknown type"
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
                return f"at {at} must be a list of property names"
        elif key == "enum":
            if not isinstance(value, list) or not all(
                v is None or isinstance(v, str | int | float | bool) for v in value
            ):
                return f"at {at} must be a list of plain values"
        elif key == "properties":
            if not isinstance(value, dict):
                return f"at {at} must be an object"
            for name, sub in value.items():
                problem = unsafe_schema(sub, f"{at}/{one_line(name, 40)}", root=False)
                if problem:
                    return problem
        elif key == "items":
            problem = unsafe_schema(value, at, root=False)
            if problem:
                return problem
    return None


def load_answer(path: Path) -> dict[str, Any]:
    answer = read_json(path, max_bytes=MAX_ANSWER_BYTES, what="answer", error=GradeError)
    if not isinstance(answer, dict):
        raise GradeError(f"{one_line(path)}: the answer must be a JSON object, got {type(answer).__name__}")
    values = 0
    stack: list[Any] = [answer]
    while stack:  # the depth is capped by read_json; this caps the breadth
        node = stack.pop()
        values += 1
        if values > MAX_ANSWER_VALUES:
            raise GradeError(f"{one_line(path)}: the answer holds more than {MAX_ANSWER_VALUES} values; refusing it")
        if isinstance(node, list):
            if len(node) > MAX_ANSWER_ENTRIES:
                raise GradeError(
                    f"{one_line(path)}: a list in the answer has {len(node)} entries, over the limit of {MAX_ANSWER_ENTRIES}"
                )
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
    return answer


def schema_problems(task: Task, answer: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(task.answer_schema)
    problems = []
    for e in validator.iter_errors(answer):
        if len(problems) == 10:
            break
        problems.append(one_line(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}", MAX_PROBLEM_CHARS))
    return problems


def sanitise(task: Task, answer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Drop list entries the schema rejects and repeated variables (the first entry counts), reporting both;
    the report stays short whatever the answer holds."""
    clean, notes = scoring.sanitise(task.answer_schema, answer, _jsonschema_test)
    problems = schema_problems(task, answer)
    shown = [one_line(n, MAX_PROBLEM_CHARS) for n in notes[: max(MAX_PROBLEMS - len(problems), 0)]]
    unshown = len(notes) - len(shown)
    return clean, problems + shown + ([f"and {unshown} more problem(s) of the same kinds"] if unshown else [])


def _jsonschema_test(schema: Any):
    return jsonschema.Draft202012Validator(schema).is_valid


def grade_rules(task: Task, answer: dict[str, Any]) -> dict[str, Any]:
    """Deterministic grading of the structured answer; items the answer does not address simply do not hold."""
    clean, problems = sanitise(task, answer)
    decisions = {item.id: holds(item.check, clean) for item in task.rubric}
    return _result(task, decisions, problems)


def _result(task: Task, decisions: dict[str, bool], problems: list[str]) -> dict[str, Any]:
    spec = {"task_id": task.task_id, "rubric": [item.model_dump() for item in task.rubric]}
    return scoring.result(spec, decisions, problems)


def grade(
    task: Task, answer: dict[str, Any] | None, judge: str = "rules", report: str | None = None, **options: Any
) -> dict[str, Any]:
    if judge == "rules":
        if answer is None:
            raise GradeError("the rules judge grades a structured answer: give ANSWER.json")
        return grade_rules(task, answer)
    if judge == "anthropic":
        from rubrics.judge_anthropic import AnthropicJudge

        if report is None:
            raise GradeError("the anthropic judge reads a free-text report: give --report REPORT.md")
        decisions = AnthropicJudge(**options).decide(task, report)
        return _result(task, decisions, schema_problems(task, answer) if answer is not None else [])
    raise GradeError(f"unknown judge {judge!r}; use rules or anthropic")

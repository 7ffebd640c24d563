"""Grading an answer against a task's rubric: the offline `rules` judge and the dispatcher.

The rules judge decides each item with its machine check on the structured answer. The `anthropic` judge
(rubrics/judge_anthropic.py) decides each item's criterion from a free-text report instead. Both return
`{"score": float, "items": [...]}`; scoring is `rubrics.scoring` either way (the code the exports ship).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from contracts.errors import WorldgenError
from rubrics import scoring
from rubrics.model import TASK_SCHEMA_VERSION, Task, holds


class GradeError(WorldgenError):
    """A task or answer file that cannot be graded."""


def load_task(path: Path) -> Task:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GradeError(f"{path}: cannot read task ({exc})") from None
    if isinstance(raw, dict) and raw.get("schema_version") != TASK_SCHEMA_VERSION:
        raise GradeError(
            f"{path}: task schema_version {raw.get('schema_version')!r} is not the supported {TASK_SCHEMA_VERSION!r}"
        )
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise GradeError(f"{path}: not a task: field {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    if "$ref" in json.dumps(task.answer_schema) or "$dynamicRef" in json.dumps(task.answer_schema):
        raise GradeError(f"{path}: answer_schema may not reference other documents (grading stays offline)")
    try:
        jsonschema.Draft202012Validator.check_schema(task.answer_schema)
    except jsonschema.SchemaError as exc:
        raise GradeError(f"{path}: answer_schema is not a valid JSON Schema: {exc.message[:120]}") from None
    return task


def load_answer(path: Path) -> dict[str, Any]:
    try:
        answer = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GradeError(f"{path}: cannot read answer as JSON ({exc})") from None
    if not isinstance(answer, dict):
        raise GradeError(f"{path}: the answer must be a JSON object, got {type(answer).__name__}")
    return answer


def schema_problems(task: Task, answer: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(task.answer_schema)
    return [f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in validator.iter_errors(answer)][:10]


def sanitise(task: Task, answer: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Drop list entries the schema rejects and repeated variables (the first entry counts), reporting both."""
    clean, notes = scoring.sanitise(task.answer_schema, answer, _jsonschema_test)
    return clean, schema_problems(task, answer) + notes


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

"""Rubric items and their machine checks: the benchmark's metric and the RL reward.

A positive item earns its points when its check holds on the answer; a negative item costs its points when
its check holds (the answer commits that error). Score = (earned - triggered) / total positive, in [0, 1].
Checks read the structured answer only; insights the rubric does not list earn and cost nothing.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TASK_SCHEMA_VERSION = "1.0"


class Check(BaseModel):
    """A machine check on the structured answer.

    kinds:
    - number: the number at `path` lies within `tolerance` of `expected` (and, if `unless` is set, not
      within `tolerance` of `unless`: used by negatives such as "computed from uncleaned data").
    - sign: the number at `path` has the sign of `expected` (negatives use the opposite sign).
    - named: the list at `path` holds an entry whose `variable` is `variable` (with `direction`, if set).
    - entry_number: that entry's `field` lies within `tolerance` of `expected`.
    - named_outside: the list at `path` names some variable not in `allowed`.
    """

    model_config = ConfigDict(extra="forbid")
    kind: Literal["number", "sign", "named", "entry_number", "named_outside"]
    path: str
    expected: float | None = None
    tolerance: float | None = None
    unless: float | None = None
    variable: str | None = None
    direction: Literal["+", "-"] | None = None
    field: str | None = None
    allowed: list[str] | None = None


class RubricItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    polarity: Literal["positive", "negative"]
    kind: Literal["computation", "insight"]
    criterion: str
    points: float = Field(gt=0)
    check: Check
    phenomenon: str | None = Field(default=None, description="the contract phenomenon backing this item")


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: str = TASK_SCHEMA_VERSION
    task_id: str
    world_id: str
    kind: Literal["cause", "consequence"]
    variable: str
    prompt: str
    files: list[str]
    answer_schema: dict[str, Any]
    rubric: list[RubricItem]
    expected_answer: dict[str, Any]
    reference_answer: dict[str, Any] = Field(description="what the reference analysis of the observed files found")
    reference_score: float


def lookup(answer: Any, path: str) -> Any:
    """`change.relative_change` -> answer["change"]["relative_change"]; None when absent."""
    node = answer
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _entry(answer: Any, check: Check) -> dict | None:
    entries = lookup(answer, check.path)
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, dict) and entry.get("variable") == check.variable:
            return entry
    return None


def holds(check: Check, answer: Any) -> bool:
    """Whether the answer satisfies the check (for a negative item: commits the error)."""
    match check.kind:
        case "number":
            value = _number(lookup(answer, check.path))
            if value is None or check.expected is None or check.tolerance is None:
                return False
            near = abs(value - check.expected) <= check.tolerance
            if check.unless is not None and abs(value - check.unless) <= check.tolerance:
                return False
            return near
        case "sign":
            value = _number(lookup(answer, check.path))
            return value is not None and check.expected is not None and value * check.expected > 0
        case "named":
            entry = _entry(answer, check)
            return entry is not None and (check.direction is None or entry.get("direction") == check.direction)
        case "named_outside":
            entries = lookup(answer, check.path)
            allowed = set(check.allowed or [])
            return isinstance(entries, list) and any(
                isinstance(e, dict) and e.get("variable") not in allowed for e in entries
            )
        case "entry_number":
            entry = _entry(answer, check)
            value = _number(entry.get(check.field)) if entry and check.field else None
            return (
                value is not None
                and check.expected is not None
                and abs(value - check.expected) <= (check.tolerance or 0)
            )
    return False


def score(rubric: list[RubricItem], decisions: dict[str, bool]) -> float:
    """(positive points earned - negative points triggered) / total positive points, clipped to [0, 1]."""
    total = sum(i.points for i in rubric if i.polarity == "positive")
    earned = sum(i.points for i in rubric if i.polarity == "positive" and decisions.get(i.id))
    lost = sum(i.points for i in rubric if i.polarity == "negative" and decisions.get(i.id))
    return 0.0 if total == 0 else min(1.0, max(0.0, (earned - lost) / total))

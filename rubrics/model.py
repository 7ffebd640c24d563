"""Rubric items and their machine checks: the benchmark's metric and the RL reward.

A positive item earns its points when its check holds on the answer; a negative item costs its points when
its check holds (the answer commits that error). Score = (earned - triggered) / total positive, in [0, 1].
Checks read the structured answer only; insights the rubric does not list earn and cost nothing.
The checking and scoring code itself is rubrics/scoring.py (standard library only, shipped with exports).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rubrics import scoring

TASK_SCHEMA_VERSION = "1.0"


class Check(BaseModel):
    """A machine check on the structured answer.

    kinds:
    - number: the number at `path` lies within `tolerance` of `expected` (and, if `unless` is set, not
      within `tolerance` of `unless`: used by negatives such as "computed from uncleaned data").
    - sign: the number at `path` has the sign of `expected` (negatives use the opposite sign).
    - named: the list at `path` holds an entry whose `variable` is `variable` (with `direction`, if set).
    - entry_number: that entry's `field` lies within `tolerance` of `expected` (and, if `allowed` is set, no
      entry for a variable outside `allowed` carries more than `tolerance` of that field: a share spread over
      variables that are no causes is a share taken from the causes, so an even split over guesses earns none).
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
    return scoring.lookup(answer, path)


def holds(check: Check, answer: Any) -> bool:
    """Whether the answer satisfies the check (for a negative item: commits the error); see rubrics.scoring."""
    return scoring.holds(check.model_dump(), answer)


def score(rubric: list[RubricItem], decisions: dict[str, bool]) -> float:
    """(positive points earned - negative points triggered) / total positive points, clipped to [0, 1]."""
    return scoring.score([item.model_dump(include={"id", "polarity", "points"}) for item in rubric], decisions)

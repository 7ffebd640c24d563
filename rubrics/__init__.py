"""Rubric items, scoring, and the graders (deterministic rules judge; optional Anthropic LLM judge)."""

import contracts  # noqa: F401  (first: it pins numpy's kernels before numpy loads; contracts/kernels.py)
from rubrics.grade import GradeError, grade, grade_rules, load_answer, load_task
from rubrics.model import Check, RubricItem, Task, holds, score

__all__ = [
    "Check",
    "GradeError",
    "RubricItem",
    "Task",
    "grade",
    "grade_rules",
    "holds",
    "load_answer",
    "load_task",
    "score",
]

"""The RL reward for worldgen pool rows: verl's custom-reward signature, also callable from SkyRL and OpenRLHF.

    reward.custom_reward_function.path=<site-packages>/worldgen/reward.py  reward.custom_reward_function.name=compute_score

`compute_score(data_source, solution_str, ground_truth)` pulls the final JSON answer out of the model's text
(the last `<answer>...</answer>`; else the last fenced ```json block; else the last bare JSON object), grades
it with the rules judge (rubrics/scoring.py, the code `worldgen grade` and the exported benches score with)
against the row's ground truth, and returns the score in [0, 1]. Text it cannot read scores 0: it never
raises on model output, and its work is bounded (longer text is refused before parsing). A ground truth
that is not a worldgen grading spec is a configuration error and raises ValueError.

Standard library plus rubrics.scoring only, so reward workers import it cheaply.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from rubrics import scoring

MAX_TEXT_CHARS = 200_000  # a final answer is a few KB; a longer completion is refused, not parsed
BARE_SCAN_CHARS = 20_000  # a bare JSON object is looked for in the text's tail only
MAX_BARE_ATTEMPTS = 500  # '{' positions tried at most when looking for a bare object
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.S)


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: str | dict,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> float:
    """The rubric score of the answer in `solution_str`, in [0, 1]; 0 when there is no readable answer."""
    spec = _spec(ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, sort_keys=True))
    answer = extract_answer(solution_str)
    if answer is None:
        return 0.0
    try:
        return float(scoring.grade_answer(spec, answer)["score"])
    except RecursionError:  # absurdly nested answers
        return 0.0


def score_batch(solutions: list[str], ground_truths: list[str | dict]) -> list[float]:
    """compute_score over a batch (for OpenRLHF-style reward functions that take lists)."""
    return [compute_score(None, s, g) for s, g in zip(solutions, ground_truths, strict=True)]


@lru_cache(maxsize=4096)
def _spec(ground_truth: str) -> dict:
    try:
        spec = json.loads(ground_truth)
    except ValueError:
        raise ValueError("ground_truth is not JSON: is this row from `worldgen export pool`?") from None
    if not isinstance(spec, dict) or not {"task_id", "answer_schema", "rubric"} <= set(spec):
        raise ValueError("ground_truth is not a worldgen grading spec (task_id, answer_schema, rubric)")
    return spec


def extract_answer(text: Any) -> dict | None:
    """The final JSON object of a model's reply, or None."""
    if not isinstance(text, str) or not text or len(text) > MAX_TEXT_CHARS:
        return None
    tagged = ANSWER_TAG.findall(text)
    if tagged:
        return _object_in(tagged[-1])
    return _object_in(text)


def _object_in(text: str) -> dict | None:
    fenced = FENCED.findall(text)
    if fenced:
        return _loads(fenced[-1])
    return _last_bare_object(text)


def _loads(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _last_bare_object(text: str) -> dict | None:
    """The last top-level JSON object in `text` (scanning its tail left to right, skipping what parses)."""
    decoder = json.JSONDecoder()
    tail_start = max(0, len(text) - BARE_SCAN_CHARS)
    position, found, attempts = text.find("{", tail_start), None, 0
    while position != -1 and attempts < MAX_BARE_ATTEMPTS:
        attempts += 1
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            found = value
        position = text.find("{", end)
    return found

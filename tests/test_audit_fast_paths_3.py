"""The auditor's cleaning and reading fast paths (third round) against their plain code on varied inputs:
re-sent events dropped by counting distinct ids and by polars' `unique`."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.dataset import first_per_event

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _plain_first_per_event(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.unique(subset=["event_id"], keep="first", maintain_order=True)


def _assert_first_per_event(frame: pl.DataFrame) -> None:
    got, expected = first_per_event(frame), _plain_first_per_event(frame)
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)


def _events(ids, dtype=None) -> pl.DataFrame:
    ids = pl.Series("event_id", ids, dtype=dtype)
    return pl.DataFrame([ids, pl.Series("row", np.arange(len(ids))), pl.Series("v", np.linspace(0, 1, len(ids)))])


@pytest.mark.parametrize("seed", range(12))
def test_first_per_event_matches_unique_on_random_ids(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    span = int(rng.choice([2, n + 1, 10 * n + 1, 2**62]))
    ids = rng.integers(0, max(span, 1), n)
    if seed % 3 == 0:
        ids = rng.permutation(n) + int(rng.integers(-(2**40), 2**40))  # distinct, shuffled
    _assert_first_per_event(_events(ids, pl.Int64))
    _assert_first_per_event(_events([f"EV-{i}" for i in ids], pl.String))
    with_nulls = [None if rng.random() < 0.1 else int(i) for i in ids]
    _assert_first_per_event(_events(with_nulls, pl.Int64))
    _assert_first_per_event(_events([None if i is None else f"k{i}" for i in with_nulls], pl.String))


@pytest.mark.parametrize(
    "ids, dtype",
    [
        ([], pl.Int64),
        ([], pl.String),
        ([None], pl.Int64),
        ([None, None], pl.Int64),  # two nulls: one is kept, as `unique` keeps it
        ([None, 1, None], pl.String),
        ([None, "a", "b"], pl.String),  # one null among distinct ids: nothing repeats
        ([INT64_MIN, INT64_MAX, INT64_MIN, 0], pl.Int64),
        ([INT64_MAX, INT64_MIN], pl.Int64),
        ([3, 3, 3], pl.Int64),
        (["", "", "x"], pl.String),
        (["é", "e\u0301", "é"], pl.String),
        ([1, 2, 1], pl.Int32),  # other types: the plain way
        ([1.0, float("nan"), float("nan"), -0.0, 0.0], pl.Float64),
    ],
)
def test_first_per_event_edge_cases(ids, dtype):
    if dtype == pl.String:
        ids = [None if i is None else str(i) for i in ids]
    _assert_first_per_event(_events(ids, dtype))


def test_first_per_event_returns_the_frame_when_nothing_repeats():
    frame = _events(np.arange(50), pl.Int64)
    assert first_per_event(frame) is frame

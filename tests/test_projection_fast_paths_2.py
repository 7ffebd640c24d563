"""The projection check's undo, its faster ways against the plain ones: a column swapped into a copy of the
frame against `with_columns`."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.checks import _with_column


def outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("seed", range(100))
def test_a_column_swapped_into_a_copy_is_with_columns(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 20))
    frame = pl.DataFrame({"a": rng.random(n), "b": [str(v) for v in rng.integers(0, 5, n)], "c": range(n)})
    frame = pl.concat([frame, frame]) if seed % 2 else frame  # two chunks
    name = ["a", "b", "c", "new"][seed % 4]
    length = frame.height + (1 if seed % 7 == 0 else 0)  # a column of another height: with_columns' error
    column = pl.Series(name, rng.integers(0, 9, length))
    before = frame.clone()
    got = outcome(lambda: _with_column(frame, column))
    want = outcome(lambda: frame.with_columns(column))
    if isinstance(want, tuple):
        assert got == want
    else:
        assert got.schema == want.schema and got.to_dict(as_series=False) == want.to_dict(as_series=False)
    assert frame.equals(before)

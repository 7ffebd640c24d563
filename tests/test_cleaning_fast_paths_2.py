"""Differential tests (round 2): the cleaning's newer fast paths (auditors/dataset.py) against the plain polars
operations they stand for, on random and adversarial inputs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.dataset import _renamed, _selected


def _outcome(fn):
    """What a call gives: its frame, or its error's type and message (an audit reason quotes both)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is the outcome compared
        return (type(exc).__name__, str(exc))


def _same(got, want) -> bool:
    if isinstance(want, tuple) or isinstance(got, tuple):
        return got == want
    return got.schema == want.schema and got.equals(want, null_equal=True)


FRAME = pl.DataFrame(
    {"a": [1, None, 3], "b": ["x", "y", None], "c": [0.5, float("nan"), None], "d": [True, False, None]},
    schema={"a": pl.Int64, "b": pl.String, "c": pl.Float64, "d": pl.Boolean},
)


@pytest.mark.parametrize(
    "names",
    [["a", "b", "c", "d"], ["d", "a"], [], ["c"], ["a", "a"], ["a", "zz"], ["zz"], ["b", "c", "b"]],
)
@pytest.mark.parametrize("rows", [3, 0])
def test_selected_is_select(names, rows):
    """The columns in the order asked, the frame's rows (none, too), and select's own error for a name twice
    or one the frame lacks."""
    frame = FRAME.head(rows)
    assert _same(_outcome(lambda: _selected(frame, names)), _outcome(lambda: frame.select(names)))


@pytest.mark.parametrize(
    "mapping",
    [
        {"a": "unit_id", "b": "name"},
        {},
        {"a": "b"},  # onto a column that stays: a clash
        {"a": "x", "b": "x"},  # two onto one name
        {"a": "b", "b": "a"},  # a swap
        {"zz": "y"},  # a column the frame lacks
        {"a": "a"},
    ],
)
def test_renamed_is_rename(mapping):
    got = _outcome(lambda: _renamed(FRAME, mapping))
    assert _same(got, _outcome(lambda: FRAME.rename(mapping)))
    if not isinstance(got, tuple):
        assert FRAME.columns == ["a", "b", "c", "d"]  # the caller's frame keeps its names


@pytest.mark.parametrize("seed", range(5))
def test_selected_and_renamed_on_random_frames(seed):
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 8))
    frame = pl.DataFrame({f"c{i}": rng.normal(size=50) for i in range(width)})
    names = [f"c{i}" for i in rng.permutation(width)[: int(rng.integers(0, width + 1))]]
    assert _same(_selected(frame, names), frame.select(names))
    mapping = {name: f"n{int(rng.integers(0, 3 * width))}" for name in names}
    assert _same(_outcome(lambda: _renamed(frame, mapping)), _outcome(lambda: frame.rename(mapping)))

"""The invariant check's fast paths give the plain verdicts: a key seen strictly increasing is unique (the
plain test hashes every key), and a range read in one pass gives the series' own count, min and max."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.checks import _strictly_increasing


def _frame(rng: np.random.Generator, n: int, ncols: int, ordered: bool) -> pl.DataFrame:
    data = {f"k{j}": rng.integers(0, 4, n) for j in range(ncols)}
    frame = pl.DataFrame(data)
    return frame.sort(list(data)) if ordered else frame


@pytest.mark.parametrize("seed", range(300))
def test_strictly_increasing_keys_are_unique(seed):
    rng = np.random.default_rng(seed)
    ncols = int(rng.integers(1, 4))
    frame = _frame(rng, int(rng.integers(0, 12)), ncols, ordered=seed % 2 == 0)
    if seed % 4 == 0:
        frame = frame.unique(maintain_order=True)  # sorted and unique: the fast path must see it
    cols = frame.columns
    unique = frame.height == 0 or frame.select(cols).is_duplicated().sum() == 0
    fast = _strictly_increasing(frame, cols)
    if fast:
        assert unique
    if seed % 4 == 0 and frame.height >= 2:
        assert fast  # a sorted unique table is recognised
    # The plain check's verdict whatever the fast path says.
    assert (fast or frame.select(cols).is_duplicated().sum() == 0) == unique


def test_strictly_increasing_needs_every_column_to_break_ties():
    frame = pl.DataFrame({"a": [1, 1, 2], "b": [5, 5, 0]})
    assert not _strictly_increasing(frame, ["a", "b"])
    assert _strictly_increasing(pl.DataFrame({"a": [1, 1, 2], "b": [5, 6, 0]}), ["a", "b"])
    assert not _strictly_increasing(pl.DataFrame({"a": [1, 2, 2]}), ["a"])
    assert not _strictly_increasing(pl.DataFrame({"a": [1.0, 2.0]}), ["a"])  # floats: the plain test
    assert not _strictly_increasing(pl.DataFrame({"a": [1, None, 3]}), ["a"])
    assert not _strictly_increasing(pl.DataFrame({"a": [2, 1]}), ["a"])  # descending: the plain test


WRAPS = {  # keys whose differences wrap around: each step "positive", yet the first key comes back
    pl.Int8: [0, 100, -56, 0],
    pl.Int16: [0, 30_000, -5_536, 0],
    pl.Int32: [0, 2_000_000_000, -294_967_296, 0],
    pl.Int64: [0, int(0.7 * 2**63), 2 * int(0.7 * 2**63) - 2**64, 0],
}


@pytest.mark.parametrize("dtype", list(WRAPS), ids=str)
def test_keys_whose_differences_wrap_around_are_not_seen_increasing(dtype):
    """Found by review: a difference of integers wraps, so repeated keys could pass as strictly increasing
    and a world with two events of one id pass `unique_key`. Keys are compared, never subtracted."""
    from auditors.checks import _increasing

    keys = pl.Series("k", WRAPS[dtype], dtype=dtype)
    frame = pl.DataFrame({"k": keys, "j": [1, 2, 3, 4]})
    assert frame.select("k").is_duplicated().any()
    assert not _strictly_increasing(frame, ["k"])
    assert not _strictly_increasing(frame, ["k", "j"])
    assert not _increasing(keys.cast(pl.Int64))


def test_a_key_naming_one_column_twice_goes_the_plain_way():
    """The plain test cannot select a column twice (and fails the check); the fast one must not pass it."""
    assert not _strictly_increasing(pl.DataFrame({"k": [1, 2, 3]}), ["k", "k"])


def _cell_column(rng, n, dtype, blanks=False):
    values = [int(v) for v in rng.integers(-2, 4, n)]
    return pl.Series([None if blanks and rng.random() < 0.2 else v for v in values], dtype=dtype)


@pytest.mark.parametrize("seed", range(400))
def test_events_counted_by_cell_are_the_joined_counts(seed):
    """_conserved is the group-by and join on random unit-day tables: counts right or off by one, events
    outside every row's cell, repeated rows, blanks, keys of two types, counts that are not integers, a
    column named 'len', missing columns, a box too large for the bincount."""
    from auditors.checks import _conserved, _conserved_plain

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 12)), int(rng.integers(0, 30))
    kind = seed % 10
    key_type = pl.Int32 if kind == 1 else pl.Int64
    panel = pl.DataFrame({"unit_id": _cell_column(rng, n, pl.Int64, kind == 2), "day": _cell_column(rng, n, pl.Int64)})
    events = pl.DataFrame(
        {"unit_id": _cell_column(rng, m, key_type, kind == 3), "day": _cell_column(rng, m, pl.Int64, kind == 4)}
    )
    if kind == 5:
        events = events.with_columns(pl.col("day") * 10**9)  # a box far larger than the rows
    truth = panel.join(events.group_by(["unit_id", "day"]).len(), on=["unit_id", "day"], how="left")["len"]
    counts = truth.fill_null(0).cast(pl.Int64) + (rng.random(n) < 0.1).astype(np.int64)  # sometimes wrong
    panel = panel.with_columns(n_events=counts.cast(pl.Float64) if kind == 6 else counts)
    if kind == 7:
        panel = panel.with_columns(len=pl.col("n_events"))
    column = "missing" if kind == 8 else "n_events"
    tables = {"panel": panel, "events": events}
    assert outcome(lambda: _conserved(panel, tables, column)) == outcome(
        lambda: _conserved_plain(panel, tables, column)
    )


def outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)

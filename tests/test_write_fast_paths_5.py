"""The fifth set of fast paths of the projection and the write stage give what the plain ways give."""

from __future__ import annotations

import gc

import numpy as np
import polars as pl
import pytest

from worldgen import observe
from worldgen.defects import to_ranges
from worldgen.observe import _stable_order, sort_rows

HIGHS = [1, 2, 3, 2**16 - 1, 2**16, 2**16 + 1, 2**32 - 1, 2**32, 2**48 + 5, 2**62 - 1]


def _codes(rng: np.random.Generator, n: int, high: int, how: str) -> np.ndarray:
    codes = rng.integers(0, high, n, dtype=np.int64, endpoint=True)
    match how:
        case "random":
            return codes
        case "few":  # many ties
            return rng.choice(codes[: max(1, n // 50)], n)
        case "sorted":
            return np.sort(codes)
        case "reversed":
            return np.sort(codes)[::-1].copy()
        case "nearly":  # in order but for a few rows (the timsort's side of the threshold and just past it)
            codes = np.sort(codes)
            moved = rng.choice(n, size=max(1, int(n * rng.choice([0.005, 0.02]))), replace=False) if n else []
            codes[moved] = rng.integers(0, high, len(moved), endpoint=True)
            return codes
    raise AssertionError(how)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("how", ["random", "few", "sorted", "reversed", "nearly"])
def test_stable_order_is_numpys_stable_argsort(seed, how):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 7, 1000, 20_000):
        for high in HIGHS:
            codes = _codes(rng, n, high, how)
            assert np.array_equal(_stable_order(codes), np.argsort(codes, kind="stable")), (n, high)
    assert np.array_equal(_stable_order(np.zeros(5000, dtype=np.int64)), np.arange(5000))
    extremes = np.array([2**62 - 1, 0, 2**62 - 1, 1, 0] * 400, dtype=np.int64)
    assert np.array_equal(_stable_order(extremes), np.argsort(extremes, kind="stable"))


@pytest.mark.parametrize("seed", range(3))
def test_sort_rows_by_radix_is_the_stable_sort(seed, monkeypatch):
    """Frames sorted on keys wide enough for several radix passes, shuffled or a panel's transpose, ties too;
    and with the radix sort forced on rows mostly in order."""
    rng = np.random.default_rng(seed)
    n = 5000
    units, days = rng.integers(0, 70, n), rng.integers(0, 2000, n)
    frame = pl.DataFrame(
        {
            "unit": units,
            "day": days,
            "time": days * 86400 + rng.integers(0, 86400, n),
            "id": rng.permutation(n) + 10**9,
            "row": np.arange(n),
        }
    )
    panel = frame.sort(["unit", "day"], maintain_order=True)
    for share in (observe.PRESORTED_MAX_SHARE, -1.0):
        monkeypatch.setattr(observe, "PRESORTED_MAX_SHARE", share)
        for source in (frame, panel):
            for by in (["day", "unit"], ["time", "id"], ["unit", "time"], ["id"], ["unit"], ["day", "unit", "id"]):
                fast = sort_rows(source, by)
                assert fast.equals(source.sort(by, maintain_order=True)), by


@pytest.mark.parametrize("collector_on", [True, False])
def test_to_ranges_leaves_the_collector_as_it_was(collector_on):
    """Ranges made with the collector held off are the plain runs, and the collector is left as found."""
    rng = np.random.default_rng(5)
    rows = np.sort(rng.choice(30_000, 20_000, replace=False))
    plain = []
    for row in rows.tolist():
        if plain and plain[-1][1] == row:
            plain[-1][1] = row + 1
        else:
            plain.append([row, row + 1])
    was = gc.isenabled()
    try:
        (gc.enable if collector_on else gc.disable)()
        assert to_ranges(rows) == plain
        assert to_ranges(np.zeros(0, dtype=np.int64)) == []
        assert gc.isenabled() == collector_on
    finally:
        (gc.enable if was else gc.disable)()

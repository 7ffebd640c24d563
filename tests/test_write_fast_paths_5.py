"""The fifth set of fast paths of the projection and the write stage give what the plain ways give."""

from __future__ import annotations

import gc

import numpy as np
import polars as pl
import pytest

from worldgen import observe
from worldgen.defects import to_ranges
from worldgen.observe import _frame_nan_to_null, _stable_order, _take, sort_rows, text_series
from worldgen.write import canonical_frame

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


def _frozen(values: list) -> np.ndarray:
    array = np.array(values, dtype=object)
    array.flags.writeable = False
    return array


TEXT_COLUMNS = {
    "texts": ["Acme Ltd", "", "日本", "a\x00b", " x "] * 40,
    "blanks": ["a", None, "b"] * 40,
    "all_blank": [None] * 120,
    "mixed": ["a", 1, 2.5] * 40,
    "ints": list(range(120)),
    "empty": [],
}


def _take_before(values: np.ndarray, rows: np.ndarray) -> np.ndarray | pl.Series:
    """`_take` as it was before texts were gathered from `text_series`."""
    if values.dtype == object and len(rows) > len(values):
        series = pl.Series(values)
        if series.dtype == pl.String:
            return series.gather(rows)
    return values[rows]


def _same_frame(fast: pl.DataFrame, plain: pl.DataFrame) -> None:
    assert fast.schema == plain.schema
    assert fast.to_dict(as_series=False) == plain.to_dict(as_series=False)  # (object columns never `equals`)


@pytest.mark.parametrize("name", list(TEXT_COLUMNS))
@pytest.mark.parametrize("frozen", [True, False])
def test_take_and_canonical_frame_are_the_plain_conversions(name, frozen):
    """Texts gathered from a frozen column's series give the frame numpy's gather gave (types too, for subsets
    of blanks and empty ones), and the canonical table is the frame of the arrays; other arrays go the plain way."""
    values = _frozen(TEXT_COLUMNS[name]) if frozen else np.array(TEXT_COLUMNS[name], dtype=object)
    rng = np.random.default_rng(len(name))
    n = len(values)
    picks = [np.arange(n), rng.integers(0, max(n, 1), 3 * n) if n else np.zeros(0, dtype=np.int64)]
    picks += [np.zeros(0, dtype=np.int64), np.flatnonzero(np.array([v is None for v in values], dtype=bool))]
    for rows in picks:
        try:
            plain = _frame_nan_to_null({"c": _take_before(values, rows)})
        except (TypeError, ValueError, pl.exceptions.PolarsError) as error:
            with pytest.raises(type(error)):  # the same error either way
                _frame_nan_to_null({"c": _take(values, rows)})
            continue
        _same_frame(_frame_nan_to_null({"c": _take(values, rows)}), plain)
    columns = {"c": values, "n": np.arange(n)}
    try:
        plain = pl.DataFrame(dict(columns), strict=False)
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        return
    _same_frame(canonical_frame(columns), plain)
    assert text_series(values) is text_series(values) or text_series(values) is None  # made once


def test_text_series_forgets_an_array_once_it_is_gone():
    values = _frozen(["a", "b"])
    assert text_series(values) is not None
    key = id(values)
    assert key in observe._TEXT_SERIES
    del values
    gc.collect()
    assert key not in observe._TEXT_SERIES


def test_without_is_drop():
    frame = pl.DataFrame({"a": [3, 1, None], "@day": [1, 2, 3], "b": ["x", None, "z"]}).with_columns(
        pl.col("a").set_sorted()
    )
    for name in ("@day", "missing", "a"):
        fast = observe._without(frame, name)
        plain = frame.drop(name, strict=False)
        assert fast.equals(plain) and fast.schema == plain.schema
        assert [fast[c].flags for c in fast.columns] == [plain[c].flags for c in plain.columns]
    assert frame.columns == ["a", "@day", "b"]  # the caller's frame keeps its columns

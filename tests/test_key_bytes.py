"""The key reader's bytes come off the Arrow array polars exports: the same lengths and bytes as
`str.len_bytes()` and `str.join("")` for any text column (chunked, sliced, non-ASCII, empty texts), and so
the same numbers as the regex."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditors import bytescan
from auditors.bytescan import _lengths_and_bytes, trailing_digit_numbers
from auditors.worldio import key_to_int

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
TEXTS = st.lists(st.text(alphabet="AB-_09é٣ \n", max_size=12), max_size=40)


def _shaped(texts: list[str], split: int, start: int) -> pl.Series:
    """The texts as a column of two chunks (split at `split`), then sliced from `start`."""
    head, tail = pl.Series("k", texts[:split], dtype=pl.String), pl.Series("k", texts[split:], dtype=pl.String)
    return pl.concat([head, tail], rechunk=False).slice(start)


@given(texts=TEXTS, split=st.integers(0, 40), start=st.integers(0, 5))
@FUZZ
def test_lengths_and_bytes_are_polars_own(texts, split, start):
    column = _shaped(texts, split, start)
    lengths, data = _lengths_and_bytes(column)
    assert lengths.tolist() == column.str.len_bytes().to_list()
    assert data.tobytes() == (column.str.join("").item().encode() if column.len() else b"")


@pytest.mark.parametrize("layout", ["arrow", "polars"])
@given(
    numbers=st.lists(st.integers(0, 10**9), min_size=1, max_size=40),
    style=st.sampled_from(["R-{:06d}", "{}", "SH{:09d}", "é{:04d}", "a{:03d}b"]),
    split=st.integers(0, 40),
    start=st.integers(0, 3),
)
@FUZZ
def test_keys_read_off_either_layout_as_the_regex_reads_them(monkeypatch, layout, numbers, style, split, start):
    """Generated and odd key styles, in chunked and sliced columns, through the Arrow buffers and through
    the polars calls (the fallback for another layout): the regex's numbers, or no answer."""
    if layout == "polars":
        monkeypatch.setattr(bytescan, "ARROW_TEXT", {})
    keys = _shaped([style.format(n) for n in numbers], split, start)
    if keys.is_empty():
        return
    fast = trailing_digit_numbers(keys)
    expected = keys.to_frame().select(key_to_int(pl.col("k"))).to_series()
    if fast is not None:
        assert fast.dtype == expected.dtype and fast.equals(expected, null_equal=True)
    if style in ("R-{:06d}", "SH{:09d}") and len(set(map(len, keys.to_list()))) == 1:
        assert fast is not None, "fixed-width generated keys are read off their bytes"


def test_one_width_keys_use_the_arrow_bytes(monkeypatch):
    """The generator's keys (one length) are read without the polars join."""
    calls = []
    namespace = pl.series.string.StringNameSpace
    join = namespace.join
    monkeypatch.setattr(namespace, "join", lambda self, *a, **k: calls.append(1) or join(self, *a, **k))
    keys = pl.Series("k", [f"SH{n:07d}" for n in np.arange(1000) * 7919])
    assert trailing_digit_numbers(keys).to_list() == (np.arange(1000) * 7919).tolist()
    assert not calls


class _Exported:
    """A column whose Arrow export is a given array (polars' own exports start at offset 0)."""

    def __init__(self, array):
        self.array = array

    def to_arrow(self):
        return self.array

    def clone(self):
        return self


@pytest.mark.parametrize("arrow_type", ["large_string", "string"])
@given(texts=st.lists(st.text(alphabet="AB09é", max_size=6), max_size=20), start=st.integers(0, 4))
@FUZZ
def test_lengths_and_bytes_of_a_sliced_arrow_array(arrow_type, texts, start):
    """An exported array that is a slice (an offset, offsets not starting at 0) reads as its own texts."""
    import pyarrow as pa

    array = pa.array(texts, type=getattr(pa, arrow_type)()).slice(start)
    lengths, data = _lengths_and_bytes(_Exported(array))
    assert lengths.tolist() == [len(t.encode()) for t in texts[start:]]
    assert data.tobytes() == "".join(texts[start:]).encode()


def test_reading_key_bytes_leaves_the_callers_column_as_it_was():
    """Polars merges the chunks of a series it exports to Arrow. The key reader exports a copy, so a caller's
    column keeps its chunks, and what polars says about it later (a failed cast counts its failures chunk by
    chunk) is what it said before the keys were read."""
    keys = pl.concat([pl.Series("k", ["R-1", "R-2"]), pl.Series("k", ["R-3"]), pl.Series("k", ["R-4"])], rechunk=False)
    assert keys.n_chunks() == 3
    _lengths_and_bytes(keys)
    trailing_digit_numbers(keys)
    assert keys.n_chunks() == 3

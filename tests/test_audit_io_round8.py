"""Round 8 of the auditor's I/O: a text column's ledger hash read off polars' own UTF-8 bytes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from contracts.hashing import column_sha256, series_sha256


@pytest.mark.parametrize(
    "series",
    [
        pl.Series("c", [], dtype=pl.String),
        pl.Series("c", [None, None], dtype=pl.String),
        pl.Series("c", ["", None, ""], dtype=pl.String),
        pl.Series("c", ["é", "\u2028", "\U0001f600", "a\x1fb", "\x00"], dtype=pl.String),
        pl.concat([pl.Series("c", ["x", None]), pl.Series("c", ["y" * 100, "z"])], rechunk=False),  # two chunks
    ],
)
def test_text_column_hash_is_the_object_array_hash(series):
    assert series_sha256(series) == column_sha256(series.to_numpy())
    assert series_sha256(series) == column_sha256(np.array(series.to_list(), dtype=object))

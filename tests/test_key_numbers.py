"""The auditor's shortcuts for reading keys give exactly what the plain regex reading gives."""

from __future__ import annotations

import polars as pl
import pytest

from auditors.worldio import key_numbers, key_to_int

COLUMNS = {
    "repeating text keys": pl.Series("k", ["R-0012", "r12", None, "x", "RES_7 ", "12", "a1b22"] * 400),
    "distinct text keys": pl.Series("k", [f"E-{i:06d}" for i in range(3000)]),
    "integers": pl.Series("k", [1, -5, None, 0, 2**63 - 1] * 300),
    "smallest integer": pl.Series("k", [-(2**63), 5] * 10),
    "floats": pl.Series("k", [1.5, 12.0, None] * 300),
    "small integers": pl.Series("k", [1, -2, 3], dtype=pl.Int32),
}


def _read(keys: pl.Series, how) -> pl.Series | str:
    try:
        return how(keys)
    except pl.exceptions.PolarsError as exc:
        return f"{type(exc).__name__}: {exc}"


@pytest.mark.parametrize("name", sorted(COLUMNS) + ["too large"])
def test_key_numbers_match_the_regex_reading(name):
    keys = COLUMNS.get(name, pl.Series("k", ["R-99999999999999999999", "R-1"] * 300))
    expected = _read(keys, lambda s: s.to_frame().select(key_to_int(pl.col("k"))).to_series())
    got = _read(keys, key_numbers)
    if isinstance(expected, str):
        assert got == expected  # the same error, worded as for every row
    else:
        assert got.name == expected.name and got.dtype == expected.dtype
        assert got.equals(expected, null_equal=True)

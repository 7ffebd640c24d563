"""The fast paths give what the plain code gives: the numeric kernels the same floats bit for bit, the XLSX
writer the same bytes as openpyxl on the frames the random test rarely draws (empty, all blank, no columns)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from worldgen.mechanisms import saturation_curve
from worldgen.roots import SCALAR_ROWS, _recursion
from worldgen.write import write_xlsx, write_xlsx_openpyxl


def _plain_recursion(first: np.ndarray, shocks: np.ndarray, persistence: float) -> np.ndarray:
    out = np.empty(shocks.shape)
    out[:, 0] = first
    for t in range(1, shocks.shape[1]):
        out[:, t] = persistence * out[:, t - 1] + shocks[:, t]
    return out


@pytest.mark.parametrize("rows", [1, 3, SCALAR_ROWS, SCALAR_ROWS + 1, 50])
@pytest.mark.parametrize("periods", [1, 2, 365])
def test_recursion_matches_the_plain_loop(rows, periods):
    rng = np.random.default_rng(rows * 1000 + periods)
    first, shocks = rng.standard_normal(rows), rng.standard_normal((rows, periods)) * 0.7
    got = _recursion(first, shocks, 0.75)
    assert got.flags.c_contiguous and got.dtype == np.float64
    assert np.array_equal(got, _plain_recursion(first, shocks, 0.75))


def test_saturation_curve_matches_the_plain_expression():
    rng = np.random.default_rng(3)
    plain = lambda x, a, k, o: a * -np.expm1(-np.maximum(np.asarray(x, dtype=float) - o, 0.0) / k)  # noqa: E731
    for _ in range(50):
        x = rng.normal(size=(7, 90)) * 3
        x[rng.random(x.shape) < 0.1] = np.nan
        a, k, o = rng.normal(), abs(rng.normal()) + 0.05, rng.normal()
        before = x.copy()
        assert np.array_equal(saturation_curve(x, a, k, o), plain(x, a, k, o), equal_nan=True)
        assert np.array_equal(x, before, equal_nan=True)  # the input is left alone
        assert saturation_curve(float(x[0, 0]), a, k, o) == plain(float(x[0, 0]), a, k, o) or np.isnan(x[0, 0])
    assert np.array_equal(saturation_curve(np.arange(5), 1.0, 2.0), plain(np.arange(5), 1.0, 2.0, 0.0))


EDGE_FRAMES = {
    "no rows, sheets": (pl.DataFrame({"g": pl.Series([], dtype=pl.String), "v": pl.Series([], dtype=pl.Int64)}), "g"),
    "no rows": (pl.DataFrame({"a": pl.Series([], dtype=pl.String)}), None),
    "no columns": (pl.DataFrame(), None),
    "all blank": (pl.DataFrame({"n": [None, None], "s": pl.Series([None, None], dtype=pl.String)}), None),
    "dates late": (pl.DataFrame({"d": [None] * 5 + [dt.date(2021, 3, 4)], "t": [dt.datetime(2020, 1, 1)] * 6}), None),
}


@pytest.mark.parametrize("name", sorted(EDGE_FRAMES))
def test_xlsx_edge_frames_match_openpyxl(tmp_path, name):
    frame, by = EDGE_FRAMES[name]
    groups = [(str(k), g) for (k,), g in frame.group_by(by, maintain_order=True)] if by else [("data", frame)]
    write_xlsx(frame, tmp_path / "a.xlsx", by)
    write_xlsx_openpyxl(sorted(groups, key=lambda kg: kg[0]), tmp_path / "b.xlsx")
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()

"""The fast paths give what the plain code gives: the numeric kernels the same floats bit for bit, the XLSX
writer the same bytes as openpyxl on the frames the random test rarely draws (empty, all blank, no columns),
keys and dates rendered once per distinct value the same text as rendered row by row."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from contracts.keys import template
from contracts.model import TIME_SUFFIX, DeliveredColumn
from worldgen.mechanisms import saturation_curve
from worldgen.naming import KEY_TEMPLATES, STRFTIME
from worldgen.observe import _render_column, _render_key
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


def _plain_render(values: pl.Series, c: DeliveredColumn, start: dt.date, prefixes: dict, native: bool) -> pl.Series:
    """Every row rendered by its own expression (what `observe._render_column` looks up by distinct value)."""
    column = c.source.split(".", 1)[1]
    key_template = template(c)
    if key_template is not None:
        entity = {"events.event_id": "events"}.get(c.source, "parties" if "party" in column else "units")
        expr = _render_key(pl.col(values.name), key_template, prefixes[entity])
    elif column.endswith("time"):
        expr = pl.lit(dt.datetime.combine(start, dt.time())) + pl.duration(seconds=pl.col(values.name))
        expr = expr if native else expr.dt.strftime(STRFTIME[c.format] + TIME_SUFFIX)
    else:
        expr = (pl.lit(start) + pl.duration(days=pl.col(values.name))).cast(pl.Date)
        expr = expr if native else expr.dt.strftime(STRFTIME[c.format])
    return values.to_frame().select(expr).to_series()


RENDERED_COLUMNS = [
    DeliveredColumn(name="k", source=source, format=fmt)
    for source in ("panel.unit_id", "events.party_id", "events.event_id")
    for fmt in KEY_TEMPLATES
] + [
    DeliveredColumn(name="k", source=source, format=style)
    for source in ("panel.day", "events.time")
    for style in STRFTIME
]


@pytest.mark.parametrize("spread", ["dense", "wide", "unique", "nulls", "negative", "empty", "int32"])
def test_rendered_keys_and_dates_match_the_row_by_row_expressions(spread):
    rng = np.random.default_rng(len(spread))
    n = 0 if spread == "empty" else 500
    raw = {
        "dense": rng.integers(0, 40, n),
        "wide": rng.choice(rng.integers(0, 10**7, 30), n),
        "unique": rng.permutation(n) * 7 + 3,
        "negative": rng.integers(-3 * 86400, 40, n),
    }.get(spread, rng.integers(0, 400 * 86400, n))
    values = pl.Series("k", raw, dtype=pl.Int32 if spread == "int32" else pl.Int64)
    if spread == "nulls":
        values = values.scatter(rng.choice(n, 50, replace=False), None)
    for c in RENDERED_COLUMNS:
        for native in (False, True):
            got = _render_column(
                values, c, dt.date(2024, 2, 27), {"units": "ab", "parties": "Cu", "events": "e"}, native
            )
            want = _plain_render(
                values, c, dt.date(2024, 2, 27), {"units": "ab", "parties": "Cu", "events": "e"}, native
            )
            assert got.dtype == want.dtype and got.equals(want, check_names=False), (c, native)

"""The auditor's fast paths give what its plain code gives, bit for bit, on random inputs: the unit x day grid
computed on its cells and by joins, event means scattered by cell and joined, factor matching of many steps
at once and one at a time, and the estimators' shared or vectorised work and the plain computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.dataset import (
    FACTOR_MATCH,
    FACTORS_BY_UNIT,
    _known_factor,
    _with_event_means,
    group_means,
    joined_grid,
    known_factors,
    open_grid,
)


def _keys(rng: np.random.Generator, n: int, units: np.ndarray, periods: int, nulls: bool) -> dict:
    unit = rng.choice(np.concatenate([units, [999_999, -3]]), n)  # some units outside the grid
    day = rng.integers(-2, periods + 2, n)  # some days outside it
    unit_s, day_s = pl.Series("unit_id", unit, dtype=pl.Int64), pl.Series("day", day, dtype=pl.Int64)
    if nulls:
        unit_s = unit_s.scatter(rng.choice(n, n // 10, replace=False), None)
        day_s = day_s.scatter(rng.choice(n, n // 10, replace=False), None)
    return {"unit_id": unit_s, "day": day_s}


@pytest.mark.parametrize("seed", range(6))
def test_the_grid_on_its_cells_is_the_grid_by_joins(seed):
    rng = np.random.default_rng(seed)
    periods = int(rng.integers(1, 40))
    master = np.sort(rng.choice(5000, int(rng.integers(1, 12)), replace=False)).astype(np.int64)
    units = pl.DataFrame({"unit_id": rng.permutation(master)}, schema={"unit_id": pl.Int64})
    events = pl.DataFrame(_keys(rng, int(rng.integers(0, 400)), master, periods, nulls=seed % 2 == 0))
    daily = [
        pl.DataFrame({**_keys(rng, int(rng.integers(0, 200)), master, periods, nulls=True), "x": 1.0})
        for _ in range(int(rng.integers(0, 3)))
    ]
    got = open_grid(units, events, daily, periods, "volume")
    assert got is not None
    want = joined_grid(units, events, daily, periods, "volume")
    assert got.schema == want.schema
    assert got.equals(want)


def test_the_grid_leaves_keys_that_are_not_int64_to_the_joins():
    units = pl.DataFrame({"unit_id": [1, 2]}, schema={"unit_id": pl.Int64})
    events = pl.DataFrame({"unit_id": [1, 2], "day": [0, 1]}, schema={"unit_id": pl.Int32, "day": pl.Int64})
    assert open_grid(units, events, [], 3, "volume") is None


@pytest.mark.parametrize("seed", range(6))
def test_event_means_by_cell_are_the_joined_group_means(seed):
    rng = np.random.default_rng(100 + seed)
    periods, units = int(rng.integers(1, 30)), np.sort(rng.choice(900, int(rng.integers(1, 8)), replace=False))
    panel = pl.DataFrame(
        {"unit_id": np.repeat(units, periods), "day": np.tile(np.arange(periods), len(units)), "open": 1},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "open": pl.Int8},
    )
    n = int(rng.integers(0, 500))
    x = rng.standard_normal(n) * 10 ** rng.uniform(-3, 6, n)
    x[rng.random(n) < 0.2] = np.nan
    x[rng.random(n) < 0.02] = np.inf
    events = pl.DataFrame(
        {**_keys(rng, n, units, periods, nulls=seed % 2 == 1), "x": x, "k": rng.integers(0, 5, n)}
    ).with_columns(pl.col("x").fill_nan(None) if seed % 3 == 0 else pl.col("x"))
    got = _with_event_means(panel, events, ["x", "k"])
    want = panel.join(group_means(events, ["x", "k"]), on=["unit_id", "day"], how="left")
    assert got.schema == want.schema
    assert got.equals(want)
    shuffled = panel.sample(fraction=1.0, shuffle=True, seed=seed)  # not the grid in order: the join
    assert _with_event_means(shuffled, events, ["x"]).equals(
        shuffled.join(group_means(events, ["x"]), on=["unit_id", "day"], how="left")
    )


@pytest.mark.parametrize("factors", [factors for _, factors in FACTORS_BY_UNIT])
def test_factors_matched_at_once_are_those_matched_one_by_one(factors):
    rng = np.random.default_rng(len(factors))
    logs = np.log(np.array([f for known in factors for f in (known, 1 / known)]))
    steps = np.concatenate(
        [
            rng.normal(0, 3, 400),
            rng.choice(logs, 400) + rng.normal(0, 0.2, 400),  # near a factor: matched or not by the margins
            rng.choice(logs, 50),
            (logs[:, None] + logs[None, :]).ravel() / 2,  # halfway: ties between two factors
            [np.nan, np.inf, -np.inf, 0.0],
        ]
    )
    noise = np.abs(rng.normal(0, 0.3, len(steps)))
    noise[::7] = np.nan
    noise[::11] = FACTOR_MATCH
    got = known_factors(steps, noise, factors)
    for step, spread, match in zip(steps, noise, got, strict=True):
        want = _known_factor(float(step), max(FACTOR_MATCH, spread), factors)
        assert (want is None and np.isnan(match)) or match == want

"""The generator's fast paths of the seventh speed round against their plain computations, bit for bit: a
blank-aware mean and standard deviation worked out once for both; a rating's cumulative answer weights
worked out one point at a time."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from worldgen import entities, observation
from worldgen.observation import _fused_mean_sd, nan_mean_sd


def _quietly(function, values: np.ndarray) -> tuple[float, float]:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all blanks, infinities: numpy warns
        return function(values)


def _numpys(values: np.ndarray) -> tuple[float, float]:
    return _quietly(lambda x: (float(np.nanmean(x)), float(np.nanstd(x))), values)


@pytest.mark.parametrize("seed", range(60))
def test_the_fused_mean_and_sd_are_numpys(seed):
    """Panels and event columns, long enough for numpy's pairwise sums to split into blocks, with no blank,
    a few, most of them blank, whole numbers (many equal deviations) and huge offsets (rounding in the
    deviations): the same bits as `np.nanmean` and `np.nanstd`, and the fused way is the one taken."""
    rng = np.random.default_rng(seed)
    shape = [(int(rng.integers(1, 70_000)),), (int(rng.integers(1, 300)), int(rng.integers(1, 400)))][seed % 2]
    values = rng.standard_normal(shape) * rng.uniform(0.01, 1e4) + rng.uniform(-1e9, 1e9)
    if seed % 3:
        blanks = int(rng.integers(1, values.size + 1)) if seed % 3 == 1 else max(values.size - 3, 1)
        values.reshape(-1)[rng.integers(values.size, size=blanks)] = np.nan
    if seed % 7 == 6:
        values = np.round(values)
    fused = _fused_mean_sd(values)
    assert fused is not None or np.isnan(values).all()
    assert np.array(nan_mean_sd(values)).tobytes() == np.array(_numpys(values)).tobytes()
    if fused is not None:
        assert np.array(fused).tobytes() == np.array(_numpys(values)).tobytes()


@pytest.mark.parametrize(
    "values",
    [
        np.array([np.nan, np.nan]),
        np.array([1.0, np.inf, 2.0]),
        np.array([np.inf, -np.inf, np.nan]),
        np.array([1e308, 1e308, np.nan]),  # a finite array whose sum overflows
        np.array([3.0]),
        np.arange(12, dtype=np.float32),  # not float64: numpy's own
        np.arange(40.0).reshape(5, 8)[:, ::2],  # not contiguous: numpy's own
        np.zeros(0),
    ],
)
def test_blanks_infinities_and_overflows_go_numpys_way(values):
    assert np.array(_quietly(nan_mean_sd, values)).tobytes() == np.array(_numpys(values)).tobytes()


@pytest.mark.parametrize("points", [1, 2, 4, 6, 10])
def test_answer_columns_are_the_plain_cdf_by_point(points):
    """A rating's cumulative answer weights worked out one point at a time: the same bits as the running
    sums along each row, for content means over the whole grid, at its ends, past them and blank."""
    rng = np.random.default_rng(points)
    content = np.concatenate(
        [
            rng.uniform(0.0, points, 20_000),
            np.exp(rng.uniform(-40.0, 2.0, 2000)),  # tiny means: ratios near the grid's low end
            np.array([0.0, -0.0, 0.01 * points, 0.99 * points, points, 2 * points, -1.0, np.nan, 1e-300]),
        ]
    )
    plain = np.ascontiguousarray(observation._answer_cdf_plain(content, points).T)
    assert observation._answer_columns_plain(content, points).tobytes() == plain.tobytes()
    assert observation._answer_columns(content, points).tobytes() == plain.tobytes()


@pytest.mark.parametrize("table", [True, False])
@pytest.mark.parametrize("seed", range(12))
def test_the_cap_after_a_redraw_looks_up_touched_party_days_as_isin_would(monkeypatch, table, seed):
    """The person-day cap updated after redraws, through the table of touched party-days or (a table too
    large) `np.isin`, against the cap ranked afresh: redraws to other parties, back to the same party, to
    a party no event had, on the first and the last day, many rounds."""
    if not table:
        monkeypatch.setattr(entities, "TOUCHED_CELLS_PER_EVENT", 0)
        monkeypatch.setattr(entities, "MIN_TOUCHED_CELLS", 0)
    rng = np.random.default_rng(seed)
    n, parties = int(rng.integers(1, 20_000)), int(rng.integers(1, 3000))
    chosen = rng.integers(0, parties, n)
    day = np.sort(rng.integers(0, int(rng.integers(1, 400)), n))
    over = entities._over_cap(chosen, day)
    for round_ in range(6):
        redrawn = np.flatnonzero(over) if round_ % 2 == 0 else np.unique(rng.integers(0, n, min(n, 300)))
        before = chosen[redrawn].copy()
        chosen = chosen.copy()
        chosen[redrawn] = rng.integers(0, parties + 2, redrawn.size)
        chosen[redrawn[: redrawn.size // 3]] = before[: redrawn.size // 3]
        updated = entities._over_cap_after(over, chosen, day, redrawn, before)
        over = entities._over_cap_ranked(chosen, day)
        assert np.array_equal(updated, over)

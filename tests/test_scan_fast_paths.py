"""The scans' fast paths pick what the plain computation picks: a lag's columns gathered at once are the
per-lag features (values and memory layout), and a curve's scan decided from sums over its parent's distinct
values is the plain scan's choice whenever it decides, and defers (None) on a near-tie."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors import estimate
from auditors.estimate import ChildModel, best_candidate, decided_best
from auditors.estimators import ESTIMATORS, GROUPED_SHARE
from tests.test_audit_fast_paths import PlainModel, _random_child


def _model(seed: int, rounded: bool = False) -> ChildModel:
    contract, rows = _random_child(seed, rolling=False)
    if rounded:  # a count-like parent: few distinct values, so a curve's scan sums over them
        rows.parents["b"] = np.round(rows.parents["b"], 1)
    return ChildModel(contract, "y", rows)


def _edge(model: ChildModel, kind: str):
    return next(e for e in model.edges if e.kind == kind)


def _scan_inputs(model: ChildModel, seed: int, n: int, k: int):
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(model.rows.y), n, replace=False))
    q, _ = np.linalg.qr(np.column_stack([np.ones(n), rng.normal(size=(n, k - 1))]))
    return rows, q, rng.normal(0, 3, n)


@pytest.mark.parametrize("lags", [np.arange(31.0), np.array([3.0, 0.0, 7.0, 7.0]), np.array([0.0]), np.array([5.0])])
@pytest.mark.parametrize("seed", range(3))
def test_lag_columns_are_the_features_of_each_lag(seed, lags):
    model = _model(seed)
    e = _edge(model, "lag")
    rows = np.sort(np.random.default_rng(seed).choice(len(model.rows.y), 3000, replace=False))
    got = ESTIMATORS["lag"].columns(model, e, lags, rows)
    want = np.column_stack([ESTIMATORS["lag"].features(model, e, lag)[rows, 0] for lag in lags])
    assert np.array_equal(got, want)
    # The layout the products read (their rounding can depend on it): (lags, rows) in memory, as before.
    assert got.strides == (8, 8 * len(rows))


def _bounds_hold(grouped, plain) -> bool:
    fry, qf, ff, fry_error, qf_error, ff_error = grouped
    return all(
        np.all(np.abs(a - b) <= err)
        for a, b, err in zip((fry, qf, ff), plain, (fry_error, qf_error, ff_error), strict=True)
    )


@pytest.mark.parametrize("seed", range(6))
def test_a_curves_grouped_scan_picks_the_plain_scans_candidate(seed):
    model = _model(seed, rounded=True)
    e = _edge(model, "saturation")
    saturation = ESTIMATORS["saturation"]
    rows, q, ry = _scan_inputs(model, seed, 4000, 1 + seed)
    cands = model.candidates(e)
    grouped = saturation.grouped_sums(model, e, cands, rows, q, ry)
    assert grouped is not None
    plain = saturation.sums(model, e, cands, rows, q, ry)
    assert _bounds_hold(grouped, plain)
    best = decided_best(*grouped)
    assert best is not None and best == best_candidate(*plain)


def test_a_near_tie_is_left_to_the_plain_sums():
    model = _model(0, rounded=True)
    e = _edge(model, "saturation")
    saturation = ESTIMATORS["saturation"]
    rows, q, ry = _scan_inputs(model, 0, 4000, 3)
    scale = float(model.candidates(e)[10])
    # Equal scales give equal columns (the plain scan takes the first); scales a hair apart, nearly equal ones.
    for cands in (np.array([scale, scale]), np.array([scale, np.nextafter(scale, np.inf)])):
        grouped = saturation.grouped_sums(model, e, cands, rows, q, ry)
        assert grouped is not None and _bounds_hold(grouped, saturation.sums(model, e, cands, rows, q, ry))
        assert decided_best(*grouped) is None


def test_columns_that_do_not_vary_are_decided_as_the_plain_scan_decides():
    # A parent at or below the origin everywhere: every column is 0, no score is finite, the first is taken.
    model = _model(1, rounded=True)
    e = _edge(model, "saturation")
    model.rows.parents["b"] = -np.abs(model.rows.parents["b"])
    model._x.clear()
    rows, q, ry = _scan_inputs(model, 1, 2000, 2)
    cands = model.candidates(e)
    grouped = ESTIMATORS["saturation"].grouped_sums(model, e, cands, rows, q, ry)
    assert grouped is not None
    assert decided_best(*grouped) == best_candidate(*ESTIMATORS["saturation"].sums(model, e, cands, rows, q, ry)) == 0


def test_a_parent_with_many_distinct_values_is_scanned_the_plain_way():
    model = _model(2)
    e = _edge(model, "saturation")
    rows, q, ry = _scan_inputs(model, 2, 2000, 2)
    assert len(np.unique(model.x(e)[rows])) > GROUPED_SHARE * len(rows)
    assert ESTIMATORS["saturation"].grouped_sums(model, e, model.candidates(e), rows, q, ry) is None


def test_decided_best_defers_when_a_denominator_is_near_the_cut():
    fry, ff = np.array([1.0, 2.0]), np.array([5.0, estimate.MIN_VARIANCE])
    qf = np.zeros((1, 2))
    errors = np.array([0.0, 0.0]), np.zeros((1, 2)), np.array([0.0, 1e-12])
    assert decided_best(fry, qf, ff, *errors) is None
    assert decided_best(fry, qf, np.array([5.0, 1.0]), *errors) == best_candidate(fry, qf, np.array([5.0, 1.0]))


@pytest.mark.parametrize("seed", range(3))
def test_the_child_model_with_a_count_parent_fits_what_the_plain_model_fits(seed, monkeypatch):
    monkeypatch.setattr(estimate, "SCAN_ROWS", 2000)
    contract, rows = _random_child(seed, rolling=False)
    rows.parents["b"] = np.round(rows.parents["b"], 1)
    got = ChildModel(contract, "y", rows).fit()
    want = PlainModel(contract, "y", rows).fit()
    assert got.statistics == want.statistics
    for parent, contribution in want.contributions.items():
        assert np.array_equal(got.contributions[parent], contribution, equal_nan=True), parent


def test_a_fit_without_contributions_finds_the_same_statistics():
    contract, rows = _random_child(0, rolling=False)
    full, bare = ChildModel(contract, "y", rows).fit(), ChildModel(contract, "y", rows).fit(contributions=False)
    assert full.contributions and not bare.contributions
    assert (bare.statistics, bare.directions) == (full.statistics, full.directions)
    assert np.array_equal(bare.day, full.day)


def _positions_as_floats(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    ids = np.asarray(ids, dtype=float)
    at = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
    found = (len(sorted_ids) > 0) & np.isfinite(ids)
    found &= sorted_ids[at] == ids if len(sorted_ids) else False
    return np.where(found, at, -1)


@pytest.mark.parametrize("seed", range(3))
def test_unit_positions_of_integer_ids_are_those_of_their_floats(seed):
    rng = np.random.default_rng(seed)
    sorted_ids = np.unique(rng.integers(-50, 500, 120))
    ids = rng.integers(-60, 520, 3000)  # some missing, some beyond either end
    for known, asked in ((sorted_ids, ids), (sorted_ids[:1], ids), (sorted_ids[:0], ids), (sorted_ids, ids[:0])):
        assert np.array_equal(estimate._positions(known, asked), _positions_as_floats(known, asked))
    with_nulls = np.where(rng.random(3000) < 0.1, np.nan, ids.astype(float))  # nulls: the float comparison
    assert np.array_equal(estimate._positions(sorted_ids, with_nulls), _positions_as_floats(sorted_ids, with_nulls))


def test_a_panel_in_key_order_is_its_own_sort():
    rng = np.random.default_rng(4)
    grid = pl.DataFrame({"unit_id": np.repeat([2, 5, 9], 4), "day": np.tile(np.arange(4), 3), "x": rng.normal(size=12)})
    assert estimate._in_key_order(grid) and grid.sort("unit_id", "day").equals(grid)
    for shuffled in (grid.reverse(), grid.sample(fraction=1.0, shuffle=True, seed=1), pl.concat([grid, grid.tail(1)])):
        assert not estimate._in_key_order(shuffled)  # out of order, or a key twice
    assert not estimate._in_key_order(grid.with_columns(pl.col("day").cast(pl.Float64)))
    assert not estimate._in_key_order(grid.with_columns(grid["day"].scatter([5], None)))

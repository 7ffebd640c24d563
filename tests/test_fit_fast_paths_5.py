"""The child model's fast paths, round 5: a rolling child's lags rolled as one stack with one count of reported
days give each lag's rolled feature bit for bit, and the model fits what it fits without them."""

from __future__ import annotations

import numpy as np
import pytest

from auditors import estimate
from auditors.estimate import ChildModel, roll, roll_reported
from tests.test_audit_fast_paths import _random_child


def _rolling_child(seed: int, gaps: str = "nan", window: int = 7):
    """`_random_child`'s rolling child, its rows the panel's cells in order (as a grid dataset's are), with
    the lagged cause's gaps blank, infinite, or its panel blank throughout."""
    contract, rows = _random_child(seed, rolling=True)
    rows.cell = np.arange(len(rows.y))
    panel = rows.panels["l"].copy()
    if gaps == "inf":
        panel[np.random.default_rng(seed).random(panel.shape) < 0.01] = np.inf
    elif gaps == "blank":
        panel[:] = np.nan
    rows.panels["l"] = panel
    rows.parents["l"] = panel.reshape(-1)
    child = contract.variable("y").model_copy(update={"window": window})
    contract = contract.model_copy(update={"variables": [*contract.variables[:-1], child]})
    return contract, rows


def _lag_edge(model: ChildModel):
    return next(e for e in model.edges if e.kind == "lag")


@pytest.mark.parametrize("window", [1, 7, 30, 400])
@pytest.mark.parametrize("seed", range(3))
def test_a_rolled_lag_stack_is_each_lags_rolled_feature(seed, window):
    contract, rows = _rolling_child(seed, window=window)
    model = ChildModel(contract, "y", rows)
    e = _lag_edge(model)
    cands = model.candidates(e)
    stack = model._rolled_stack(e, cands)
    assert stack is not None and stack.shape == (len(cands), len(rows.y))
    plain = ChildModel(contract, "y", rows)
    for k, cand in enumerate(cands):
        want = plain._compute_features(e, cand)[:, 0]
        assert stack[k].tobytes() == want.tobytes(), cand
        assert model.features(e, cand).tobytes() == want.tobytes()  # the cache holds the same column


@pytest.mark.parametrize("seed", range(3))
def test_a_stack_finite_on_every_day_rolls_as_roll_does(seed):
    rng = np.random.default_rng(seed)
    stack = rng.normal(0, 10, (5, 7, 60)) * (rng.random((5, 7, 60)) < 0.8)
    stack[0, 0, :3] = -0.0
    is_open = rng.random((7, 60)) < 0.6
    is_open[1, :20] = False  # days before any report: no mean
    for window in (1, 3, 59, 60, 200):
        got = roll_reported(stack.copy(), window, is_open)  # (it overwrites the stack it is given)
        assert got.tobytes() == roll(stack, window, is_open).tobytes(), window


@pytest.mark.parametrize("gaps", ["inf", "blank"])
def test_a_lag_that_is_not_finite_every_day_is_rolled_candidate_by_candidate(gaps):
    contract, rows = _rolling_child(0, gaps=gaps)
    model = ChildModel(contract, "y", rows)
    assert model._rolled_stack(_lag_edge(model), model.candidates(_lag_edge(model))) is None


def test_rows_that_are_not_the_panels_cells_are_rolled_candidate_by_candidate():
    contract, rows = _rolling_child(0)
    rows.cell = None
    model = ChildModel(contract, "y", rows)
    assert model._rolled_stack(_lag_edge(model), model.candidates(_lag_edge(model))) is None


@pytest.mark.parametrize("gaps", ["nan", "inf"])
@pytest.mark.parametrize("seed", range(3))
def test_a_rolling_child_fits_what_it_fits_without_the_stack(seed, gaps, monkeypatch):
    monkeypatch.setattr(estimate, "SCAN_ROWS", 2000)
    contract, rows = _rolling_child(seed, gaps=gaps)
    got = ChildModel(contract, "y", rows).fit()
    monkeypatch.setattr(ChildModel, "_rolled_stack", lambda self, e, cands: None)
    want = ChildModel(contract, "y", rows).fit()
    assert got.statistics and got.statistics.keys() == want.statistics.keys()
    for key, value in want.statistics.items():
        assert np.array_equal(got.statistics[key], value, equal_nan=True), key
    assert got.directions == want.directions
    for parent, contribution in want.contributions.items():
        assert got.contributions[parent].tobytes() == contribution.tobytes(), parent


def _quantile_cases(seed: int):
    rng = np.random.default_rng(seed)
    yield rng.normal(0, 3, 5000)
    yield np.round(rng.exponential(2, 3000))  # a count: many ties
    for n in (1, 2, 3, 7, 60):
        yield rng.choice([-0.0, 0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf], n)  # zeros of both signs
        yield rng.choice([0.0, 1.0, np.nan, np.inf], n)
        yield rng.choice([-0.0, -1.0, np.nan, -np.inf], n)
    yield np.full(10, np.nan)
    yield np.array([])
    yield np.arange(50)  # not floats


@pytest.mark.parametrize("seed", range(8))
def test_quantiles_of_the_sorted_reported_values_are_nanquantiles(seed, recwarn):
    from auditors.estimators import THRESHOLD_QUANTILES, nan_quantiles

    for values in _quantile_cases(seed):
        for quantiles in (THRESHOLD_QUANTILES, np.array([0.0, 0.5, 1.0]), np.linspace(0, 1, 11)):
            want = np.nanquantile(values, quantiles)
            got = nan_quantiles(values, quantiles)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (values, quantiles)


def _order_cases(seed: int):
    rng = np.random.default_rng(seed)
    yield rng.normal(0, 1, 20_000)  # no ties
    yield np.round(rng.exponential(3, 20_000))  # a count: long runs of ties
    yield np.round(rng.normal(50, 10, 5000), 1)
    for n in (0, 1, 2, 3, 17, 300):
        yield rng.choice([-0.0, 0.0, 1.0, -2.0, np.inf, -np.inf], n)  # zeros of both signs tie
        yield rng.choice([0.0, 1.0, np.nan, 2.0], n)
        yield rng.choice([1.0, 1.0 + 2**-52, 3.0], n)
    yield np.arange(40)[::-1]  # not floats


@pytest.mark.parametrize("seed", range(6))
def test_a_stable_order_from_the_quick_sort_is_the_stable_sort(seed):
    from auditors.estimators import stable_order

    for values in _order_cases(seed):
        want = np.argsort(values, kind="stable")
        got = stable_order(values)
        assert got.dtype == want.dtype and np.array_equal(got, want), values


def _seasonal_plain(model, e, theta):
    xc = model.x(e) - e.params["center"]
    w = 2 * np.pi * model.rows.day / theta
    return np.column_stack([xc, xc * np.sin(w), xc * np.cos(w)])


@pytest.mark.parametrize("days", ["grid", "int32", "events", "negative", "floats", "sparse"])
def test_a_seasonal_wave_taken_per_day_is_the_wave_taken_per_row(days):
    from auditors.estimators import ESTIMATORS

    contract, rows = _random_child(3, rolling=False)
    rng = np.random.default_rng(5)
    if days == "int32":
        rows.day = rows.day.astype(np.int32)
    elif days == "events":
        rows.day = np.sort(rng.integers(0, 240, len(rows.y)))
    elif days == "negative":
        rows.day = rows.day - 3
    elif days == "floats":
        rows.day = rows.day.astype(float)
    elif days == "sparse":
        rows.day = rows.day * 1000  # a table of the days would be larger than the rows
    rows.parents["s"][::13] = np.nan
    model = ChildModel(contract, "y", rows)
    e = next(e for e in model.edges if e.kind == "seasonal")
    for theta in (7.0, 14.0, 28.0, 30.0, 365.25):
        got = ESTIMATORS["seasonal"].features(model, e, theta)
        want = _seasonal_plain(model, e, theta)
        assert got.shape == want.shape and got.flags.c_contiguous and got.tobytes() == want.tobytes(), theta

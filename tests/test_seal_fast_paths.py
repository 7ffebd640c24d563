"""Sealing's fast paths (worldgen/estimation.py) give what the plain code gives: the profile's row subset is
the sorted draw, a step's bucketed sums count the same rows as the plain comparison, and a fit's memoised
residual is `y - X @ coef` bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from contracts.model import Edge
from tests.test_estimation import _least_squares_fit, _panel_variable
from tests.test_estimators import T, U, _contract
from worldgen.estimation import (
    PROFILE_ROWS,
    Fit,
    _at_bound,
    _Curve,
    _feature_matrix,
    _Lagged,
    _Step,
    _step_sums,
    _subset,
    fit_child,
)


@pytest.mark.parametrize("n", [1, 2_000, PROFILE_ROWS, PROFILE_ROWS + 1, 52_345, 75_653, 1_000_003])
def test_the_profile_subset_is_the_sorted_draw(n):
    want = np.sort(np.random.default_rng(0).choice(n, PROFILE_ROWS, replace=False)) if n > PROFILE_ROWS else None
    got = _subset(n)
    if want is None:
        want = np.arange(n)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert not got.flags.writeable  # shared between calls: nobody may change it
    assert _subset(n) is got


def _step_cases(seed: int):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 5, 300, 5000]))
    seen = rng.normal(0.0, 2.0, n)
    if seed % 2:
        seen = np.round(seen)  # ties, and candidates sitting exactly on parent values
    thetas = np.unique(np.quantile(seen, np.linspace(0.01, 0.99, 99)))
    if seed % 3 == 0:
        thetas = np.concatenate([thetas, [seen.min(), seen.max(), seen.max() + 1, -np.inf]])
    if seed % 5 == 0:
        thetas = rng.permutation(np.concatenate([thetas, thetas[:3]]))  # unsorted, repeated candidates
    return seen, thetas, rng.normal(0.0, 1.0, n) * rng.choice([1e-3, 1.0, 1e6])


@pytest.mark.parametrize("seed", range(30))
def test_a_steps_bucketed_sums_count_the_rows_above_each_candidate(seed):
    seen, thetas, r = _step_cases(seed)
    above = seen[:, None] > thetas[None, :]
    sums, counts = _step_sums(seen, thetas, r)
    assert np.array_equal(counts, above.sum(axis=0))
    plain = np.array([float(np.sum(r[column])) for column in above.T])
    bound = 2 * len(r) * np.finfo(float).eps * np.sum(np.abs(r))  # what _grouped_sse allows a sum to differ
    assert np.all(np.abs(sums - plain) <= bound)


def _fit(censored: bool) -> Fit:
    """A least-squares child fit with two parents; with clipped measurements left out when `censored`."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 1, (U, T)), rng.normal(0, 1, (U, T))
    y = 1.0 + 0.5 * a - 0.3 * b + rng.normal(0, 0.2, (U, T))
    child = _panel_variable("y", 1).model_copy(update={"observe": "value", "min": 0.0 if censored else None})
    if censored:
        y = np.maximum(y, 0.0)
    edges = [Edge(parent=p, child="y", kind="linear", params={}, sign="+", note="") for p in ("a", "b")]
    contract = _contract(edges, [_panel_variable("a", 0), _panel_variable("b", 0), child])
    panel = {"y": y.reshape(-1), "open": np.ones(U * T, dtype=np.int8), "day": np.tile(np.arange(T), U)}
    state = SimpleNamespace(
        column=lambda table, name: panel[name],
        contributions={"y": {"a": 0.5 * a.reshape(-1), "b": -0.3 * b.reshape(-1)}},
    )
    return fit_child(contract, state, "y")


@pytest.mark.parametrize("censored", [False, True])
def test_a_fits_residual_is_y_minus_its_fitted_values(censored):
    fit = _fit(censored)
    assert ("residual" in fit.memo) is not censored  # made by the fit itself only when it used every row
    residual = fit.residual()
    assert np.array_equal(residual, fit.y - fit.X @ fit.coef)
    assert not residual.flags.writeable and fit.residual() is residual
    plain = _least_squares_fit("y", fit.y, fit.day, {"a": fit.X[:, 1], "b": fit.X[:, 2]})
    assert np.array_equal(plain.residual(), plain.y - plain.X @ plain.coef)


def test_features_by_candidate_are_the_columns_transposed():
    """A row per candidate (the share gaps read them whole) holds the same values as the candidate's column
    and as the feature made for that candidate alone."""
    rng = np.random.default_rng(5)
    seen = np.round(rng.normal(3.0, 2.0, 3001), 1)  # repeated values, some below the curve's origin
    panel = rng.normal(0.0, 1.0, (U, T))
    unit, day = rng.integers(0, U, 3001), rng.integers(0, T, 3001)
    cases = [
        (_Step(seen), np.linspace(-1.0, 7.0, 23)),
        (_Curve(seen, 0.5), np.linspace(0.1, 4.0, 79)),
        (_Lagged(panel, 0.25, unit, day), np.arange(0.0, 31.0)),
    ]
    for feature, thetas in cases:
        rows = feature.by_candidate(thetas)
        assert rows.flags.c_contiguous and np.array_equal(rows, _feature_matrix(feature, thetas).T)
        for i in (0, len(thetas) // 2, len(thetas) - 1):
            assert np.array_equal(rows[i], feature(thetas[i]))


def test_the_censoring_bound_test_is_isclose():
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.normal(0, 1, 500), 1 + rng.normal(0, 1e-9, 500), [np.nan, np.inf, -np.inf, 1.0, 0.0]])
    y = np.concatenate([y, np.nextafter(1.0 + 1e-9, 2.0) + np.zeros(1), 1.0 + 1e-9 + np.zeros(1), -0.0 + np.zeros(1)])
    for bound in (0, 1, 1.0, -2.5, 1e-9, np.inf, -np.inf, np.nan):
        assert np.array_equal(_at_bound(y, bound), np.isclose(y, bound, rtol=0, atol=1e-9)), bound

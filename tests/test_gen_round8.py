"""The generator's fast paths of the eighth speed round against their plain computations, bit for bit: a fit's
change of means between the halves averaged only for the drivers' columns, one column at a time in row order;
a threshold's candidate quantiles from the values sorted once."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.test_estimation import _least_squares_fit
from worldgen.estimation import THRESHOLD_QUANTILES, _nanquantile, _row_order_mean


@pytest.mark.parametrize("columns", [2, 3, 4, 7, 21, 25])
@pytest.mark.parametrize("rows", [5, 1_000, 30_011, 70_001])
def test_a_columns_row_order_mean_is_numpys_mean_of_the_gathered_rows(columns, rows):
    """Each column's mean at the rows, as numpy averages the rows gathered whole (values of very different
    sizes, so that an other order of the sum shows in the bits)."""
    rng = np.random.default_rng(columns * rows)
    X = rng.standard_normal((rows, columns)) * np.exp(3 * rng.standard_normal((rows, 1)))
    picked = np.flatnonzero(rng.random(rows) < 0.6)
    want = X.take(picked, axis=0).mean(axis=0)
    got = np.array([_row_order_mean(X[:, j], picked) for j in range(columns)])
    assert got.tobytes() == want.tobytes()


def _plain_deltas_and_shares(fit, half: int, drivers: set[str], rows_lost: float):
    """`Fit.deltas` and `Fit.shares` as the seventh round computed them: every column's change of means."""
    late, early = fit.day >= half, fit.day < half
    g = fit.X[late].mean(axis=0) - fit.X[early].mean(axis=0)
    parents = sorted({o for o in fit.owner if o} & drivers)
    deltas = {p: float(g[fit.columns(p)] @ fit.coef[fit.columns(p)]) for p in parents}
    total = sum(deltas.values())
    contribution = {p: fit.X[:, fit.columns(p)] @ fit.coef[fit.columns(p)] for p in deltas}
    together = sum(contribution.values())
    errors = {}
    for p in deltas:
        grad = np.zeros_like(g)
        grad[fit.columns(p)] += g[fit.columns(p)] / total
        for q in deltas:
            grad[fit.columns(q)] -= deltas[p] * g[fit.columns(q)] / total**2
        z = contribution[p] - deltas[p] / total * together
        dropped = rows_lost / (1 - rows_lost) * (z[late].var() / late.sum() + z[early].var() / early.sum())
        errors[p] = float(np.sqrt(max(grad @ fit.cov @ grad, 0.0) + dropped / total**2))
    return deltas, errors


@pytest.mark.parametrize("seed", range(4))
def test_shares_from_the_drivers_columns_are_the_plain_shares(seed):
    """Deltas and shares' errors from the drivers' columns only (a unit attribute and a nuisance column
    left out) equal those from every column's change, bit for bit; the drivers' fits are shared."""
    rng = np.random.default_rng(seed)
    n, half = 9_000 + 1_000 * seed, 90
    day = rng.integers(0, 2 * half, n)
    columns = {
        "a": rng.normal(0, 2, n) + 0.5 * (day >= half),
        "b": rng.normal(0, 2, n) * np.exp(rng.standard_normal(n)) + 0.1 * (day >= half),
        "unit_attribute": rng.normal(0, 1, n),
        "c": rng.normal(0, 1, n) - 0.3 * (day >= half),
    }
    y = sum(columns.values()) + rng.normal(0, 1, n)
    drivers = {"a", "b", "c"} if seed % 2 else {"a"}
    for rows_lost in (0.0, 0.05):
        fit = _least_squares_fit("y", y, day, columns)
        plain = _plain_deltas_and_shares(fit, half, drivers, rows_lost)
        assert fit.deltas(half, drivers) == plain[0]
        assert fit.shares(half, drivers, rows_lost) == plain


@pytest.mark.parametrize("n", [0, 1, 7, 2_000, 40_000])
def test_quantiles_from_the_sorted_values_are_numpys_nanquantile(n):
    """The threshold candidates' quantiles from the values sorted once equal `np.nanquantile`'s, with blanks,
    ties, signed zeros and infinities among the values, and for values that are all blank."""
    rng = np.random.default_rng(n)
    values = np.round(rng.standard_normal(n) * 3, 2 if n % 2 else 6)
    for blanks in (0.0, 0.1, 1.0):
        x = values.copy()
        x[rng.random(n) < blanks] = np.nan
        x[rng.random(n) < 0.05] = -0.0
        if n > 100:
            x[:2] = [np.inf, -np.inf]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all blank: numpy warns, both ways
            want, got = np.nanquantile(x, THRESHOLD_QUANTILES), _nanquantile(x, THRESHOLD_QUANTILES)
        assert got.tobytes() == want.tobytes()

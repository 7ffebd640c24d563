"""Each mechanism's planted parameter is recovered from data it generated, within a stated tolerance.

Parameters are drawn by the mechanism's own sampler from a Hypothesis-chosen seed; the estimators here
are plain least squares or scans, independent of the generator's code path.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldgen.mechanisms import MECHANISMS, Scale, saturation_curve

SEEDS = st.integers(0, 2**32 - 1)
PARENT = Scale(mean=10.0, sd=3.0)
CHILD = Scale(mean=50.0, sd=5.0)
N = 20_000


def noisy(values, rng, sd=0.3 * CHILD.sd):
    return values + rng.normal(0, sd, values.shape)


def ols(y, *columns):
    X = np.column_stack([np.ones_like(y), *columns])
    return np.linalg.lstsq(X, y, rcond=None)[0]


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS, sign=st.sampled_from("+-"))
def test_monotone_slope_recovered_within_5_percent(seed, sign):
    rng = np.random.default_rng(seed)
    params = MECHANISMS["monotone"].sample_params(PARENT, CHILD, sign, rng)
    x = np.abs(rng.normal(PARENT.mean, PARENT.sd, N))
    y = noisy(MECHANISMS["monotone"].apply({"x": x}, params, rng), rng)
    feature = np.log1p(x) if params["transform"] == "log" else x
    beta = ols(y, feature)[1]
    assert np.sign(beta) == (1 if sign == "+" else -1)
    assert beta == pytest.approx(params["beta"], rel=0.05)


@settings(max_examples=25, deadline=None)
@given(seed=SEEDS)
def test_threshold_location_recovered_within_a_tenth_sd(seed):
    rng = np.random.default_rng(seed)
    params = MECHANISMS["threshold"].sample_params(PARENT, CHILD, "-", rng)
    x = rng.normal(PARENT.mean, PARENT.sd, N)
    y = noisy(MECHANISMS["threshold"].apply({"x": x}, params, rng), rng)
    candidates = np.quantile(x, np.linspace(0.05, 0.95, 181))
    sse = [np.var(y[x <= c]) * (x <= c).sum() + np.var(y[x > c]) * (x > c).sum() for c in candidates]
    tau = candidates[int(np.argmin(sse))]
    assert abs(tau - params["tau"]) < 0.1 * PARENT.sd


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_saturation_half_point_recovered_within_a_fifth_sd(seed):
    rng = np.random.default_rng(seed)
    params = MECHANISMS["saturation"].sample_params(PARENT, CHILD, "+", rng)
    x = rng.normal(PARENT.mean, PARENT.sd, N)
    y = noisy(MECHANISMS["saturation"].apply({"x": x}, params, rng), rng)
    origin = params["origin"]
    kappas = np.linspace(0.2, 4.0, 381) * PARENT.sd
    sse = []
    for k in kappas:
        f = saturation_curve(x, 1.0, k, origin)
        coef = ols(y, f)
        sse.append(np.sum((y - coef[0] - coef[1] * f) ** 2))
    half = origin + kappas[int(np.argmin(sse))] * np.log(2)
    # Gentle curves (kappa up to 2 sd) bend slowly, so their half point is located only up to a share of its
    # distance from the origin (the contract's profile tolerance says how well in each world's data); on 20,000
    # clean rows a fifth of an sd, or a fifth of that distance for the gentlest, always suffices.
    true_half = params["kappa"] * np.log(2)
    assert abs(half - (origin + true_half)) < max(0.2 * PARENT.sd, 0.2 * true_half)
    # Below the origin the curve is flat, so the slopes compare the lowest and highest thirds of the rise.
    low_cut, high_cut = np.quantile(x[x > origin], [1 / 3, 2 / 3])
    low = (x > origin) & (x < low_cut)
    high = x > high_cut
    assert abs(np.polyfit(x[high], y[high], 1)[0]) < 0.6 * abs(np.polyfit(x[low], y[low], 1)[0]), (
        "returns must diminish"
    )


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_lag_recovered_exactly_by_cross_correlation(seed):
    rng = np.random.default_rng(seed)
    params = MECHANISMS["lag"].sample_params(PARENT, CHILD, "+", rng)
    x = rng.normal(PARENT.mean, PARENT.sd, (40, 365))
    y = noisy(MECHANISMS["lag"].apply({"x": x}, params, rng), rng)

    def corr(k):
        a, b = x[:, : 365 - k].ravel(), y[:, k:].ravel()
        return np.corrcoef(a, b)[0, 1]

    assert int(np.argmax([corr(k) for k in range(31)])) == params["lag"]


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_interaction_coefficient_recovered_within_10_percent(seed):
    rng = np.random.default_rng(seed)
    moderator = Scale(mean=4.0, sd=1.5)
    params = MECHANISMS["interaction"].sample_params(PARENT, CHILD, "+", rng, moderator=moderator)
    x, m = rng.normal(PARENT.mean, PARENT.sd, N), rng.normal(moderator.mean, moderator.sd, N)
    y = noisy(MECHANISMS["interaction"].apply({"x": x, "moderator": m}, params, rng), rng)
    z = (m - moderator.mean) / moderator.sd
    coef = ols(y, x, z, (x - PARENT.mean) * z)
    assert coef[3] == pytest.approx(params["beta"], rel=0.1)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_seasonal_amplitude_and_period_recovered(seed):
    rng = np.random.default_rng(seed)
    params = MECHANISMS["seasonal"].sample_params(PARENT, CHILD, "+", rng)
    t = np.tile(np.arange(365.0), 40)
    x = rng.normal(PARENT.mean, PARENT.sd, t.size)
    y = noisy(MECHANISMS["seasonal"].apply({"x": x, "t": t}, params, rng), rng)
    fits = {}
    for period in (7, 14, 28, 30):
        w = 2 * np.pi * t / period
        xc = x - PARENT.mean
        coef = ols(y, xc, xc * np.sin(w), xc * np.cos(w))
        fits[period] = np.hypot(coef[2], coef[3]) / coef[1]
    assert max(fits, key=fits.get) == params["period"]
    assert fits[params["period"]] == pytest.approx(params["amplitude"], abs=0.05)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_categorical_level_shifts_recovered_within_a_twentieth_sd(seed):
    rng = np.random.default_rng(seed)
    parent = Scale(mean=0, sd=1, levels=("a", "b", "c", "d"))
    params = MECHANISMS["categorical"].sample_params(parent, CHILD, "+", rng)
    codes = rng.integers(0, 4, N).astype(float)
    y = noisy(MECHANISMS["categorical"].apply({"x": codes}, params, rng), rng)
    means = np.array([y[codes == k].mean() for k in range(4)])
    planted = np.array(list(params["shifts"].values()))
    assert np.allclose(means - means.mean(), planted - planted.mean(), atol=0.05 * CHILD.sd)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS)
def test_ratio_slope_recovered_within_5_percent(seed):
    rng = np.random.default_rng(seed)
    capacity = Scale(mean=6.0, sd=2.0)
    params = MECHANISMS["ratio"].sample_params(PARENT, CHILD, "+", rng, denominator=capacity)
    x, d = rng.normal(PARENT.mean, PARENT.sd, N), np.clip(np.round(rng.normal(6, 2, N)), 1, None)
    y = noisy(MECHANISMS["ratio"].apply({"x": x, "denominator": d}, params, rng), rng)
    assert ols(y, x / d)[1] == pytest.approx(params["beta"], rel=0.05)


def test_every_contract_kind_has_a_mechanism():
    from contracts.model import MECHANISM_KINDS, MECHANISM_PARAMS

    assert set(MECHANISMS) == set(MECHANISM_KINDS) == set(MECHANISM_PARAMS)

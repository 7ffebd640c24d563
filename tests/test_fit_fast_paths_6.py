"""The child model's fast paths, round 6: a stable order from 16-bit keys of values on a grid, curves made in one
array, a scan's subset marked instead of sorted, and rows taken instead of indexed give bit for bit what the
plain computations give."""

from __future__ import annotations

import numpy as np
import pytest

from auditors import estimate
from auditors.estimate import ChildModel
from auditors.estimators import (
    ESTIMATORS,
    ORDINAL_KEYS,
    ORDINAL_PROBE,
    Categorical,
    Saturation,
    ordinal_keys,
    stable_order,
)
from tests.test_audit_fast_paths import _random_child


def _tricky(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2 * ORDINAL_PROBE + 1, 30_000))
    counts = rng.poisson(30, n).astype(float)
    decimals = np.round(rng.normal(50, 10, n), 1)
    signed_zeros = counts - 30.0
    signed_zeros[signed_zeros == 0] = -0.0  # zeros of one sign, negative
    mixed_zeros = signed_zeros.copy()
    mixed_zeros[np.flatnonzero(mixed_zeros == 0)[::2]] = 0.0  # both signs: refused, the plain sort
    wide = rng.integers(0, 3 * ORDINAL_KEYS, n).astype(float)  # more levels than keys
    huge = 2.0**60 + rng.integers(0, 50, n) * 2.0**8  # a grid far from zero
    tiny = rng.integers(0, 40, n) * 5e-324  # subnormal steps: the scale overflows
    late_collision = counts.copy()
    late_collision[-1] = 30.0 + 1e-9  # a value off the grid (on 30's key) only after the probed rows
    with_nan, with_inf = counts.copy(), counts.copy()
    with_nan[n // 2], with_inf[n // 3] = np.nan, np.inf
    return [
        counts,
        decimals,
        np.round(rng.normal(5, 1, n), 2),
        signed_zeros,
        mixed_zeros,
        wide,
        huge,
        tiny,
        late_collision,
        with_nan,
        with_inf,
        rng.normal(size=n),  # spread out: refused
        np.full(n, 3.25),  # constant
        np.array([2.0, 1.0]),
        np.array([1.0, 1.0, 0.0]),
        counts[: ORDINAL_PROBE * 2],  # short: no probe
        np.array([-(2.0**1023), 2.0**1023, 0.0]),  # the span overflows
    ]


@pytest.mark.parametrize("seed", range(4))
def test_stable_order_is_the_stable_argsort(seed):
    for values in _tricky(seed):
        want = np.argsort(values, kind="stable")
        assert np.array_equal(stable_order(values), want)
        assert np.array_equal(stable_order(values[::-1].copy()), np.argsort(values[::-1], kind="stable"))


@pytest.mark.parametrize("seed", range(4))
def test_ordinal_keys_order_values_exactly(seed):
    accepted = 0
    for values in _tricky(seed):
        keys = ordinal_keys(values)
        if keys is None:
            continue
        accepted += 1
        assert keys.dtype == np.uint16 and len(keys) == len(values)
        order = np.argsort(values, kind="stable")
        k, v = keys[order], values[order]
        assert np.all((k[1:] > k[:-1]) == (v[1:] > v[:-1]))  # a higher value: a higher key
        assert np.all((k[1:] == k[:-1]) == (v[1:] == v[:-1]))  # equal values: equal keys
    assert accepted >= 6  # counts, decimals, zeros of one sign, a far grid, short ones: most grids are kept


def test_ordinal_keys_refuse_what_they_cannot_order():
    values = _tricky(0)
    refused = {4, 5, 7, 9, 10, 11, 12, 16}  # both zero signs, too many levels, no scale, NaN, inf, spread, constant
    for k in refused:
        assert ordinal_keys(values[k]) is None, k
    assert ordinal_keys(values[8]) is None  # the spread-out value past the probe is found on the second pass
    assert ordinal_keys(np.array([1.0])) is None
    assert ordinal_keys(np.array([1, 2, 3])) is None  # (integers: not this path)


@pytest.mark.parametrize("seed", range(3))
def test_curves_are_the_plain_expression(seed):
    rng = np.random.default_rng(seed)
    values = -np.maximum(rng.normal(0, 3, 500), 0)
    values[:3] = [-0.0, -np.inf, np.nan]
    scales = np.std(values[3:]) * np.linspace(0.1, 4.0, 79)
    for cands in (scales, np.array([0.0, -1.0, np.inf, np.nan, 1e-300])):
        with np.errstate(all="ignore"):  # (a zero or NaN scale: both ways warn alike)
            want = -np.expm1(values[:, None] / cands[None, :])
            got = Saturation.curves(values, cands)
        assert got.tobytes() == want.tobytes()
    ints = np.arange(5)  # another dtype: the plain expression itself
    assert (
        Saturation.curves(ints, np.array([1.0, 2.0])).tobytes()
        == (-np.expm1(ints[:, None] / 2.0 ** np.arange(2))).tobytes()
    )


@pytest.mark.parametrize("n", [20_001, 20_002, 30_000, 77_608])
def test_subset_positions_are_the_sorted_draw(n):
    want = np.sort(np.random.default_rng(0).choice(n, estimate.SCAN_ROWS, replace=False))
    got = estimate.scan_subset(n)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(3))
def test_taken_rows_are_the_indexed_rows(seed):
    """A curve's columns and a unit attribute's dummies are taken (np.take) where they were indexed: the same
    values in the same layout as the features indexed row by row."""
    contract, rows = _random_child(seed, rolling=False)
    model = ChildModel(contract, "y", rows)
    curve = next(e for e in model.edges if e.kind == "saturation")
    cands = model.candidates(curve)
    picked = np.flatnonzero(np.random.default_rng(seed).random(len(rows.y)) < 0.7)
    got = ESTIMATORS["saturation"].columns(model, curve, cands, picked)
    want = np.column_stack([ESTIMATORS["saturation"].features(model, curve, c)[picked, 0] for c in cands])
    assert got.tobytes() == want.tobytes() and got.flags.c_contiguous
    levels = next(e for e in model.edges if e.kind == "categorical")
    got = ESTIMATORS["categorical"].features(model, levels, None)
    want = Categorical.dummies(rows.by_unit["c"], model.levels["c"])[rows.unit_index]
    assert got.tobytes() == want.tobytes() and got.flags.c_contiguous == want.flags.c_contiguous
    assert np.array_equal(got, Categorical.dummies(rows.parents["c"], model.levels["c"]), equal_nan=True)


@pytest.mark.parametrize("seed", range(3))
def test_features_made_in_place_are_the_plain_expressions(seed):
    """A curve's and a log's features made in one array are the plain expressions' bits, on tricky values."""
    contract, rows = _random_child(seed, rolling=False)
    model = ChildModel(contract, "y", rows)
    curve = next(e for e in model.edges if e.kind == "saturation")
    x = model.x(curve)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-320]  # (the model's own parent column, changed in place)
    for origin in (0.0, 0, -1.5, 2):
        e = curve.model_copy(update={"params": {**curve.params, "origin": origin}})
        for theta in (float(np.nanstd(x[6:])) * 0.37, np.float64(2.5), 1e-300, 0.0, np.inf, np.float32(1.5)):
            with np.errstate(all="ignore"):
                want = -np.expm1(-np.maximum(x - origin, 0) / theta)[:, None]
                got = ESTIMATORS["saturation"].features(model, e, theta)
            assert got.tobytes() == want.tobytes() and got.dtype == want.dtype and got.shape == want.shape
    log = curve.model_copy(update={"kind": "monotone", "params": {"transform": "log"}})
    with np.errstate(all="ignore"):
        want = np.log1p(np.maximum(x, 0))[:, None]
        got = ESTIMATORS["monotone"].features(model, log, None)
    assert got.tobytes() == want.tobytes() and got.shape == want.shape
    plain = log.model_copy(update={"params": {"transform": "none"}})
    assert ESTIMATORS["monotone"].features(model, plain, None).tobytes() == x[:, None].tobytes()

"""The generator's own fits (worldgen/estimation.py), which set what each planted effect should read as."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from contracts.model import Edge, Variable
from tests.test_estimators import LEVELS, T, U, _contract
from worldgen.estimation import Fit, co_location_gap, fit_child, visible_panel
from worldgen.observation import roll


def test_a_categorical_parent_of_a_rolling_metric_gets_one_dummy_per_level():
    """A rolled constant is constant only up to rounding: levels are told apart before the rolling."""
    rng = np.random.default_rng(0)
    shifts = np.array([0.0, 0.02, 0.05, -0.03])
    level = rng.integers(len(LEVELS), size=U)
    is_open = rng.random((U, T)) > 0.15
    contribution = np.repeat(shifts[level][:, None], T, axis=1)
    daily = 0.4 + contribution + rng.normal(0, 0.01, (U, T))
    y = roll(daily, 7, is_open)
    y[~is_open] = np.nan
    child = Variable(
        name="y", description="y", grain="panel", dtype="float", unit="", mean=0.4, sd=0.05, system="s", layer=1,
        observe="rolling", window=7,
    )  # fmt: skip
    parent = Variable(
        name="cat", description="cat", grain="unit", dtype="categorical", levels=LEVELS, unit="", mean=0, sd=1,
        system="s", layer=0,
    )  # fmt: skip
    edge = Edge(parent="cat", child="y", kind="categorical", params={}, sign="+", note="")
    contract = _contract([edge], [parent, child])
    panel = {"y": y.reshape(-1), "open": is_open.reshape(-1).astype(np.int8), "day": np.tile(np.arange(T), U)}
    state = SimpleNamespace(
        column=lambda table, name: panel[name], contributions={"y": {"cat": contribution.reshape(-1)}}
    )
    fit = fit_child(contract, state, "y")
    assert len(fit.columns("cat")) == len(LEVELS) - 1
    spread, _ = fit.realised(edge, None)
    assert abs(spread - (shifts.max() - shifts.min())) < 0.005


def _panel_variable(name: str, layer: int) -> Variable:
    return Variable(
        name=name, description=name, grain="panel", dtype="float", unit="", mean=0, sd=1, system="s", layer=layer
    )  # fmt: skip


def _least_squares_fit(child: str, y: np.ndarray, day: np.ndarray, columns: dict[str, np.ndarray]) -> Fit:
    X = np.column_stack([np.ones(len(y)), *columns.values()])
    coef = np.linalg.lstsq(X, y, rcond=None)[0]
    sigma2 = float(np.sum((y - X @ coef) ** 2)) / (len(y) - X.shape[1])
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    return Fit(child, np.arange(len(y)), y, day, X, ["", *columns], coef, cov, False)


def test_a_shares_standard_error_covers_which_rows_blanks_leave():
    """A driver that barely moves between the halves: which 5% of rows go blank moves its share, and the
    share's standard error at rows_lost=0.05 grows by what that spread is (fixed coefficients, 400 draws)."""
    rng = np.random.default_rng(1)
    n, half = 4000, 100
    day = rng.integers(0, 2 * half, n)
    a = rng.normal(0, 2, n) + 0.5 * (day >= half)  # the change's main driver
    b = rng.normal(0, 2, n) + 0.05 * (day >= half)  # a driver whose own move is smaller than its noise
    fit = _least_squares_fit("y", a + b + rng.normal(0, 1, n), day, {"a": a, "b": b})
    _, exact = fit.shares(half, {"a", "b"}, rows_lost=0.0)
    _, blanked = fit.shares(half, {"a", "b"}, rows_lost=0.05)
    predicted = np.sqrt(blanked["b"] ** 2 - exact["b"] ** 2)
    late = day >= half
    shares = []
    for _ in range(400):
        kept = rng.random(n) > 0.05
        d = {
            p: fit.coef[j] * (x[kept & late].mean() - x[kept & ~late].mean())
            for j, (p, x) in enumerate({"a": a, "b": b}.items(), 1)
        }
        shares.append(d["b"] / (d["a"] + d["b"]))
    assert 0.8 < np.std(shares) / predicted < 1.25


def test_a_lagged_cause_reads_its_last_report_over_unreported_days():
    """Closed weekends: no file holds a Saturday or Sunday, so a root series reads the Friday's value over
    them (an analyst's last report), activity its mean over reported days; every day reported, the truth."""
    units, days = 3, 28
    rng = np.random.default_rng(2)
    x = rng.normal(5, 2, (units, days))
    is_open = np.tile(np.arange(days) % 7 < 5, (units, 1))  # day 0 is a Monday
    params = {"beta": 2.0, "lag": 1, "center": 5.0}
    root = Edge(parent="rain", child="y", kind="lag", params=params, sign="+", note="")
    made = Edge(parent="visits", child="y", kind="lag", params=params, sign="+", note="")
    feeds = Edge(parent="rain", child="visits", kind="monotone", params={}, sign="+", note="")
    variables = [_panel_variable("rain", 0), _panel_variable("visits", 1), _panel_variable("y", 2)]
    contract = _contract([root, made, feeds], variables)
    panel = {"open": is_open.reshape(-1).astype(np.int8)}
    state = SimpleNamespace(column=lambda table, name: panel[name])
    saturday, sunday, friday, monday = 5, 6, 4, 7
    carried = visible_panel(contract, state, root, x)
    assert np.array_equal(carried[:, saturday], x[:, friday]) and np.array_equal(carried[:, sunday], x[:, friday])
    assert np.array_equal(carried[:, monday], x[:, monday])
    held = visible_panel(contract, state, made, x)
    assert np.allclose(held[:, sunday], x[is_open].mean()) and np.array_equal(held[:, friday], x[:, friday])
    orders = Variable(
        name="orders", description="orders", grain="event", dtype="float", unit="", mean=0, sd=1, system="s", layer=0
    )  # fmt: skip
    daily = Edge(parent="orders", child="y", kind="lag", params=params, sign="+", note="")
    events = _contract([daily], [orders, _panel_variable("y", 1)])
    assert np.allclose(visible_panel(events, state, daily, x)[:, sunday], x[is_open].mean())  # no events: mean
    panel["open"] = np.ones(units * days, dtype=np.int8)
    assert visible_panel(contract, state, root, x) is x


def test_a_slope_moves_no_further_than_its_gap_when_a_co_parent_step_moves():
    """A slope whose co-parent is a step on a correlated cause: refitted with the step at any candidate
    location inside the step's tolerance, the slope stays within the gap; outside it, it may not."""
    rng = np.random.default_rng(3)
    n = 3000
    x1 = rng.normal(0, 1, n)
    x2 = 0.6 * x1 + rng.normal(0, 0.8, n)
    step = (x1 > 0.3).astype(float)
    y = 1.0 * x2 + 1.5 * step + rng.normal(0, 1.0, n)
    slope = Edge(parent="x2", child="y", kind="monotone", params={"beta": 1.0, "transform": "linear", "center": 0.0, "parent_sd": 1.0}, sign="+", note="")  # fmt: skip
    jump = Edge(parent="x1", child="y", kind="threshold", params={"tau": 0.3, "jump": 1.5, "center": 0.0, "parent_sd": 1.0}, sign="+", note="")  # fmt: skip
    contract = _contract([slope, jump], [_panel_variable("x1", 0), _panel_variable("x2", 0), _panel_variable("y", 1)])
    state = SimpleNamespace(inputs={"x1->y": x1})
    fit = _least_squares_fit("y", y, np.zeros(n, dtype=int), {"x1": 1.5 * step, "x2": x2})
    assert co_location_gap(contract, state, fit, slope, {}) == 0.0  # no located co-parent: nothing moves
    gap = co_location_gap(contract, state, fit, slope, {"x1->y": 0.5})
    assert gap > 0.01
    for tau in (-0.15, 0.75):  # inside the tolerance of 0.5 around 0.3
        moved = _least_squares_fit("y", y, fit.day, {"x1": (x1 > tau).astype(float), "x2": x2})
        assert abs(moved.coef[2] - fit.coef[2]) <= gap + 1e-9
    far = _least_squares_fit("y", y, fit.day, {"x1": (x1 > 1.5).astype(float), "x2": x2})
    assert abs(far.coef[2] - fit.coef[2]) > gap  # a step far outside its tolerance moves it more

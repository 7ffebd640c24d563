"""The generator's own fits (worldgen/estimation.py), which set what each planted effect should read as."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from contracts.model import Edge, Variable
from tests.test_estimators import LEVELS, T, U, _contract
from worldgen.estimation import fit_child
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

"""The auditor's estimators on controlled data: each recovers the statistic it was planted with.

The data are made here with plain numpy (not with the generator), one child per mechanism kind, so a wrong
feature, scan or statistic in auditors/estimators.py fails its own test.
"""

from __future__ import annotations

import numpy as np
import pytest

from auditors.estimate import ChildModel, Rows
from contracts.model import Contract, Edge, Variable

U, T = 40, 240
LEVELS = ["a", "b", "c", "d"]


def _variable(name: str, grain: str = "panel", dtype: str = "float", levels: list[str] | None = None) -> Variable:
    return Variable(
        name=name, description=name, grain=grain, dtype=dtype, unit="", mean=0, sd=1, levels=levels or [],
        system="s", layer=0,
    )  # fmt: skip


def _contract(edges: list[Edge], variables: list[Variable]) -> Contract:
    raw = {
        "world_id": "w", "seed": 0, "index": 0, "size": "small", "domain": "d",
        "persona": {"id": "p", "domain": "d", "role": "r", "organisation": "o", "region": "g", "concern": "c"},
        "timeline": {"start": "2025-01-01", "periods": T, "change_day": T // 2},
        "regions": ["north"],
        "calendar": {},
        "parties": {"loyalty": 1.0, "home_share": 0.8, "history_days": 0, "since": "signup_date"},
        "events": {"completion_hours": 1.0, "feedback_delay_hours": 1.0, "key_style": "sequence", "key_offset": 0},
        "entities": [
            {"name": "u", "role": "unit", "table": "units", "key": "unit_id", "prefix": "U", "count": U},
            {"name": "p", "role": "party", "table": "parties", "key": "party_id", "prefix": "P", "count": 1},
            {"name": "e", "role": "event", "table": "events", "key": "event_id", "prefix": "E", "count": 1},
        ],
        "measures": {
            "capacity": {"name": "cap", "unit": "x", "mean": 5, "sd": 2, "min": 1, "max": 20, "decimals": 0},
            "amount": {"name": "amt", "unit": "x", "mean": 5, "sd": 2, "min": 1, "max": 20, "decimals": 2,
                       "alt_unit": {"name": "c", "factor": 100}},
        },
        "variables": [v.model_dump() for v in variables], "edges": [e.model_dump() for e in edges],
        "layers": [], "invariants": [], "deliverables": [], "phenomena": [],
    }  # fmt: skip
    return Contract.model_validate(raw)


def _fit(kind: str, params: dict, effect, seed: int = 0, parent_dtype: str = "float", noise: float = 0.3):
    """Plant y = 10 + effect(x, rows) + noise and fit the child with the auditor's model."""
    rng = np.random.default_rng(seed)
    unit_index = np.repeat(np.arange(U), T)
    day = np.tile(np.arange(T), U)
    panel = rng.normal(5.0, 1.0, (U, 1)) + rng.normal(0.0, 1.5, (U, T))  # unit levels and daily variation
    x = panel.reshape(-1)
    parents = {"x": x, "m": rng.normal(2.0, 1.0, U * T)}
    if parent_dtype == "categorical":
        parents["x"] = np.array(LEVELS, dtype=object)[rng.integers(len(LEVELS), size=U)][unit_index]
    capacity = rng.integers(2, 12, U).astype(float)[unit_index]
    rows = Rows(
        y=np.zeros(U * T), day=day, unit_index=unit_index, parents=parents, panels={"x": panel}, capacity=capacity
    )
    rows.y = 10 + effect(parents["x"], rows) + rng.normal(0, noise, U * T)
    edges = [Edge(parent="x", child="y", kind=kind, params=params, sign="+", note="")]
    variables = [_variable("x", dtype=parent_dtype, levels=LEVELS if parent_dtype == "categorical" else None)]
    variables += [_variable("y"), _variable("m")]
    if kind == "interaction":
        edges.append(Edge(parent="m", child="y", kind="monotone", params={"transform": "linear"}, sign="+", note=""))
    return ChildModel(_contract(edges, variables), "y", rows).fit()


CASES = {
    "monotone-linear": ("monotone", {"transform": "linear"}, lambda x, r: 1.7 * x, 1.7, 0.03),
    "monotone-log": ("monotone", {"transform": "log"}, lambda x, r: 4.0 * np.log1p(np.maximum(x, 0)), 4.0, 0.1),
    "threshold": ("threshold", {}, lambda x, r: 3.0 * (x > 6.2), 6.2, 0.15),
    "saturation": (
        "saturation",
        {"origin": 1.0},
        lambda x, r: 6.0 * -np.expm1(-np.maximum(x - 1.0, 0) / 2.5),
        1.0 + 2.5 * np.log(2),
        0.3,
    ),
    "lag": ("lag", {}, lambda x, r: 2.0 * np.roll(x.reshape(U, T), 9, axis=1).reshape(-1), 9.0, 0.0),
    "interaction": (
        "interaction",
        {"center": 5.0, "moderator_center": 2.0, "moderator_scale": 1.0, "moderator": "m"},
        lambda x, r: 1.2 * (x - 5.0) * (r.parents["m"] - 2.0) + 0.5 * r.parents["m"],
        1.2,
        0.05,
    ),
    "seasonal": (
        "seasonal",
        {"center": 5.0},
        lambda x, r: 2.0 * (x - 5.0) * (1 + 0.6 * np.sin(2 * np.pi * r.day / 28 + 1.0)),
        0.6,
        0.05,
    ),
    "ratio": ("ratio", {}, lambda x, r: 8.0 * x / r.capacity, 8.0, 0.3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_estimator_recovers_its_planted_statistic(case):
    kind, params, effect, planted, tolerance = CASES[case]
    fit = _fit(kind, params, effect)
    got = fit.statistics["x->y"]
    assert abs(got - planted) <= tolerance, f"{case}: estimated {got}, planted {planted}"
    assert fit.directions["x->y"] == 1.0


def test_categorical_estimator_recovers_the_level_spread():
    shifts = {"a": 0.0, "b": 1.5, "c": -1.0, "d": 0.4}
    fit = _fit("categorical", {}, lambda x, r: np.array([shifts[v] for v in x]), parent_dtype="categorical")
    assert abs(fit.statistics["x->y"] - 2.5) <= 0.1
    assert "x->y" not in fit.directions, "a categorical effect has no single direction"


def test_an_absent_effect_is_estimated_as_absent():
    fit = _fit("monotone", {"transform": "linear"}, lambda x, r: 0.0 * x)
    assert abs(fit.statistics["x->y"]) < 0.02


def _blanked(share: float, seed: int = 1):
    """A mask of rows whose cause the observed files leave blank."""
    return np.random.default_rng(seed).random(U * T) < share


def test_a_blank_cause_of_a_step_leaves_the_fit_instead_of_sitting_below_the_step():
    # A fifth of the causes blank: read as "below the step" they would drag the step's size and location.
    blank = _blanked(0.2)

    def effect(x, rows):
        step = 3.0 * (x > 6.2)
        rows.parents["x"] = np.where(blank, np.nan, x)
        return step

    fit = _fit("threshold", {}, effect)
    assert abs(fit.statistics["x->y"] - 6.2) <= 0.15
    assert abs(np.mean(fit.contributions["x"][fit.contributions["x"] > 0]) - 3.0) < 0.1


def test_a_blank_or_unknown_level_leaves_the_fit_instead_of_joining_the_first_level():
    shifts = {"a": 3.0, "b": 1.5, "c": -1.0, "d": 0.4}  # the first level (the base) at one end of the spread
    blank = _blanked(0.15)

    def effect(x, rows):
        shown = np.where(blank, None, x)
        shown[np.flatnonzero(blank)[::2]] = "unreadable"
        rows.parents["x"] = shown
        return np.array([shifts[v] for v in x])

    fit = _fit("categorical", {}, effect, parent_dtype="categorical")
    assert abs(fit.statistics["x->y"] - 4.0) <= 0.1

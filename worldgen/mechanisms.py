"""The mechanism library: how a parent variable moves a child.

Each mechanism is `apply(parents, params, rng) -> contribution`, a pure function of named, aligned input
arrays (`x` the parent, plus `moderator`, `denominator` or `t` where the kind needs them) and its
contract parameters. A child is `mean + sum of its edges' contributions + noise`, so contributions are
centred: each is ~0 when its parent sits at its nominal level. `sample_params` draws parameters from the
world's rng on the natural scale of the variables, sized so each edge moves the child by about half to one
standard deviation. Parameters are rounded before use so the contract holds exactly what generated X.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Params = dict[str, Any]
Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Scale:
    """What sampling needs to know about a variable: nominal level, spread and categorical levels."""

    mean: float
    sd: float
    levels: tuple[str, ...] = ()
    binary: bool = False


def _r(value: float) -> float:
    return float(f"{value:.6g}")


def _sign(sign: str) -> float:
    return -1.0 if sign == "-" else 1.0


def _strength(rng: np.random.Generator) -> float:
    return rng.uniform(0.6, 1.0)


# --- monotone -------------------------------------------------------------------------------------
def monotone_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    transform = "linear" if parent.binary or rng.random() < 0.65 else "log"
    effect = _sign(sign) * _strength(rng) * child.sd
    if transform == "linear":
        beta = effect / parent.sd
    else:  # d/dx log1p(x) = 1/(1+x): the slope at the nominal mean matches the linear case
        beta = effect * (1 + max(parent.mean, 0.0)) / parent.sd
    return {"beta": _r(beta), "transform": transform, "center": _r(parent.mean)}


def monotone(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    x, c, beta = parents["x"], params["center"], params["beta"]
    if params["transform"] == "log":
        return beta * (np.log1p(np.maximum(x, 0.0)) - np.log1p(max(c, 0.0)))
    return beta * (x - c)


# --- threshold ------------------------------------------------------------------------------------
def threshold_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    tau = parent.mean + rng.uniform(-0.3, 0.9) * parent.sd
    jump = _sign(sign) * rng.uniform(1.4, 2.2) * child.sd
    return {"tau": _r(tau), "jump": _r(jump), "center": _r(parent.mean)}


def threshold(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    above = (parents["x"] > params["tau"]).astype(float)
    return params["jump"] * (above - float(params["center"] > params["tau"]))


# --- saturation -----------------------------------------------------------------------------------
def saturation_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    # The curve starts two sd below the parent's mean and bends within its range, so the diminishing
    # returns are visible in the data rather than flat beyond it.
    origin = parent.mean - 2.0 * parent.sd
    kappa = parent.sd * rng.uniform(0.8, 1.8)
    amplitude = _sign(sign) * _strength(rng) * child.sd * 1.6
    return {"amplitude": _r(amplitude), "kappa": _r(kappa), "origin": _r(origin), "center": _r(parent.mean)}


def saturation_curve(x: np.ndarray | float, amplitude: float, kappa: float, origin: float = 0.0) -> np.ndarray:
    """A * (1 - exp(-(x - origin) / kappa)) above origin: half the rise is reached at origin + kappa ln 2."""
    return amplitude * -np.expm1(-np.maximum(np.asarray(x, dtype=float) - origin, 0.0) / kappa)


def saturation(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    a, k, o = params["amplitude"], params["kappa"], params["origin"]
    return saturation_curve(parents["x"], a, k, o) - saturation_curve(params["center"], a, k, o)


# --- lag ------------------------------------------------------------------------------------------
def lag_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
    return {"beta": _r(beta), "lag": int(rng.integers(3, 22)), "center": _r(parent.mean)}


def shift_periods(panel: np.ndarray, lag: int, fill: float) -> np.ndarray:
    """Shift a (units, periods) array `lag` periods later; the first `lag` periods take `fill`."""
    out = np.full_like(panel, fill, dtype=float)
    if lag < panel.shape[1]:
        out[:, lag:] = panel[:, : panel.shape[1] - lag]
    return out


def lag(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    """x is a (units, periods) panel; the child at t responds to the parent at t - lag."""
    shifted = shift_periods(parents["x"], params["lag"], params["center"])
    return params["beta"] * (shifted - params["center"])


# --- interaction ----------------------------------------------------------------------------------
def interaction_params(
    parent: Scale, child: Scale, sign: str, rng: np.random.Generator, moderator: Scale | None = None
) -> Params:
    assert moderator is not None, "interaction needs a moderator scale"
    beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
    return {
        "beta": _r(beta),
        "center": _r(parent.mean),
        "moderator_center": _r(moderator.mean),
        "moderator_scale": _r(moderator.sd),
    }


def interaction(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    """beta * (x - cx) * z, z the standardised moderator: x matters more where the moderator is high."""
    z = (parents["moderator"] - params["moderator_center"]) / params["moderator_scale"]
    return params["beta"] * (parents["x"] - params["center"]) * z


# --- seasonal -------------------------------------------------------------------------------------
def seasonal_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
    return {
        "beta": _r(beta),
        "amplitude": _r(rng.uniform(0.5, 0.9)),
        "period": int(rng.choice([7, 28])),
        "phase": _r(rng.uniform(0, 2 * np.pi)),
        "center": _r(parent.mean),
    }


def seasonal(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    """The parent's effect swells and shrinks over a weekly or four-weekly cycle."""
    cycle = np.sin(2 * np.pi * parents["t"] / params["period"] + params["phase"])
    return params["beta"] * (parents["x"] - params["center"]) * (1 + params["amplitude"] * cycle)


# --- categorical ----------------------------------------------------------------------------------
def categorical_params(parent: Scale, child: Scale, sign: str, rng: np.random.Generator) -> Params:
    raw = rng.normal(0, 1, len(parent.levels))
    raw = (raw - raw.mean()) / max(raw.std(), 1e-9)
    shifts = raw * rng.uniform(0.7, 1.1) * child.sd
    return {"shifts": {lvl: _r(s) for lvl, s in zip(parent.levels, shifts, strict=False)}}


def categorical(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    """x holds level codes (indices into the parent's levels, in the contract's order)."""
    table = np.array(list(params["shifts"].values()))
    return table[parents["x"].astype(np.int64)]


# --- ratio ----------------------------------------------------------------------------------------
def ratio_params(
    parent: Scale, child: Scale, sign: str, rng: np.random.Generator, denominator: Scale | None = None
) -> Params:
    assert denominator is not None, "ratio needs the denominator's scale"
    per_capacity_sd = parent.sd / denominator.mean
    beta = _sign(sign) * _strength(rng) * child.sd / per_capacity_sd
    return {"beta": _r(beta), "center": _r(parent.mean / denominator.mean)}


def ratio(parents: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
    """The child follows the parent per unit of capacity (orders per kitchen station, ...)."""
    return params["beta"] * (parents["x"] / parents["denominator"] - params["center"])


@dataclass(frozen=True)
class Mechanism:
    kind: str
    apply: Callable[[Arrays, Params, np.random.Generator], np.ndarray]
    sample_params: Callable[..., Params]
    summary: str


MECHANISMS: dict[str, Mechanism] = {
    m.kind: m
    for m in (
        Mechanism("monotone", monotone, monotone_params, "child moves by beta per unit of parent (or of log1p parent)"),
        Mechanism("threshold", threshold, threshold_params, "child steps by jump once parent exceeds tau"),
        Mechanism(
            "saturation", saturation, saturation_params, "child rises as A(1-exp(-x/kappa)): diminishing returns"
        ),
        Mechanism("lag", lag, lag_params, "child responds to the parent `lag` periods earlier"),
        Mechanism("interaction", interaction, interaction_params, "parent's slope scales with a second parent"),
        Mechanism("seasonal", seasonal, seasonal_params, "parent's slope cycles with a weekly or four-weekly period"),
        Mechanism("categorical", categorical, categorical_params, "each level of the parent shifts the child"),
        Mechanism("ratio", ratio, ratio_params, "child follows the parent per unit of capacity"),
    )
}


def describe(kind: str, params: Params) -> str:
    """A one-line, human-readable statement of the planted relation, for the contract's note."""
    p = params
    match kind:
        case "monotone":
            return (
                f"{p['transform']} slope {p['beta']:g} per unit of {'log1p ' if p['transform'] == 'log' else ''}parent"
            )
        case "threshold":
            return f"step of {p['jump']:g} once the parent exceeds {p['tau']:g}"
        case "saturation":
            return f"saturating rise of up to {p['amplitude']:g} above {p['origin']:g}, half of it by {p['origin'] + p['kappa'] * np.log(2):.4g}"
        case "lag":
            return f"slope {p['beta']:g} on the parent {p['lag']} periods earlier"
        case "interaction":
            return f"slope {p['beta']:g} per unit of parent per moderator standard deviation"
        case "seasonal":
            return f"slope {p['beta']:g} modulated +-{p['amplitude']:g} over a {p['period']}-period cycle"
        case "categorical":
            return "level shifts " + ", ".join(f"{k} {v:+g}" for k, v in p["shifts"].items())
        case "ratio":
            return f"slope {p['beta']:g} per unit of parent per unit of capacity"
    raise KeyError(kind)

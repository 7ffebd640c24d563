"""The mechanism library: how a parent variable moves a child, one class per kind, everything in one place.

A mechanism is `apply(inputs, params, rng) -> contribution`, a pure function of named, aligned input arrays
(`x` the parent, plus `moderator`, `denominator` or `t` where the kind needs them) and its contract
parameters. A child is `mean + sum of its edges' contributions + noise`, so contributions are centred: each
is ~0 when its parent sits at its nominal level. Each class also says how its parameters are drawn, which
statistic of the data identifies it (with the business tolerance around the planted value), which way it
pushes the child, and which parents it can take. The auditor keeps its own estimators, keyed by the same
kinds (auditors/estimators.py); a test fails if either side lacks a kind.

Adding a mechanism: a subclass here, its estimator in auditors/estimators.py, its kind and required
parameters in contracts/model.py (MECHANISM_PARAMS), and its name in the packs' `kinds` lists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

Params = dict[str, Any]
Arrays = Mapping[str, np.ndarray]

# Each edge moves its child by this many child standard deviations, drawn log-uniformly: strong enough to be
# found in a year of noisy daily data, and spread over a factor of eight so that no prior guesses it.
STRENGTH = (0.25, 2.0)
BINARY_SD = 0.5  # the spread of a flag that is on half the time: a flag's effect is sized on it
BUSINESS_SHARE = 0.1  # an effect reported within 10% of its size is right (unless the data allow less)


@dataclass(frozen=True)
class Scale:
    """What sampling needs to know about a variable: nominal level, spread and categorical levels."""

    mean: float
    sd: float
    levels: tuple[str, ...] = ()
    binary: bool = False


@dataclass(frozen=True)
class Role:
    """What a mechanism may ask of a variable when deciding whether it can link parent -> child."""

    name: str
    dtype: str
    grain: str
    pattern: str = "signal"


def rounded(value: float) -> float:
    """Parameters are stored to 6 significant digits, and generation uses exactly the stored value."""
    return float(f"{value:.6g}")


def _sign(sign: str) -> float:
    return -1.0 if sign == "-" else 1.0


def _strength(rng: np.random.Generator) -> float:
    low, high = np.log(STRENGTH[0]), np.log(STRENGTH[1])
    return float(np.exp(rng.uniform(low, high)))


def signed(value: float) -> str:
    return "+" if value > 0 else "-"


class Mechanism:
    """One kind of generative relation. Subclasses fill in the hooks below."""

    kind: ClassVar[str]
    summary: ClassVar[str]
    # Extra aligned inputs `apply` reads besides the parent `x`.
    inputs: ClassVar[tuple[str, ...]] = ()
    # Locating a step or a bend needs a parent with many distinct values (not a lever or a unit attribute).
    locates: ClassVar[bool] = False
    # A shape parameter (a step, a bend, a lag, a period) that a driver's share depends on being located right.
    shaped: ClassVar[bool] = False
    # Relative weight when the skeleton picks among the kinds a pack allows for an edge.
    weight: ClassVar[float] = 1.0
    # The parameter whose sign is the direction of the effect (None: the mechanism has no single direction).
    sign_param: ClassVar[str | None] = "beta"
    # How the answer schema describes this mechanism's characteristic number to an analyst.
    magnitude_doc: ClassVar[str] = ""
    # Linear statistics: the share of the effect's size an answer may be off by (the data may allow less).
    business_share: ClassVar[float] = BUSINESS_SHARE

    def sample_params(self, parent: Scale, child: Scale, sign: str, rng: np.random.Generator, **extra: Scale) -> Params:
        raise NotImplementedError

    def apply(self, inputs: Arrays, params: Params, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def describe(self, params: Params) -> str:
        raise NotImplementedError

    def statistic(self, params: Params) -> tuple[str, float, float]:
        """(statistic name, planted value, business tolerance) of the edge_effect phenomenon."""
        raise NotImplementedError

    def effect_size(self, params: Params) -> float | None:
        """The planted coefficient whose standard error widens the tolerance (None for located statistics)."""
        return None

    def direction(self, params: Params) -> str | None:
        """'+' if the child rises with the parent, '-' if it falls, None if the kind has no single direction."""
        return signed(params[self.sign_param]) if self.sign_param else None

    def unsuitable(self, parent: Role, child: Role) -> str | None:
        """Why this kind cannot link parent -> child, or None if it can."""
        if parent.dtype == "categorical":
            return f"a categorical parent only takes 'categorical', not {self.kind!r}"
        return None


# --- monotone -------------------------------------------------------------------------------------
class Monotone(Mechanism):
    kind = "monotone"
    summary = "child moves by beta per unit of parent (or of log1p parent)"
    weight = 0.5  # listed for almost every edge; half weight lets richer mechanisms get planted too
    magnitude_doc = "slope per unit of the cause (per unit of log(1 + cause) for log effects)"
    LINEAR_SHARE = 0.65  # share of monotone edges that are linear rather than logarithmic

    def sample_params(self, parent, child, sign, rng, **extra):
        transform = "linear" if parent.binary or rng.random() < self.LINEAR_SHARE else "log"
        effect = _sign(sign) * _strength(rng) * child.sd
        if transform == "linear":
            beta = effect / parent.sd
        else:  # d/dx log1p(x) = 1/(1+x): the slope at the nominal mean matches the linear case
            beta = effect * (1 + max(parent.mean, 0.0)) / parent.sd
        return {"beta": rounded(beta), "transform": transform, "center": rounded(parent.mean)}

    def apply(self, inputs, params, rng):
        x, c, beta = inputs["x"], params["center"], params["beta"]
        if params["transform"] == "log":
            return beta * (np.log1p(np.maximum(x, 0.0)) - np.log1p(max(c, 0.0)))
        return beta * (x - c)

    def describe(self, p):
        return f"{p['transform']} slope {p['beta']:g} per unit of {'log1p ' if p['transform'] == 'log' else ''}parent"

    def statistic(self, p):
        return ("slope" if p["transform"] == "linear" else "log_slope", p["beta"], self.business_share * abs(p["beta"]))

    def effect_size(self, p):
        return p["beta"]


# --- threshold ------------------------------------------------------------------------------------
class Threshold(Mechanism):
    kind = "threshold"
    summary = "child steps by jump once parent exceeds tau"
    shaped = True
    locates = True
    sign_param = "jump"
    magnitude_doc = "the level of the cause at which the step happens"

    LOCATION_SD = (-1.0, 1.0)  # the step sits anywhere between one sd below and one sd above the mean
    JUMP_SD = (1.0, 2.2)  # and moves the child by this many of its sd
    TOLERANCE_SD = 0.1  # the floor of its tolerance; the profile of the data usually asks for more

    def sample_params(self, parent, child, sign, rng, **extra):
        tau = parent.mean + rng.uniform(*self.LOCATION_SD) * parent.sd
        jump = _sign(sign) * rng.uniform(*self.JUMP_SD) * child.sd
        return {"tau": rounded(tau), "jump": rounded(jump), "center": rounded(parent.mean)}

    def apply(self, inputs, params, rng):
        above = (inputs["x"] > params["tau"]).astype(float)
        return params["jump"] * (above - float(params["center"] > params["tau"]))

    def describe(self, p):
        return f"step of {p['jump']:g} once the parent exceeds {p['tau']:g}"

    def statistic(self, p):
        return "threshold_location", p["tau"], self.TOLERANCE_SD * p["parent_sd"]

    def unsuitable(self, parent, child):
        if parent.dtype == "binary":
            return f"threshold needs a continuous parent, {parent.name!r} is binary"
        return super().unsuitable(parent, child)


# --- saturation -----------------------------------------------------------------------------------
def saturation_curve(x: np.ndarray | float, amplitude: float, kappa: float, origin: float = 0.0) -> np.ndarray:
    """A * (1 - exp(-(x - origin) / kappa)) above origin: half the rise is reached at origin + kappa ln 2."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return amplitude * -np.expm1(-np.maximum(x - origin, 0.0) / kappa)
    # The same operations in the same order, in one buffer: the profile of a saturation's location calls
    # this a thousand times a world on whole panels, and the temporaries cost more than the arithmetic.
    out = np.subtract(x, origin)
    np.maximum(out, 0.0, out=out)
    np.negative(out, out=out)
    np.divide(out, kappa, out=out)
    np.expm1(out, out=out)
    np.negative(out, out=out)
    np.multiply(amplitude, out, out=out)
    return out


class Saturation(Mechanism):
    kind = "saturation"
    summary = "child rises as A(1-exp(-x/kappa)): diminishing returns"
    shaped = True
    locates = True
    sign_param = "amplitude"
    magnitude_doc = "the level of the cause by which half of the saturating rise is reached"

    ORIGIN_SD = (1.5, 2.5)  # the curve starts this many sd below the parent's mean
    KAPPA_SD = (0.5, 2.0)  # and bends over this many sd, so the diminishing returns lie inside the data
    AMPLITUDE = 1.6  # the full rise, in units of the drawn strength
    TOLERANCE_SD = 0.15

    def sample_params(self, parent, child, sign, rng, **extra):
        origin = parent.mean - rng.uniform(*self.ORIGIN_SD) * parent.sd
        kappa = parent.sd * rng.uniform(*self.KAPPA_SD)
        amplitude = _sign(sign) * _strength(rng) * child.sd * self.AMPLITUDE
        return {
            "amplitude": rounded(amplitude),
            "kappa": rounded(kappa),
            "origin": rounded(origin),
            "center": rounded(parent.mean),
        }

    def apply(self, inputs, params, rng):
        a, k, o = params["amplitude"], params["kappa"], params["origin"]
        return saturation_curve(inputs["x"], a, k, o) - saturation_curve(params["center"], a, k, o)

    def describe(self, p):
        half = p["origin"] + p["kappa"] * np.log(2)
        return f"saturating rise of up to {p['amplitude']:g} above {p['origin']:g}, half of it by {half:.4g}"

    def statistic(self, p):  # the parent level where half the rise is reached; tolerance in parent sd
        return "half_saturation", round(p["origin"] + p["kappa"] * math.log(2), 6), self.TOLERANCE_SD * p["parent_sd"]

    def unsuitable(self, parent, child):
        if parent.dtype == "binary":
            return f"saturation needs a continuous parent, {parent.name!r} is binary"
        return super().unsuitable(parent, child)


# --- lag ------------------------------------------------------------------------------------------
def shift_periods(panel: np.ndarray, lag: int, fill: float) -> np.ndarray:
    """Shift a (units, periods) array `lag` periods later; the first `lag` periods take `fill`."""
    out = np.full_like(panel, fill, dtype=float)
    if lag < panel.shape[1]:
        out[:, lag:] = panel[:, : panel.shape[1] - lag]
    return out


TIME_VARYING = ("panel", "event")


class Lag(Mechanism):
    kind = "lag"
    summary = "child responds to the parent `lag` periods earlier"
    shaped = True
    inputs = ("panel",)  # x arrives as a (units, periods) panel and the result is moved to the child's grain
    magnitude_doc = "the delay in days between a change in the cause and the response"

    DAYS = (2, 29)  # delays of two days to four weeks
    TOLERANCE_DAYS = 1.0

    def sample_params(self, parent, child, sign, rng, **extra):
        beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
        return {"beta": rounded(beta), "lag": int(rng.integers(*self.DAYS)), "center": rounded(parent.mean)}

    def apply(self, inputs, params, rng):
        """x is a (units, periods) panel; the child at t responds to the parent at t - lag."""
        shifted = shift_periods(inputs["x"], params["lag"], params["center"])
        return params["beta"] * (shifted - params["center"])

    def describe(self, p):
        return f"slope {p['beta']:g} on the parent {p['lag']} periods earlier"

    def statistic(self, p):
        return "lag_periods", float(p["lag"]), self.TOLERANCE_DAYS

    def unsuitable(self, parent, child):
        if parent.grain not in TIME_VARYING or child.grain not in TIME_VARYING:
            return "lag needs a time-varying parent and child"
        return super().unsuitable(parent, child)


# --- interaction ----------------------------------------------------------------------------------
class Interaction(Mechanism):
    kind = "interaction"
    summary = "parent's slope scales with a second parent"
    inputs = ("moderator",)
    magnitude_doc = "slope per unit of the cause per standard deviation of the moderating cause"

    def sample_params(self, parent, child, sign, rng, moderator: Scale | None = None, **extra):
        if moderator is None:
            raise ValueError("interaction needs a moderator scale")
        beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
        return {
            "beta": rounded(beta),
            "center": rounded(parent.mean),
            "moderator_center": rounded(moderator.mean),
            "moderator_scale": rounded(moderator.sd),
        }

    def apply(self, inputs, params, rng):
        """beta * (x - cx) * z, z the standardised moderator: x matters more where the moderator is high."""
        z = (inputs["moderator"] - params["moderator_center"]) / params["moderator_scale"]
        return params["beta"] * (inputs["x"] - params["center"]) * z

    def describe(self, p):
        return f"slope {p['beta']:g} per unit of parent per moderator standard deviation"

    def statistic(self, p):
        return "interaction_coefficient", p["beta"], self.business_share * abs(p["beta"])

    def effect_size(self, p):
        return p["beta"]


# --- seasonal -------------------------------------------------------------------------------------
class Seasonal(Mechanism):
    kind = "seasonal"
    summary = "parent's slope cycles with a weekly or four-weekly period"
    shaped = True
    inputs = ("t",)
    magnitude_doc = "the seasonal swing of the effect as a share of its average slope"

    AMPLITUDE = (0.3, 1.0)  # the effect swings by 30% to 100% of its average over the cycle
    PERIODS = (7, 14, 28)
    TOLERANCE = 0.1

    def sample_params(self, parent, child, sign, rng, **extra):
        beta = _sign(sign) * _strength(rng) * child.sd / parent.sd
        return {
            "beta": rounded(beta),
            "amplitude": rounded(rng.uniform(*self.AMPLITUDE)),
            "period": int(rng.choice(self.PERIODS)),
            "phase": rounded(rng.uniform(0, 2 * np.pi)),
            "center": rounded(parent.mean),
        }

    def apply(self, inputs, params, rng):
        """The parent's effect swells and shrinks over a weekly or four-weekly cycle."""
        cycle = np.sin(2 * np.pi * inputs["t"] / params["period"] + params["phase"])
        return params["beta"] * (inputs["x"] - params["center"]) * (1 + params["amplitude"] * cycle)

    def describe(self, p):
        return f"slope {p['beta']:g} modulated +-{p['amplitude']:g} over a {p['period']}-period cycle"

    def statistic(self, p):
        return "seasonal_amplitude", p["amplitude"], self.TOLERANCE

    def unsuitable(self, parent, child):
        if parent.grain not in TIME_VARYING or child.grain not in TIME_VARYING:
            return "seasonal needs a time-varying parent and child"
        return super().unsuitable(parent, child)


# --- categorical ----------------------------------------------------------------------------------
class Categorical(Mechanism):
    kind = "categorical"
    summary = "each level of the parent shifts the child"
    sign_param = None
    magnitude_doc = "the spread between the highest and the lowest category's level"

    def sample_params(self, parent, child, sign, rng, **extra):
        raw = rng.normal(0, 1, len(parent.levels))
        raw = (raw - raw.mean()) / max(raw.std(), 1e-9)
        shifts = raw * _strength(rng) * child.sd
        return {"shifts": {lvl: rounded(s) for lvl, s in zip(parent.levels, shifts, strict=False)}}

    def apply(self, inputs, params, rng):
        """x holds level codes (indices into the parent's levels, in the contract's order)."""
        table = np.array(list(params["shifts"].values()))
        return table[inputs["x"].astype(np.int64)]

    def describe(self, p):
        return "level shifts " + ", ".join(f"{k} {v:+g}" for k, v in p["shifts"].items())

    def statistic(self, p):
        spread = max(p["shifts"].values()) - min(p["shifts"].values())
        return "level_shift_range", round(spread, 6), self.business_share * spread

    def effect_size(self, p):
        return max(p["shifts"].values()) - min(p["shifts"].values())

    def unsuitable(self, parent, child):
        return None if parent.dtype == "categorical" else "categorical needs a categorical parent"


# --- ratio ----------------------------------------------------------------------------------------
class Ratio(Mechanism):
    kind = "ratio"
    summary = "child follows the parent per unit of capacity"
    inputs = ("denominator",)
    magnitude_doc = "slope per unit of the cause per unit of capacity"

    def sample_params(self, parent, child, sign, rng, denominator: Scale | None = None, **extra):
        if denominator is None:
            raise ValueError("ratio needs the denominator's scale")
        per_capacity_sd = parent.sd / denominator.mean
        beta = _sign(sign) * _strength(rng) * child.sd / per_capacity_sd
        return {"beta": rounded(beta), "center": rounded(parent.mean / denominator.mean)}

    def apply(self, inputs, params, rng):
        """The child follows the parent per unit of capacity (orders per kitchen station, ...)."""
        return params["beta"] * (inputs["x"] / inputs["denominator"] - params["center"])

    def describe(self, p):
        return f"slope {p['beta']:g} per unit of parent per unit of capacity"

    def statistic(self, p):
        return "per_capacity_slope", p["beta"], self.business_share * abs(p["beta"])

    def effect_size(self, p):
        return p["beta"]


MECHANISMS: dict[str, Mechanism] = {
    m.kind: m for m in (Monotone(), Threshold(), Saturation(), Lag(), Interaction(), Seasonal(), Categorical(), Ratio())
}
# Statistics estimated as regression coefficients: their tolerance widens to three standard errors.
LINEAR_STATISTICS = frozenset(
    {"slope", "log_slope", "per_capacity_slope", "interaction_coefficient", "level_shift_range"}
)


def resolve(kind: str, draw: dict, sign: str, parent: Scale, extra: dict[str, Scale]) -> Params:
    """Natural-unit parameters of an edge from its contract draw and its parent's realised scale.

    Deterministic in the draw's seed, so the contract alone regenerates them.
    """
    child = Scale(mean=draw["child_mean"], sd=draw["child_sd"])
    # A flag's natural step is from off to on: its effect is sized per switch, whatever its realised spread
    # (a flag that is rarely on has a small sd, and dividing by it would make its switch enormous).
    seen = Scale(parent.mean, BINARY_SD, parent.levels, True) if parent.binary else parent
    params = MECHANISMS[kind].sample_params(seen, child, sign, np.random.default_rng(draw["seed"]), **extra)
    params["parent_sd"] = rounded(parent.sd)
    return params

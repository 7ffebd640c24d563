"""Root patterns: how a variable with no parents behaves over the timeline.

Unit attributes are static draws. `signal` roots have a unit effect, an annual cycle, AR(1) day-to-day noise
and a regime shift after the management change day for a subset of units. `policy` roots (levers) are step
functions that change for a subset of units around the change day and get a few nudges a year. Event roots
have a unit level and a shift after the change day. Every pattern changes something between the two halves,
which is what gives a world its H1 -> H2 story.
"""

from __future__ import annotations

import numpy as np

from contracts.model import Contract, Variable
from worldgen.grid import Grid

CHANGE_JITTER_DAYS = 10  # units adopt the change within +-10 days of the change day, not all on one day
CHANGED_SHARE = (0.35, 0.75)  # share of units whose level changes after the change day
SHIFT_SD = (0.8, 1.5)  # size of a signal's or lever's regime shift, in the variable's sd
BINARY_SWING = 0.25  # a binary root's probability moves by this much between the halves
# Signals: unit effect, annual cycle and AR(1) noise, each as a share of the variable's sd.
UNIT_EFFECT_SD = 0.4
ANNUAL_CYCLE_SD = 0.4
NOISE_SD = 0.5
AR_COEFFICIENT = 0.7  # day-to-day persistence: today's noise carries 70% of yesterday's
REGIME_SHARE = 0.6  # a signal's regime shift is 60% of a lever's (signals drift, levers are set)
# Levers: spread between units, and the few nudges managers give them each year.
LEVER_UNIT_SD = 0.6
LEVER_NUDGES = 3
LEVER_NUDGE_SD = 0.3  # +-0.3 sd nudges make a lever's effects identifiable beyond its one big change
# Event roots: a unit level, a shift after the change day, event-to-event noise (shares of the sd).
EVENT_UNIT_SD = 0.4
EVENT_SHIFT_SD = (0.5, 1.0)
EVENT_NOISE_SD = 0.6
# Campaigns: on/off windows of 10-39 days, the first starting within a month.
CAMPAIGN_LENGTH = (10, 40)
CAMPAIGN_FIRST_START = 30
LEVELS_PER_CATEGORY = 2  # every level of a categorical root gets at least two units when there are enough
CATEGORY_CONCENTRATION = 3.0  # Dirichlet concentration of level shares: uneven but never degenerate


def draw_root(v: Variable, grid: Grid, contract: Contract, rng: np.random.Generator) -> np.ndarray:
    """One root variable on its grid."""
    if v.grain == "unit":
        return _unit_attribute(v, grid, rng)
    if v.grain == "event":
        return _event_root(v, grid, contract, rng)
    U, T = grid.units, grid.periods
    change = contract.timeline.change_day + rng.integers(-CHANGE_JITTER_DAYS, CHANGE_JITTER_DAYS + 1, size=U)
    after = np.arange(T)[None, :] >= change[:, None]
    changed = rng.random(U) < rng.uniform(*CHANGED_SHARE)
    direction = rng.choice([-1.0, 1.0])
    if v.dtype == "binary":
        p_before = np.clip(v.mean + direction * BINARY_SWING, 0.05, 0.95)
        p_after = np.clip(v.mean - direction * BINARY_SWING, 0.05, 0.95)
        if v.pattern == "policy":
            return _campaigns(U, T, after & changed[:, None], p_before, p_after, rng)
        return (rng.random((U, T)) < np.where(after, p_after, p_before)).astype(float)
    shift = direction * rng.uniform(*SHIFT_SD) * v.sd
    if v.pattern == "policy":
        return _lever(v, U, T, after & changed[:, None], shift, rng)
    return _signal(v, U, T, after & changed[:, None], shift, rng)


def _unit_attribute(v: Variable, grid: Grid, rng: np.random.Generator) -> np.ndarray:
    U = grid.units
    if v.dtype != "categorical":
        return rng.normal(v.mean, v.sd, U)
    # Every level gets at least two units (when there are enough), so each level's shift is observable.
    k = len(v.levels)
    guaranteed = np.repeat(np.arange(k), LEVELS_PER_CATEGORY)[: min(U, LEVELS_PER_CATEGORY * k)]
    probs = rng.dirichlet(np.full(k, CATEGORY_CONCENTRATION))
    codes = np.concatenate([guaranteed, rng.choice(k, size=U - len(guaranteed), p=probs)])
    return np.array(v.levels, dtype=object)[rng.permutation(codes)]


def _event_root(v: Variable, grid: Grid, contract: Contract, rng: np.random.Generator) -> np.ndarray:
    """Drawn per event: a unit level, a shift after the change day, event noise."""
    unit_level = v.mean + EVENT_UNIT_SD * v.sd * rng.standard_normal(grid.units)
    shift = rng.choice([-1.0, 1.0]) * rng.uniform(*EVENT_SHIFT_SD) * v.sd
    late = grid.event_day >= contract.timeline.change_day
    base = unit_level[grid.event_unit] + np.where(late, shift, 0.0)
    return base + EVENT_NOISE_SD * v.sd * rng.standard_normal(base.shape)


def _lever(v: Variable, U: int, T: int, late: np.ndarray, shift: float, rng: np.random.Generator) -> np.ndarray:
    base = v.mean + LEVER_UNIT_SD * v.sd * rng.standard_normal(U)
    level = base[:, None] + np.where(late, shift, 0.0)
    for _ in range(LEVER_NUDGES):
        start = rng.integers(0, T, size=U)
        nudge = LEVER_NUDGE_SD * v.sd * rng.standard_normal(U)[:, None]
        level = level + np.where(np.arange(T)[None, :] >= start[:, None], nudge, 0.0)
    lo = v.min if v.min is not None else -np.inf
    hi = v.max if v.max is not None else np.inf
    return np.round(np.clip(level, lo, hi), v.decimals)


def _signal(v: Variable, U: int, T: int, late: np.ndarray, shift: float, rng: np.random.Generator) -> np.ndarray:
    unit_effect = UNIT_EFFECT_SD * v.sd * rng.standard_normal(U)[:, None]
    phase = rng.uniform(0, 365)
    season = ANNUAL_CYCLE_SD * v.sd * np.sin(2 * np.pi * (np.arange(T) + phase) / 365.0)[None, :]
    noise = np.empty((U, T))
    noise[:, 0] = rng.standard_normal(U)
    shocks = rng.standard_normal((U, T)) * np.sqrt(1 - AR_COEFFICIENT**2)
    for t in range(1, T):  # AR(1) over days; vectorised across units
        noise[:, t] = AR_COEFFICIENT * noise[:, t - 1] + shocks[:, t]
    regime = np.where(late, REGIME_SHARE * shift, 0.0)
    return v.mean + unit_effect + season + NOISE_SD * v.sd * noise + regime


def _campaigns(
    U: int, T: int, late: np.ndarray, p_before: float, p_after: float, rng: np.random.Generator
) -> np.ndarray:
    """On/off campaign windows per unit; the share of time on moves from p_before to p_after where `late`."""
    out = np.zeros((U, T))
    for u in range(U):
        t, on = int(rng.integers(0, CAMPAIGN_FIRST_START)), bool(rng.random() < p_before)
        while t < T:
            p = p_after if late[u, min(t, T - 1)] else p_before
            length = int(rng.integers(*CAMPAIGN_LENGTH))
            out[u, t : t + length] = float(on)
            t += length
            on = bool(rng.random() < p)
    return out

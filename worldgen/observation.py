"""Observation models: from a variable's latent level to the value its systems report.

Every model keeps the reported value's mean equal to the latent level wherever that level lies inside the
variable's range, so each edge's effect on the mean is what an analyst estimates, on the reported scale:
counts are Poisson around it, rates are k successes of the day's n trials, rolling metrics average the
daily values of a trailing window of open days, durations carry right-skewed noise, sporadic measures are
zero on most days and large on a few, and survey answers are whole points of a J-shaped scale (their
attenuation at the ends of the scale is measured when the contract is sealed, not assumed away).
"""

from __future__ import annotations

import numpy as np

from contracts.model import Variable

NOISE = 0.3  # measurement noise sd as a share of the variable's sd: effects stay visible above it
DURATION_SHAPE = 1.5  # gamma shape of duration noise: skewness 2/sqrt(1.5) = 1.6, a long right tail
SPORADIC_SHARE = 0.25  # a sporadic measure is non-zero on a quarter of days
SPORADIC_SHAPE = 1.5  # and gamma-distributed when it happens
SCALE_SKEW_SHAPE = 1.2  # survey noise is left-skewed: a few very unhappy answers
ANGRY_SHARE = 0.04  # answers that drop to the bottom of the scale whatever happened (the J's left arm)
ROLLING_DAILY_NOISE = 2.0  # daily noise of a rolled metric, in NOISE units (the window averages it down)


def skewed(rng: np.random.Generator, shape: float, size) -> np.ndarray:
    """Zero-mean, unit-sd, right-skewed noise (a centred gamma)."""
    return (rng.gamma(shape, 1.0, size) - shape) / np.sqrt(shape)


def report(
    v: Variable,
    latent: np.ndarray,
    rng: np.random.Generator,
    trials: np.ndarray | None = None,
    is_open: np.ndarray | None = None,
) -> np.ndarray:
    """The reported values of `v` given its latent level (same shape); `trials` for rates, `is_open`
    ((units, periods) booleans) for rolling windows."""
    sd = v.sd
    match v.observe:
        case "count":
            return rng.poisson(np.maximum(np.nan_to_num(latent, nan=0.0), 0.0)).astype(float)
        case "rate":
            n = np.asarray(trials, dtype=np.int64)
            p = np.clip(np.nan_to_num(latent, nan=0.0), 0.0, 1.0)
            k = rng.binomial(np.maximum(n, 0), p)
            return np.where(n > 0, k / np.maximum(n, 1), np.nan)
        case "rolling":
            daily = latent + rng.normal(0, ROLLING_DAILY_NOISE * NOISE * sd, latent.shape)
            return roll(daily, v.window or 1, is_open)
        case "duration":
            return latent + NOISE * sd * skewed(rng, DURATION_SHAPE, latent.shape)
        case "sporadic":
            happens = rng.random(latent.shape) < SPORADIC_SHARE
            size = rng.gamma(SPORADIC_SHAPE, 1.0, latent.shape) / SPORADIC_SHAPE
            return np.where(happens, np.maximum(latent, 0.0) / SPORADIC_SHARE * size, 0.0)
        case "scale":
            return _scale(v, latent, rng)
    return latent + rng.normal(0, NOISE * sd, latent.shape)


def _scale(v: Variable, latent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Whole points of a rating scale: left-skewed answers, a few angry ones, rounded at random so that
    the mean of the points equals the latent satisfaction inside the scale."""
    lo, hi = float(v.min if v.min is not None else 1), float(v.max if v.max is not None else 5)
    answer = latent - NOISE * 2 * v.sd * skewed(rng, SCALE_SKEW_SHAPE, latent.shape)
    answer = np.where(rng.random(latent.shape) < ANGRY_SHARE, lo, answer)
    answer = np.clip(answer, lo, hi)
    floor = np.floor(answer)
    return floor + (rng.random(latent.shape) < answer - floor)


def roll(daily: np.ndarray, window: int, is_open: np.ndarray | None) -> np.ndarray:
    """Trailing mean over the last `window` days of a (units, periods) array, counting open days only."""
    values = np.where(is_open, daily, np.nan) if is_open is not None else daily
    present = np.isfinite(values)
    filled = np.where(present, values, 0.0)
    total = np.cumsum(filled, axis=1)
    count = np.cumsum(present, axis=1)
    total[:, window:] -= total[:, :-window].copy()
    count[:, window:] -= count[:, :-window].copy()
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def respond(v: Variable, latent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Who answers the survey: about `v.response` of events, more often after a worse experience.

    Answering depends on the expected experience (the latent level, a function of the causes), never on
    the answer's own noise: those who answer differ from those who do not only in their causes, so effects
    estimated among answers are unbiased.
    """
    share = v.response or 0.0
    z = (latent - np.nanmean(latent)) / (np.nanstd(latent) or 1.0)
    weight = np.exp(-0.5 * np.nan_to_num(z))
    p = np.clip(share * weight / weight.mean(), 0.0, 1.0)
    return rng.random(latent.shape) < p

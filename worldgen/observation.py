"""Observation models: from a variable's latent level to the value its systems report.

Every model keeps the reported value's mean equal to the latent level wherever that level lies inside the
variable's range, so each edge's effect on the mean is what an analyst estimates, on the reported scale:
counts are Poisson around it, rates are k successes of the day's n trials, rolling metrics average the
daily values of a trailing window of open days, durations are the latent level times log-normal noise (most
of an event's duration is its own luck, with a long right tail), sporadic measures are zero on most days and
large on a few, and survey answers are whole points of a J-shaped scale: the top point most common, a bump
of angry answers at the bottom (their attenuation at the ends of the scale is measured when the contract is
sealed, not assumed away).
"""

from __future__ import annotations

import functools

import numpy as np

from contracts.model import Variable

NOISE = 0.3  # measurement noise sd as a share of the variable's sd: effects stay visible above it
# An event's own luck moves its duration as much as all its causes do (one wait is short, the next long): the
# noise sd at the variable's mean level is this many of its sds, so the log-normal tail shows in the file.
DURATION_NOISE = 1.0
SPORADIC_SHARE = 0.25  # a sporadic measure is non-zero on a quarter of days
SPORADIC_SHAPE = 1.5  # and gamma-distributed when it happens
# How far the average answer sits below the top of the scale is made up of angry answers at the bottom
# (the J's left arm) for this part, and of content answers a point or two below the top for the rest.
ANGRY_PART = 0.35
SCALE_RATIO_GRID = np.geomspace(1e-3, 1e3, 2001)  # geometric ratios to solve a content answer's mean on
ROLLING_DAILY_NOISE = 2.0  # daily noise of a rolled metric, in NOISE units (the window averages it down)
# A rating's answer distribution is worked out once per distinct level when there are at least this many
# rows and an evenly spaced sample of about DISTINCT_SAMPLE of them has at most this share of distinct
# levels (else sorting out the distinct levels would cost more than it saves; either way gives the same bits).
DISTINCT_MIN_ROWS = 2000
DISTINCT_SAMPLE = 1000
DISTINCT_MAX_SHARE = 0.8


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
            return _duration(v, latent, rng)
        case "sporadic":
            happens = rng.random(latent.shape) < SPORADIC_SHARE
            size = rng.gamma(SPORADIC_SHAPE, 1.0, latent.shape) / SPORADIC_SHAPE
            return np.where(happens, np.maximum(latent, 0.0) / SPORADIC_SHARE * size, 0.0)
        case "scale":
            return _scale(v, latent, rng)
    return latent + rng.normal(0, NOISE * sd, latent.shape)


def _duration(v: Variable, latent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The latent duration times a mean-one log-normal: the mean stays the latent level, the spread grows
    with it and the right tail is long, as waits, lead times and delays are. The luck is as wide as the
    causes move the level (or as the variable's sd, if wider), so strong causes do not hide the tail."""
    spread = max(v.sd, nan_mean_sd(latent)[1]) if np.isfinite(latent).any() else v.sd
    cv = DURATION_NOISE * spread / v.mean if v.mean > 0 else DURATION_NOISE
    sigma = np.sqrt(np.log1p(cv**2))
    luck = np.exp(sigma * rng.standard_normal(latent.shape) - sigma**2 / 2)
    return np.where(latent > 0, latent * luck, latent)


def _scale(v: Variable, latent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Whole points of a rating scale whose mean is the latent satisfaction inside the scale, J-shaped:
    an angry share at the bottom point, and the rest a geometric fall from the top point down (the top is
    the most common answer whenever the average sits in the scale's upper half)."""
    lo, hi = float(v.min if v.min is not None else 1), float(v.max if v.max is not None else 5)
    points = int(round(hi - lo))
    below_top = np.clip(hi - np.nan_to_num(latent, nan=(lo + hi) / 2), 0.01 * points, 0.99 * points)
    angry = ANGRY_PART * below_top / points
    content_mean = (1 - ANGRY_PART) * below_top / (1 - angry)
    flat = content_mean.ravel()
    columns = _answer_columns(flat, points)
    u = rng.random(flat.shape) * columns[-1]
    drop = _points_below(u, columns).reshape(latent.shape)
    drop = np.where(rng.random(latent.shape) < angry, points, drop)
    return np.where(np.isnan(latent), np.nan, hi - drop)


def _points_below(u: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """How many of its row's cumulative weights each draw exceeds, given them by point (`columns`, the
    (points, rows) transpose of `cdf`): `(u[:, None] > cdf).sum(axis=1)`, counted one point at a time (a
    rating has a handful of points) instead of through a (rows, points) array."""
    drop = np.zeros(len(u), dtype=np.int64)
    for column in columns:
        drop += u > column
    return drop


@functools.cache
def _grid_means(points: int) -> np.ndarray:
    """The mean drop below the top of a geometric fall with each ratio of SCALE_RATIO_GRID (rises with it)."""
    steps = np.arange(points + 1)
    weights = SCALE_RATIO_GRID[:, None] ** steps[None, :]
    means = (weights * steps).sum(axis=1) / weights.sum(axis=1)
    means.flags.writeable = False  # shared by every call
    return means


def _answer_cdf_plain(content_mean: np.ndarray, points: int) -> np.ndarray:
    """Each row's unnormalised cumulative weights of dropping 0..points below the top, for its content mean."""
    steps = np.arange(points + 1)
    ratio = np.interp(content_mean, _grid_means(points), SCALE_RATIO_GRID)
    return np.cumsum(ratio[:, None] ** steps[None, :], axis=1)


def _answer_columns_plain(content_mean: np.ndarray, points: int) -> np.ndarray:
    """`_answer_cdf_plain(content_mean, points).T`, worked out one point (a contiguous row) at a time: the
    same interpolated ratios, the same powers and the same running sums in the same order (a cumulative sum
    adds each term to the sum so far). x**0 is 1 and x**1 is x, exactly as pow gives them; the higher powers
    are numpy's power with an exponent array as the plain way's (a scalar exponent 2 would take numpy's
    square instead, whose last bits differ). ~1.7x faster than a running sum along rows of a handful."""
    ratio = np.interp(content_mean, _grid_means(points), SCALE_RATIO_GRID)
    columns = np.empty((points + 1, len(ratio)))
    columns[0] = 1.0
    if points:
        np.add(columns[0], ratio, out=columns[1])
    for k in range(2, points + 1):
        np.add(columns[k - 1], np.power(ratio, np.full(len(ratio), k, dtype=np.int64)), out=columns[k])
    return columns


def _answer_columns(content_mean: np.ndarray, points: int) -> np.ndarray:
    """`_answer_columns_plain`, computed once per distinct content mean when the values repeat (an event's
    level often comes from its unit-day's causes, so tens of thousands of rows share a few hundred levels).
    Each row's result depends on its own value only (the same interpolation, powers and running sum per
    row), so spreading the distinct rows' results back gives the same bits. The rows are grouped by a hash
    of their bits (`_hash_buckets`), ~4x faster than np.unique's sort; a row that differs from its group's
    value (a hash collision) gets its own result."""
    n = len(content_mean)
    if n < DISTINCT_MIN_ROWS or not np.isfinite(content_mean).all():
        return _answer_columns_plain(content_mean, points)
    sample = content_mean[:: n // DISTINCT_SAMPLE]
    if len(np.unique(sample)) > DISTINCT_MAX_SHARE * len(sample):  # mostly distinct: grouping would not pay
        return _answer_columns_plain(content_mean, points)
    values = np.ascontiguousarray(content_mean, dtype=np.float64)
    bucket, holder = _hash_buckets(values)
    held = np.flatnonzero(holder >= 0)  # the buckets some row falls in, each with one of its rows
    slot = np.zeros(len(holder), dtype=np.intp)
    slot[held] = np.arange(len(held))
    columns = np.take(_answer_columns_plain(values.take(holder.take(held)), points), slot.take(bucket), axis=1)
    # A row whose value is not its bucket's holder's (another value hashed alike) is worked out on its own.
    bits = values.view(np.uint64)
    strangers = np.flatnonzero(bits.take(holder.take(bucket)) != bits)
    if strangers.size:
        columns[:, strangers] = _answer_columns_plain(values.take(strangers), points)
    return columns


HASH_BUCKETS_PER_ROW = 2  # buckets for `_answer_columns`'s grouping: distinct values rarely share one
FIBONACCI_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: multiplying spreads bits over the top ones


def _hash_buckets(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each value's hash bucket (the top bits of its bit pattern times an odd constant) and, for every
    bucket, one row that falls in it (-1: none). Equal bits share a bucket; unequal ones seldom do, and the
    caller compares each row with its bucket's holder, so which row holds a bucket does not matter."""
    bits = max(int(HASH_BUCKETS_PER_ROW * len(values)).bit_length(), 4)
    bucket = ((values.view(np.uint64) * FIBONACCI_MIX) >> np.uint64(64 - bits)).astype(np.intp)
    holder = np.full(1 << bits, -1, dtype=np.intp)
    holder[bucket] = np.arange(len(values), dtype=np.intp)
    return bucket, holder


def nan_mean_sd(values: np.ndarray) -> tuple[float, float]:
    """`np.nanmean` and `np.nanstd` of a float array, worked out once for both (`_fused_mean_sd`) when the
    array is contiguous float64 and what they sum is finite; else numpy's own."""
    if values.size and values.dtype == np.float64 and values.flags.c_contiguous:
        fused = _fused_mean_sd(values)
        if fused is not None:
            return fused
    return float(np.nanmean(values)), float(np.nanstd(values))


def _fused_mean_sd(values: np.ndarray) -> tuple[float, float] | None:
    """`np.nanmean` and `np.nanstd` of a contiguous float64 array with the same operations in the same
    order, each done once for both, 2-3x faster: the sum of the values (blanks as zeros) over the whole
    array as one reduction, divided by the count of non-blanks; the deviations from that mean (blanks as
    zeros), squared, summed the same way, divided by the count, and the square root. numpy's own take a
    masked copy, a count and a sum twice (`nanstd` works out the mean again), and `np.mean`/`np.std` of an
    array without a blank sum it twice too. A sum of finite values is finite or overflows to infinity, so a
    finite total proves that no value is a blank or infinite (either makes the total NaN or infinite). None
    (numpy's own ways) when the total is not finite or nothing is counted."""
    total = np.add.reduce(values, axis=None)
    if np.isfinite(total):  # no blank: `np.mean` and `np.std` of the array
        deviation = np.subtract(values, total / values.size)
        np.square(deviation, out=deviation)
        return float(total / values.size), float(np.sqrt(np.add.reduce(deviation, axis=None) / values.size))
    blank = np.isnan(values)
    count = values.size - int(np.count_nonzero(blank))
    if not count:
        return None
    present = values.copy()
    np.copyto(present, 0.0, where=blank)
    total = np.add.reduce(present, axis=None)
    if not np.isfinite(total):
        return None
    mean = total / count
    deviation = np.subtract(present, mean, out=present)
    np.copyto(deviation, 0.0, where=blank)
    np.multiply(deviation, deviation, out=deviation)
    return float(mean), float(np.sqrt(np.add.reduce(deviation, axis=None) / count))


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
    mean, sd = nan_mean_sd(latent)
    z = (latent - mean) / (sd or 1.0)
    weight = np.exp(-0.5 * np.nan_to_num(z))
    p = np.clip(share * weight / weight.mean(), 0.0, 1.0)
    return rng.random(latent.shape) < p

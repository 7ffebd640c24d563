"""Root patterns: how a variable with no parents behaves over the timeline.

External series (weather, macro indices, interest rates) are drawn once per region or nation and shared by
the units there: temperature follows the climate's annual cycle with persistent anomalies; rain falls on a
share of days, heavier in the wet season, with a heavy tail, on days a weather system shared by
neighbouring regions brings it; an index drifts slowly and shifts after the change day; a rate moves in
quarter-point steps a few times a year.

Unit attributes are static draws. `signal` roots have a unit effect, an annual cycle, AR(1) day-to-day noise
and a regime shift after the management change day for a subset of units. `policy` roots (levers) are step
functions that change for a subset of units around the change day and get a few nudges a year. Event roots
have a unit level and a shift after the change day. Every pattern changes something between the two halves,
which is what gives a world its H1 -> H2 story.

A change's direction is a coin flip, except for the one root `trend_push` picks to carry the persona's
trend: it changes the way that moves the focus as the persona's concern says (through edges whose signs
all agree), so the concern is planted instead of hoped for.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from contracts.calendar import days_of_year
from contracts.model import Contract, Variable
from worldgen.grid import Grid
from worldgen.mechanisms import MECHANISMS

CHANGE_JITTER_DAYS = 10  # units adopt the change within +-10 days of the change day, not all on one day
CHANGED_SHARE = (0.35, 0.75)  # share of units whose level changes after the change day
SHIFT_SD = (0.8, 1.5)  # size of a signal's or lever's regime shift, in the variable's sd
BINARY_SWING = 0.25  # a binary root's probability moves by this much between the halves
# Signals: unit effect, annual cycle and AR(1) noise, each as a share of the variable's sd. Together with
# the regime shift they fill the variable's spread, and each part stays large enough to be seen.
UNIT_EFFECT_SD = 0.4  # sites differ, but less than days do
ANNUAL_CYCLE_SD = 0.4  # a season an analyst notices, not one that hides the change day
NOISE_SD = 0.5  # day-to-day noise: the largest part, as in any daily business series
AR_COEFFICIENT = 0.7  # day-to-day persistence: today's noise carries 70% of yesterday's
REGIME_SHARE = 0.6  # a signal's regime shift is 60% of a lever's (signals drift, levers are set)
# Levers: spread between units, and the few nudges managers give them each year.
LEVER_UNIT_SD = 0.6  # managers set levers differently per site: most of a lever's spread is between units
LEVER_NUDGES = 3  # a few adjustments a year, as a change log shows them
LEVER_NUDGE_SD = 0.3  # +-0.3 sd nudges make a lever's effects identifiable beyond its one big change
# Event roots: a unit level, a shift after the change day, event-to-event noise (shares of the sd).
EVENT_UNIT_SD = 0.4  # a site's customers differ from another's
EVENT_SHIFT_SD = (0.5, 1.0)  # a visible but not overwhelming change after the change day
EVENT_NOISE_SD = 0.6  # one event differs from the next more than sites differ
# Campaigns: on/off windows of 10-39 days, the first starting within a month.
CAMPAIGN_LENGTH = (10, 40)
CAMPAIGN_FIRST_START = 30
LEVELS_PER_CATEGORY = 2  # every level of a categorical root gets at least two units when there are enough
CATEGORY_CONCENTRATION = 3.0  # Dirichlet concentration of level shares: uneven but never degenerate


def draw_root(
    v: Variable,
    grid: Grid,
    contract: Contract,
    rng: np.random.Generator,
    unit_region: np.ndarray,
    rise: float | None = None,
) -> np.ndarray:
    """One root variable on its grid (`unit_region`: each unit's region, for shared external series).
    `rise` (+1 or -1) fixes which way its change after the change day goes; None leaves it to the coin."""
    if v.grain == "unit":
        return _unit_attribute(v, grid, rng)
    if v.grain == "event":
        return _event_root(v, grid, contract, rng, rise)
    if v.scope != "unit":
        return external_series(v, grid, contract, rng, unit_region, rise)
    U, T = grid.units, grid.periods
    change = contract.timeline.change_day + rng.integers(-CHANGE_JITTER_DAYS, CHANGE_JITTER_DAYS + 1, size=U)
    after = np.arange(T)[None, :] >= change[:, None]
    draws = rng.random(U)
    share = rng.uniform(*CHANGED_SHARE)
    changed = draws < (share if rise is None else CHANGED_SHARE[1])  # the carrier: as many units as any root
    if v.dtype == "binary":  # a flag's probability moves from mean + direction * swing to mean - that
        direction = _direction(rng, None if rise is None else -rise)
        p_before = np.clip(v.mean + direction * BINARY_SWING, 0.05, 0.95)
        p_after = np.clip(v.mean - direction * BINARY_SWING, 0.05, 0.95)
        if v.pattern == "policy":
            return _campaigns(U, T, after & changed[:, None], p_before, p_after, rng)
        return (rng.random((U, T)) < np.where(after, p_after, p_before)).astype(float)
    direction, size = _direction(rng, rise), rng.uniform(*SHIFT_SD)
    shift = direction * (size if rise is None else SHIFT_SD[1]) * v.sd  # the carrier: as large as any root's
    if v.pattern == "policy":
        return _lever(v, U, T, after & changed[:, None], shift, rng)
    return _signal(v, after & changed[:, None], shift, rng, rise)


def _direction(rng: np.random.Generator, rise: float | None) -> float:
    """The coin is tossed either way, so fixing one root's direction moves no other draw of its stream."""
    coin = float(rng.choice([-1.0, 1.0]))
    return coin if rise is None else rise


# Kinds whose edge sign says which way the child moves with the parent on average (an interaction's
# slope averages to nothing over its moderator; a categorical parent has no order).
SIGNED_KINDS = frozenset(kind for kind, m in MECHANISMS.items() if m.sign_param and kind != "interaction")


def trend_push(contract: Contract, rng: np.random.Generator) -> dict[str, float]:
    """{root: rise} for one root, picked at random, whose change can carry the persona's trend: a root
    that changes at the change day and whose signed paths to the focus agree in sign (a path through an
    interaction or a category has no sign and is left out); its rise is the trend's direction times that
    sign. Empty without a trend or without such a root."""
    candidates = trend_carriers(contract)
    if not candidates:
        return {}
    root = sorted(candidates)[int(rng.integers(len(candidates)))]
    return {root: candidates[root]}


def trend_carriers(contract: Contract) -> dict[str, float]:
    """{root: rise} of every root `trend_push` may pick (its pick draws from the rng only among these);
    empty without a trend or without such a root."""
    persona = contract.persona
    if persona.trend is None or persona.focus is None:
        return {}
    wanted = 1.0 if persona.trend == "up" else -1.0
    children = {e.child for e in contract.edges}
    return {
        name: wanted * signed.pop()
        for name, signs in _path_signs(contract, persona.focus).items()
        if len(signed := signs - {None}) == 1 and name not in children and _changes(contract.variable(name))
    }


def _changes(v: Variable) -> bool:
    """A root whose level moves at the change day (unit attributes are static; weather and rates follow
    their own course)."""
    if v.grain == "unit" or v.dtype == "categorical":
        return False
    return v.scope == "unit" or v.shape in (None, "index")


def _path_signs(contract: Contract, focus: str) -> dict[str, set[float | None]]:
    """For each ancestor of the focus, the signs (products of edge signs) of its paths to the focus; None
    for a path through an edge with no sign."""
    children: dict[str, list] = {}
    for e in contract.edges:
        children.setdefault(e.parent, []).append(e)
    signs: dict[str, set[float | None]] = {focus: {1.0}}
    for layer in reversed(contract.layers):
        for name in layer:
            for e in children.get(name, []):
                if e.child not in signs:
                    continue
                edge = (1.0 if e.sign == "+" else -1.0) if e.kind in SIGNED_KINDS else None
                found = signs.setdefault(name, set())
                found |= {None if s is None or edge is None else s * edge for s in signs[e.child]}
    return signs


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


def _event_root(
    v: Variable, grid: Grid, contract: Contract, rng: np.random.Generator, rise: float | None
) -> np.ndarray:
    """Drawn per event: a unit level, a shift after the change day, event noise."""
    unit_level = v.mean + EVENT_UNIT_SD * v.sd * rng.standard_normal(grid.units)
    shift = _direction(rng, rise) * rng.uniform(*EVENT_SHIFT_SD) * v.sd
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


def _signal(v: Variable, late: np.ndarray, shift: float, rng: np.random.Generator, rise: float | None) -> np.ndarray:
    U, T = late.shape
    unit_effect = UNIT_EFFECT_SD * v.sd * rng.standard_normal(U)[:, None]
    phase = rng.uniform(0, 365)
    # The carrier's season does not undo its change: its second half is the warmer one. (This folding assumes
    # a year-long timeline, the default size; over 180 days it helps no more than chance, over 730 the
    # season hardly moves the halves.)
    if rise is not None:
        phase = phase % (365 / 2) + (365 / 4 if rise > 0 else 3 * 365 / 4)
    season = ANNUAL_CYCLE_SD * v.sd * np.sin(2 * np.pi * (np.arange(T) + phase) / 365.0)[None, :]
    first = rng.standard_normal(U)
    shocks = rng.standard_normal((U, T)) * np.sqrt(1 - AR_COEFFICIENT**2)
    noise = _recursion(first, shocks, AR_COEFFICIENT)  # AR(1) over days
    regime = np.where(late, REGIME_SHARE * shift, 0.0)
    return v.mean + unit_effect + season + NOISE_SD * v.sd * noise + regime


def _campaigns(
    U: int, T: int, late: np.ndarray, p_before: float, p_after: float, rng: np.random.Generator
) -> np.ndarray:
    """On/off campaign windows per unit; the share of time on moves from p_before to p_after where `late`.
    `_campaigns_plain` draws them one scalar at a time (~60 draws a unit, a few microseconds each through
    numpy's scalar path); on numpy's default PCG64 the same draws are made from one block of raw words
    (`_campaigns_raw`), which leaves the generator exactly where the plain way does."""
    if type(rng.bit_generator) is np.random.PCG64:
        out = _campaigns_raw(U, T, late, p_before, p_after, rng.bit_generator)
        if out is not None:
            return out
    return _campaigns_plain(U, T, late, p_before, p_after, rng)


def _campaigns_plain(
    U: int, T: int, late: np.ndarray, p_before: float, p_after: float, rng: np.random.Generator
) -> np.ndarray:
    out = np.zeros((U, T))
    for u, late_row in enumerate(late.tolist()):  # Python bools: indexing numpy by scalar costs more than a draw
        t, on = int(rng.integers(0, CAMPAIGN_FIRST_START)), bool(rng.random() < p_before)
        while t < T:
            p = p_after if late_row[t] else p_before
            length = int(rng.integers(*CAMPAIGN_LENGTH))
            if on:  # the rest stays off (zero)
                out[u, t : t + length] = 1.0
            t += length
            on = bool(rng.random() < p)
    return out


def _campaign_words(U: int, T: int) -> int:
    """Raw words enough for `_campaigns_raw` unless Lemire rejects: a unit's first start and on/off, then per
    window (at most T // shortest + 1) one length (at most a word) and one on/off (a word)."""
    return U * (2 + 2 * (T // CAMPAIGN_LENGTH[0] + 1)) + RAW_SLACK


RAW_SLACK = 64  # words for rejections (each about 1 in 10**8 draws); more than these sends the plain way
UINT32 = 0xFFFFFFFF
DOUBLE_UNIT = 1.0 / 9007199254740992.0  # 2**-53: numpy's double from the top 53 bits of a 64-bit word


def _campaigns_raw(
    U: int, T: int, late: np.ndarray, p_before: float, p_after: float, bitgen: np.random.PCG64
) -> np.ndarray | None:
    """`_campaigns_plain`'s draws made from PCG64's raw 64-bit words as numpy makes them: `random()` is the
    top 53 bits of one word times 2**-53; `integers(low, high)` (a range below 2**32) is Lemire's bounded
    draw on a 32-bit half word (the low half of a fresh word, the high half kept for the next such draw, as
    PCG64's `has_uint32` buffer does). A block of words large enough for the most any unit can use is drawn
    at once; afterwards the generator is set to the state the plain draws leave (its counter advanced by the
    words used, the half word kept). None, with the generator untouched, if the block runs out (a Lemire
    rejection, about one in 10**8 draws, could need more)."""
    start = bitgen.state
    words = bitgen.random_raw(_campaign_words(U, T)).tolist()
    has_half, half = bool(start["has_uint32"]), int(start["uinteger"])
    used = 0

    def bounded(low: int, high: int) -> int:
        """numpy's `integers(low, high)` for high - low <= 2**32 - 1 (Lemire, 32-bit)."""
        nonlocal has_half, half, used
        span = high - low
        while True:
            if has_half:
                has_half, draw = False, half
            else:
                word = words[used]
                used += 1
                has_half, half, draw = True, word >> 32, word & UINT32
            m = draw * span
            leftover = m & UINT32
            if leftover >= span or leftover >= (UINT32 - (span - 1)) % span:
                return low + (m >> 32)

    out = np.zeros((U, T))
    lo, hi = CAMPAIGN_LENGTH
    try:
        for u, late_row in enumerate(late.tolist()):
            t = bounded(0, CAMPAIGN_FIRST_START)
            on = (words[used] >> 11) * DOUBLE_UNIT < p_before
            used += 1
            while t < T:
                p = p_after if late_row[t] else p_before
                length = bounded(lo, hi)
                if on:
                    out[u, t : t + length] = 1.0
                t += length
                on = (words[used] >> 11) * DOUBLE_UNIT < p
                used += 1
    except IndexError:
        bitgen.state = start
        return None
    bitgen.state = start
    bitgen.advance(used)
    state = bitgen.state
    state["has_uint32"], state["uinteger"] = int(has_half), half
    bitgen.state = state
    return out


# External series --------------------------------------------------------------------------------------
WARMEST_DAY = {"north": 196, "south": 15}  # mid-July in the north, mid-January in the south
REGION_TEMP_SD = 1.5  # regions of one country differ by a degree or two on average
# Daily anomalies around the seasonal normal (Celsius) are larger where the seasons are: about 3 C in a
# continental mid-latitude climate, 1 C in the tropics.
TEMP_ANOMALY_BASE, TEMP_ANOMALY_PER_SWING = 0.5, 0.3
TEMP_ANOMALY_SD = (1.0, 3.5)
TEMP_PERSISTENCE = 0.75  # warm and cold spells last several days
SHARED_WEATHER = 0.75  # share of the daily weather that neighbouring regions share (their correlation)
RAIN_PERSISTENCE = 0.5  # wet days cluster
RAIN_SEASON = 0.25  # the wettest month sees this much more rain than the average month
RAIN_SHAPE = 0.7  # gamma shape of rain on wet days: most wet days are light, a few are downpours
INDEX_PERSISTENCE = 0.97  # an index moves slowly from day to day
INDEX_SHIFT_SD = (0.5, 1.2)  # and shifts by this many sd after the change day
RATE_STEP = 0.25  # rates move in quarter points
RATE_MOVES_PER_YEAR = (2, 5)  # a central bank or a tariff board moves a handful of times a year


def _ar1(rng: np.random.Generator, shape: tuple[int, int], persistence: float) -> np.ndarray:
    """Unit-variance AR(1) rows over the last axis."""
    shocks = rng.standard_normal(shape) * np.sqrt(1 - persistence**2)
    return _recursion(rng.standard_normal(shape[0]), shocks, persistence)


# Up to this many rows, a Python loop over floats (~0.07 us a value) beats two numpy calls a day (~0.9 us a
# day over rows laid out by day; measured equal at about 12 rows, 2.3x slower at 32).
SCALAR_ROWS = 12


def _recursion(first: np.ndarray, shocks: np.ndarray, persistence: float) -> np.ndarray:
    """Rows out[:, 0] = first, out[:, t] = persistence * out[:, t - 1] + shocks[:, t] (shocks[:, 0] unused).
    Every value is the same two IEEE operations whichever way it is computed; this only picks the cheaper
    way: plain floats for a few rows, else one numpy call per day over rows laid out contiguously."""
    rows, periods = shocks.shape
    if rows <= SCALAR_ROWS:
        out = []
        for start, row in zip(first.tolist(), shocks.tolist(), strict=True):
            value, values = start, [start]
            for shock in row[1:]:
                value = persistence * value + shock
                values.append(value)
            out.append(values)
        return np.array(out, dtype=float).reshape(rows, periods)
    by_day, steps = np.empty((periods, rows)), np.ascontiguousarray(shocks.T)
    by_day[0] = first
    # Each day's row as a view made once (not three index operations a day), the factor a numpy float (not
    # a Python float converted on every call): the same multiply and add per value.
    days, inputs, factor = list(by_day), list(steps), np.float64(persistence)
    for t in range(1, periods):
        np.multiply(factor, days[t - 1], out=days[t])
        np.add(days[t], inputs[t], out=days[t])
    return np.ascontiguousarray(by_day.T)


def _shared(rng: np.random.Generator, regions: int, periods: int, persistence: float) -> np.ndarray:
    """(regions, periods) unit-variance weather with a common part shared by every region."""
    common = _ar1(rng, (1, periods), persistence)
    local = _ar1(rng, (regions, periods), persistence)
    return np.sqrt(SHARED_WEATHER) * common + np.sqrt(1 - SHARED_WEATHER) * local


def external_series(
    v: Variable,
    grid: Grid,
    contract: Contract,
    rng: np.random.Generator,
    unit_region: np.ndarray,
    rise: float | None = None,
) -> np.ndarray:
    """A region or nation series, spread onto the units there: (units, periods)."""
    regions = list(contract.regions) if v.scope == "region" else ["*"]
    T = grid.periods
    doy = days_of_year(contract.timeline.start, T)
    match v.shape:
        case "temperature":
            series = _temperature(contract, len(regions), doy, rng)
        case "rain":
            series = _rain(contract, len(regions), doy, rng)
        case "steps":
            series = np.repeat(_steps(v, contract, T, rng)[None, :], len(regions), axis=0)
        case _:
            series = _index(v, contract, len(regions), T, rng, rise)
    lo = v.min if v.min is not None else -np.inf
    hi = v.max if v.max is not None else np.inf
    series = np.round(np.clip(series, lo, hi), v.decimals)
    if v.scope != "region":
        return np.repeat(series[:1], grid.units, axis=0)
    index = {r: i for i, r in enumerate(regions)}
    return series[np.array([index[r] for r in unit_region])]


def _temperature(contract: Contract, regions: int, doy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    climate = contract.climate
    assert climate is not None, "weather needs the contract's climate"
    season = climate.swing_c * np.cos(2 * np.pi * (doy - WARMEST_DAY[climate.hemisphere]) / 365.25)
    offset = REGION_TEMP_SD * rng.standard_normal(regions)[:, None]
    anomaly_sd = np.clip(TEMP_ANOMALY_BASE + TEMP_ANOMALY_PER_SWING * climate.swing_c, *TEMP_ANOMALY_SD)
    anomaly = anomaly_sd * _shared(rng, regions, len(doy), TEMP_PERSISTENCE)
    return climate.mean_c + season[None, :] + offset + anomaly


def _rain(contract: Contract, regions: int, doy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    climate = contract.climate
    assert climate is not None, "weather needs the contract's climate"
    phase = rng.uniform(0, 365)
    wetness = np.clip(climate.wet_days * (1 + RAIN_SEASON * np.cos(2 * np.pi * (doy - phase) / 365.25)), 0.01, 0.99)
    quantile = NormalDist().inv_cdf  # one standard normal for the whole year, its values as Python floats
    threshold = np.array([quantile(1 - w) for w in wetness.tolist()])
    wet = _shared(rng, regions, len(doy), RAIN_PERSISTENCE) > threshold[None, :]
    amount = rng.gamma(RAIN_SHAPE, climate.wet_mm / RAIN_SHAPE, wet.shape)
    return np.where(wet, amount, 0.0)


def _index(
    v: Variable, contract: Contract, regions: int, periods: int, rng: np.random.Generator, rise: float | None
) -> np.ndarray:
    drift = v.sd * _ar1(rng, (1, periods), INDEX_PERSISTENCE)
    shift = _direction(rng, rise) * rng.uniform(*INDEX_SHIFT_SD) * v.sd
    after = np.arange(periods) >= contract.timeline.change_day
    level = v.mean + drift + np.where(after, shift, 0.0)[None, :]
    return np.repeat(level, regions, axis=0)


def _steps(v: Variable, contract: Contract, periods: int, rng: np.random.Generator) -> np.ndarray:
    """A policy rate: a few quarter-point moves a year, one of them near the change day."""
    moves = int(rng.integers(*RATE_MOVES_PER_YEAR) * periods / 365) + 1
    days = np.sort(np.concatenate([rng.integers(1, periods, moves - 1), [contract.timeline.change_day]]))
    sizes = RATE_STEP * rng.choice([-2, -1, 1, 2], moves)
    level = np.full(periods, v.mean)
    for day, size in zip(days, sizes, strict=True):
        level[day:] += size
    return level

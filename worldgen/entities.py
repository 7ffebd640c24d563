"""The entity tables of X: units, parties, the unit-day calendar, and the event rows.

Step 0 of canonical generation draws units (a code of the master's numbering, a name, a region, a capacity,
when they open and close, which extra weekday some close, the ids systems of their own give them), parties
(a code, a home region, a sign-up day and the pack's domain columns) and which unit-days are open. The
volume's step expands its per-cell counts into events here: each event gets a time of day from the
calendar's intraday peaks, a party that had already signed up (usually one from the unit's region), an
amount, and the times it is completed and, if its customer answers a survey, answered.
Everything reads the contract (calendar, measures, name styles, regions, party and event shapes).
"""

from __future__ import annotations

import functools
import itertools
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from faker import Faker

from contracts.calendar import open_for_all, weekdays
from contracts.model import Contract
from worldgen.grid import Grid
from worldgen.sorting import stable_order

UNIT_CODES = (1000, 10000)  # master codes are four-digit numbers, issued in no particular order
PARTY_CODES = (100_000, 1_000_000)  # party numbers are six digits
LOCAL_ID_SPAN = 20  # a system's own ids are drawn from 1..20x the number of units
OPENING_WINDOW = (0.1, 0.6)  # units opening during the timeline open in this part of it
CLOSING_WINDOW = (0.5, 0.95)
COMPLETION_SPREAD = 0.5  # log-sd of completion times around the world's median
FEEDBACK_SPREAD = 1.0  # log-sd of the delay from completion to a survey answer (hours to days)
# Parties live where the units are: a region's share of parties follows its share of units, with this share of
# parties spread evenly over all regions (people also live where no unit is). Uniform regions left the parties
# of a region with half the units doing several times the median's events (check 8c).
EVEN_REGION_SHARE = 0.1
# A person works, orders or visits a couple of times a day at most: events beyond this many on a person's
# day go to someone else (check 8e). Redrawn in rounds, each a fresh draw among everyone eligible.
PERSON_DAY_CAP = 2
CAP_ROUNDS = 12


@functools.cache
def _faker() -> Faker:
    """One Faker per process: building one loads every provider (~15 ms, once per canonical attempt). Its
    only state is its own random.Random, which `seed_instance` re-seeds from scratch for every world. Its
    providers pick one weighted word by cumulative weights summed once per word list (`_weighted_pick`)."""
    fake = Faker("en_US")
    for provider in fake.providers:
        provider.random_elements = functools.partial(_weighted_pick, provider, provider.random_elements)
    return fake


def _weighted_pick(provider, plain, elements=("a", "b", "c"), length=None, unique=False, use_weighting=None):
    """Faker's `random_elements` (`plain`), with one weighted pick from an OrderedDict word list drawn as
    Faker draws it, `random.choices(words, weights, k=1)`, but from cumulative weights summed once per list:
    `choices` sums the weights into exactly those on every call (~100 us for a list of a thousand last
    names), then makes the same single draw. Every other call is Faker's own."""
    weighted = provider.__use_weighting__ if use_weighting is None else use_weighting
    if length != 1 or unique or not weighted or not isinstance(elements, OrderedDict):
        return plain(elements, length, unique, use_weighting)
    words, cumulative = _cumulative_weights(elements)
    return provider.generator.random.choices(words, cum_weights=cumulative, k=1)


_CUMULATIVE: dict[int, tuple[OrderedDict, tuple, list]] = {}  # id of a word list -> (it, its words, cum. weights)


def _cumulative_weights(elements: OrderedDict) -> tuple[tuple, list]:
    """A Faker word list's words and running sums of their weights (Faker's lists are constants of its
    providers; the list itself is kept so that its id cannot be reused by another)."""
    cached = _CUMULATIVE.get(id(elements))
    if cached is None or cached[0] is not elements:
        cached = _CUMULATIVE[id(elements)] = (elements, tuple(elements), list(itertools.accumulate(elements.values())))
    return cached[1], cached[2]


def draw_entities(contract: Contract, rng: np.random.Generator, named: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """Units, parties and the unit-day panel. `named=False` leaves every name empty and draws the rest
    exactly as with names (unit names come from Faker's own generator, party names' draws are still made),
    for a trend probe that never shows a name."""
    unnamed = draw_unnamed(contract, rng)
    return name_entities(contract, unnamed) if named else unnamed.tables


@dataclass(frozen=True)
class Unnamed:
    """The entity tables with every name empty, and what naming them takes: the seed of Faker's generator
    (the unit names) and each party's first and last name picks (drawn from the step's stream either way)."""

    tables: dict[str, dict[str, np.ndarray]]
    seed: int
    first_pick: np.ndarray
    last_pick: np.ndarray


def draw_unnamed(contract: Contract, rng: np.random.Generator) -> Unnamed:
    """`draw_entities`' draws, names left empty. A trend probe draws these; the full draw of the attempt it
    keeps names them (`name_entities`) instead of drawing them again: names take no draw of the stream."""
    seed = int(rng.integers(2**31))
    units = _units(contract, rng)
    parties, first_pick, last_pick = _party_draws(contract, rng, _region_weights(contract, units))
    tables = {"units": units, "parties": parties, "panel": _panel(contract, units, rng)}
    return Unnamed(tables, seed, first_pick, last_pick)


def name_entities(contract: Contract, unnamed: Unnamed) -> dict[str, dict[str, np.ndarray]]:
    """`draw_entities(named=True)` from its unnamed draws: the same tables (the same columns in the same
    order) with the unit names from Faker seeded as `draw_entities` seeds it and the parties' picked names."""
    fake = _faker()
    fake.seed_instance(unnamed.seed)
    units = {**unnamed.tables["units"], "name": _unit_names(contract, fake)}
    first, last = _name_list("first_names"), _name_list("last_names")
    names = first[unnamed.first_pick] + " " + last[unnamed.last_pick]
    parties = {**unnamed.tables["parties"], "name": names}
    return {"units": units, "parties": parties, "panel": unnamed.tables["panel"]}


def _unit_names(contract: Contract, fake: Faker) -> np.ndarray:
    """The units' names from Faker's own generator (no draw from the step's stream)."""
    unit = contract.entity("unit")
    names: list[str] = []
    seen: set[str] = set()
    for i in range(unit.count):
        name = _unit_name(fake, unit.name_style or "company", unit.name, i)
        while name in seen:  # names must identify units within a system
            name = f"{name} {fake.city_suffix()}"
        seen.add(name)
        names.append(name)
    return np.array(names, dtype=object)


def _units(contract: Contract, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The units as drawn, names left empty (`name_entities` names them: Faker draws from its own generator)."""
    unit, periods, c = contract.entity("unit"), contract.timeline.periods, contract.calendar
    U = unit.count
    cap = contract.measures.capacity
    capacity = np.clip(np.round(rng.normal(cap.mean, cap.sd, U)), max(cap.min, 1), cap.max)
    regions = np.array(contract.regions, dtype=object)
    opens = np.where(rng.random(U) < c.openings, rng.integers(*(int(s * periods) for s in OPENING_WINDOW), U), 0)
    closes = np.where(rng.random(U) < c.closures, rng.integers(*(int(s * periods) for s in CLOSING_WINDOW), U), periods)
    open_weekdays = np.flatnonzero(np.asarray(c.weekly) > 0)
    extra = np.where(rng.random(U) < c.extra_closed_weekday, rng.choice(open_weekdays, U), -1)
    table = {
        "unit_id": np.arange(1, U + 1, dtype=np.int64),
        "code": (rng.choice(UNIT_CODES[1] - UNIT_CODES[0], U, replace=False) + UNIT_CODES[0]).astype(np.int64),
        "name": np.full(U, "", dtype=object),
        "region": regions[rng.integers(len(regions), size=U)],
        cap.name: capacity,
        "open_from": opens.astype(np.int64),
        "open_until": np.maximum(closes, opens + 30).clip(max=periods).astype(np.int64),
        "closed_weekday": extra.astype(np.int64),
    }
    for system in unit.local_ids:
        table[f"local_{system}"] = (rng.choice(LOCAL_ID_SPAN * U, U, replace=False) + 1).astype(np.int64)
    return table


def _region_weights(contract: Contract, units: dict[str, np.ndarray]) -> np.ndarray:
    """Each region's share of parties: mostly its share of units, partly even."""
    regions = np.array(contract.regions, dtype=object)
    held = np.array([(units["region"] == r).sum() for r in regions], dtype=float)
    return (1 - EVEN_REGION_SHARE) * held / held.sum() + EVEN_REGION_SHARE / len(regions)


def _party_draws(
    contract: Contract, rng: np.random.Generator, where: np.ndarray
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The parties' table with empty names, and each party's first and last name picks. A region or a
    category is picked as `rng.choice(k, n, p=...)` picks it, through `weighted_choice` (the same draws and
    picks, ~3x faster for a handful of outcomes)."""
    shape, n, periods = contract.parties, contract.entity("party").count, contract.timeline.periods
    first, last = _name_list("first_names"), _name_list("last_names")
    first_pick = rng.integers(len(first), size=n)
    last_pick = rng.integers(len(last), size=n)
    regions = np.array(contract.regions, dtype=object)
    table = {
        "party_id": np.arange(1, n + 1, dtype=np.int64),
        "code": (rng.choice(PARTY_CODES[1] - PARTY_CODES[0], n, replace=False) + PARTY_CODES[0]).astype(np.int64),
        "name": np.full(n, "", dtype=object),
        "region": regions[weighted_choice(rng, where, n)],
        "signup_day": rng.integers(-shape.history_days, periods, size=n).astype(np.int64),
    }
    for column in shape.columns:
        if column.kind == "category":
            weights = np.asarray(column.weights or [1.0] * len(column.levels), dtype=float)
            table[column.name] = np.array(column.levels, dtype=object)[weighted_choice(rng, weights / weights.sum(), n)]
        else:
            lo = column.min if column.min is not None else -np.inf
            hi = column.max if column.max is not None else np.inf
            table[column.name] = np.round(np.clip(rng.normal(column.mean, column.sd, n), lo, hi), column.decimals)
    return table, first_pick, last_pick


def _panel(contract: Contract, units: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Unit-day keys and whether the unit was open: calendar, lifecycle, its extra closed weekday, outages."""
    U, periods = len(units["unit_id"]), contract.timeline.periods
    day = np.arange(periods)
    everyone = open_for_all(contract.calendar, contract.timeline.start, periods)
    weekday = weekdays(contract.timeline.start, periods)
    alive = (day[None, :] >= units["open_from"][:, None]) & (day[None, :] < units["open_until"][:, None])
    rest_day = weekday[None, :] == units["closed_weekday"][:, None]
    outage = rng.random((U, periods)) < contract.calendar.outages
    is_open = everyone[None, :] & alive & ~rest_day & ~outage
    return {
        "unit_id": np.repeat(units["unit_id"], periods),
        "day": np.tile(day.astype(np.int64), U),
        "open": is_open.reshape(-1).astype(np.int8),
    }


@functools.cache
def _name_list(attr: str) -> np.ndarray:
    """Faker's word list `attr` (first or last names), sorted: the same for every world, so built once."""
    provider = next(p for p in _faker().providers if hasattr(p, attr))
    values = getattr(provider, attr)
    return np.array(sorted(values.keys() if isinstance(values, dict) else values), dtype=object)


def _unit_name(fake: Faker, style: str, noun: str, i: int) -> str:
    match style:
        case "person":
            return fake.name()
        case "place":
            return f"{fake.city()} {noun.replace('_', ' ').title()}"
        case "code":
            return f"{noun.replace('_', ' ').title()} {fake.city()} {i + 1:03d}"
    return fake.company()


def draw_events(
    counts: np.ndarray, contract: Contract, grid: Grid, tables: dict, rng: np.random.Generator, detail: str = "full"
) -> dict[str, np.ndarray]:
    """Expand per-cell counts into event rows: time of day, party, amount, completion and answer times.
    For a trend probe, which reads only the events' units and days, `detail` "draws" makes every draw the
    full table makes (the stream moves on exactly as it would) but returns only the keys: the parties are
    chosen only when a person's cap redraws them, the other columns are not worked out from their draws
    (a log-normal draw takes the words of the normal draw it is the exp of); "keys" stops after the units,
    days and times, when nothing else draws from this stream."""
    return event_columns(contract, tables, rng, place_events(counts, contract, grid, rng), detail)


def event_columns(
    contract: Contract, tables: dict, rng: np.random.Generator, placed: tuple, detail: str = "full"
) -> dict[str, np.ndarray]:
    """`draw_events` from the events `place_events` placed: (units, days, times) and the stream after them."""
    unit_idx, day, time = placed
    n = len(day)
    keys = {"event_id": np.arange(1, n + 1, dtype=np.int64), "unit_id": unit_idx + 1, "day": day}
    if detail == "keys":
        return keys
    probe = detail == "draws"
    party = _parties_for(contract, tables["units"]["region"], day, tables["parties"], rng, not probe, unit_idx)
    if probe:
        for _ in range(3):  # the amounts', completions' and answers' normal draws
            rng.standard_normal(n)
        if contract.events.key_style == "uuid":
            rng.integers(0, 2**63, size=(n, 2), dtype=np.int64)
        return keys
    amount = contract.measures.amount
    sigma = np.sqrt(np.log1p((amount.sd / amount.mean) ** 2))
    values = rng.lognormal(np.log(amount.mean) - sigma**2 / 2, sigma, n)
    shape = contract.events
    completion = time + 3600 * shape.completion_hours * np.exp(COMPLETION_SPREAD * rng.standard_normal(n))
    answered = completion + 3600 * shape.feedback_delay_hours * np.exp(FEEDBACK_SPREAD * rng.standard_normal(n))
    out = {
        "event_id": keys["event_id"],
        "unit_id": keys["unit_id"],
        **({"party_id": party} if party is not None else {}),
        "day": day,
        "time": time.astype(np.int64),
        "completion_time": completion.astype(np.int64),
        "feedback_time": answered.astype(np.int64),
        amount.name: np.round(np.clip(values, amount.min, amount.max), amount.decimals),
    }
    if shape.key_style == "uuid":
        out["uuid"] = _uuids(rng.integers(0, 2**63, size=(n, 2), dtype=np.int64))
    else:  # the event system's running number
        out["code"] = out["event_id"] + shape.key_offset
    return out


def place_events(
    counts: np.ndarray, contract: Contract, grid: Grid, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each event's unit (0-based), day and time in seconds, in time order, registered on the grid: the
    events' first draws from the volume step's stream."""
    flat = counts.reshape(-1)
    # Each cell's unit and day repeated per event (the quotient and remainder of the cell number by the
    # periods, without dividing a number per event).
    unit_idx = np.repeat(np.repeat(np.arange(grid.units, dtype=np.int64), grid.periods), flat)
    day = np.repeat(np.tile(np.arange(grid.periods, dtype=np.int64), grid.units), flat)
    time = day * 86400 + _seconds_of_day(contract, day.size, rng)
    # By time, then unit, then cell: the rows are in unit-major cell order, so a stable sort by time alone
    # leaves ties in that order (a smaller key than time * units + unit, which a radix sort passes over fewer times).
    order = stable_order(time, day.size)
    unit_idx, day, time = unit_idx[order], day[order], time[order]
    grid.set_events(unit_idx, day)
    return unit_idx, day, time


def _seconds_of_day(contract: Contract, n: int, rng: np.random.Generator) -> np.ndarray:
    """A mixture of the calendar's intraday peaks and an even spread over the opening hours."""
    c = contract.calendar
    opening, closing = c.hours
    weights = np.array(
        [c.flat_share] + [p.weight * (1 - c.flat_share) / sum(q.weight for q in c.peaks) for p in c.peaks]
    )
    component = weighted_choice(rng, weights / weights.sum(), n)
    hours = rng.uniform(opening, closing, n)
    # Rows by position rather than by mask: numpy writes through a boolean mask ~4x slower than to positions.
    for k, peak in enumerate(c.peaks, start=1):
        mine = np.flatnonzero(component == k)
        hours[mine] = rng.normal(peak.hour, peak.sd, mine.size)
    outside = np.flatnonzero((hours < opening) | (hours >= closing))
    hours[outside] = rng.uniform(opening, closing, outside.size)  # a peak's tail falls back into opening hours
    return np.minimum((hours * 3600).astype(np.int64), int(closing * 3600) - 1)


def weighted_choice(rng: np.random.Generator, p: np.ndarray, n: int) -> np.ndarray:
    """`rng.choice(len(p), size=n, p=p)` for a handful of outcomes, the same draws and the same picks: numpy
    takes one uniform per pick and binary-searches the normalised running sum of `p` for it; counting the
    running sums at or below each uniform gives the same index, ~5x faster than a search per pick when
    there are only a few sums (an intraday peak's component for every event)."""
    p = np.asarray(p, dtype=float)
    valid = p.ndim == 1 and 0 < len(p) <= FEW_OUTCOMES and (p >= 0).all() and abs(p.sum() - 1.0) <= SUM_TOLERANCE
    if not valid:
        return rng.choice(len(p), size=n, p=p)  # numpy's own checks and messages
    cdf = p.cumsum()
    cdf /= cdf[-1]
    uniform = rng.random(n)
    picked = np.zeros(n, dtype=np.int8)  # FEW_OUTCOMES fits
    for edge in cdf.tolist():
        picked += (uniform >= edge).view(np.int8)  # searchsorted(side="right"): how many sums are <= the draw
    return picked.astype(np.int64)


FEW_OUTCOMES = 16  # up to this many outcomes, counting the running sums beats numpy's search
SUM_TOLERANCE = 1e-9  # probabilities off 1 by more go to numpy, which accepts up to 1.5e-8 or raises


# size: the event grouping and the rounds share their arrays; unit_idx spares a per-event region copy
def _parties_for(
    contract: Contract,
    unit_region: np.ndarray,
    day: np.ndarray,
    parties: dict,
    rng,
    choose: bool = True,
    unit_idx: np.ndarray | None = None,
) -> np.ndarray | None:
    """Each event's party: someone signed up by that day, usually from the unit's region, busier parties
    more often (gamma-distributed activity); a person has at most PERSON_DAY_CAP events a day. With
    `choose` False, only the draws are made when that is possible (one round: no cap to redraw for) and
    None is returned. `unit_region` is each event's unit's region, or with `unit_idx` (each event's unit)
    each unit's region.

    The same draws as `_parties_for_plain`: each event belongs to one pool (everyone when not drawn at home,
    else its unit's region's), so a round's pool draws for its events left to do in row order, found by
    index (one grouping of the events, then only the few over the cap) instead of a mask over all events."""
    regions = list(contract.regions)
    if len(set(regions)) < len(regions):  # an event in several pools: the plain way draws it in each
        region = unit_region if unit_idx is None else unit_region[unit_idx]
        return _parties_for_plain(contract, region, day, parties, rng, choose)
    index = {r: k for k, r in enumerate(regions)}
    region_code = np.array([index.get(r, -1) for r in unit_region.tolist()], dtype=np.int64)
    if unit_idx is not None:
        region_code = region_code[unit_idx]
    shape = contract.parties
    rounds = CAP_ROUNDS if contract.entity("party").name_style == "person" else 1
    choose = choose or rounds > 1  # how many a cap redraws depends on who was chosen
    activity = rng.gamma(shape.loyalty, 1.0, len(parties["party_id"]))
    n = len(day)
    home = rng.random(n) < shape.home_share
    # Pool 0 draws from everyone, pool k + 1 from region k's parties; -1: at home in no listed region (never drawn).
    pool_of = np.where(home, np.where(region_code >= 0, region_code + 1, -1), 0).astype(np.int16)
    sizes = np.bincount(pool_of + 1, minlength=len(regions) + 2)[1:]
    if not choose:
        for size in sizes.tolist():
            if size:
                rng.random(size)
        return None
    grouped = np.argsort(pool_of, kind="stable")[n - int(sizes.sum()) :]  # by pool, in row order within one
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    signup = parties["signup_day"]
    # Everyone by sign-up day (ties by number), sorted once: a region's members in that order are the ones
    # its pool would sort them into, so each pool's own stable sort finds them already in order.
    everyone = np.argsort(signup, kind="stable")
    region_by_signup = parties["region"][everyone]
    pools: list[_Pool | None] = [None] * (len(regions) + 1)
    chosen = np.zeros(n, dtype=np.int64)
    todo: np.ndarray | None = None  # the events left to do, by row; None: all
    over: np.ndarray | None = None  # which events were over the cap after the last round
    for round_ in range(rounds):
        if todo is not None:
            todo_pool = pool_of[todo]
            before = chosen[todo]
        for k in range(len(regions) + 1):
            redo = grouped[bounds[k] : bounds[k + 1]] if todo is None else todo[todo_pool == k]
            if redo.size:
                luck = rng.random(redo.size)
                if pools[k] is None:
                    members = everyone if k == 0 else everyone[region_by_signup == regions[k - 1]]
                    if members.size == 0:  # nobody lives there: anyone eligible
                        members = everyone
                    pools[k] = _Pool(members, signup, activity)
                chosen[redo] = pools[k].draw(day[redo], luck)
        if round_ == rounds - 1:  # no round left to redraw in: which events are over the cap does not matter
            break
        over = _over_cap(chosen, day) if todo is None else _over_cap_after(over, chosen, day, todo, before)
        todo = np.flatnonzero(over)
        if not todo.size:
            break
    return parties["party_id"][chosen]


def _parties_for_plain(
    contract: Contract, unit_region: np.ndarray, day: np.ndarray, parties: dict, rng, choose: bool = True
) -> np.ndarray | None:
    """`_parties_for` the plain way, one boolean mask per pool and round over every event: for a contract
    listing a region twice (its events are drawn in both pools), and as the reference for tests."""
    shape = contract.parties
    rounds = CAP_ROUNDS if contract.entity("party").name_style == "person" else 1
    choose = choose or rounds > 1  # how many a cap redraws depends on who was chosen
    activity = rng.gamma(shape.loyalty, 1.0, len(parties["party_id"]))
    chosen = np.zeros(len(day), dtype=np.int64)
    home = rng.random(len(day)) < shape.home_share
    signup = parties["signup_day"]
    everyone = np.arange(len(parties["party_id"]))
    pools = [(_Pool(everyone, signup, activity) if choose else None, ~home)]
    for region in contract.regions:
        members = np.flatnonzero(parties["region"] == region)
        if members.size == 0:  # nobody lives there: anyone eligible
            members = everyone
        pools.append((_Pool(members, signup, activity) if choose else None, home & (unit_region == region)))
    todo = np.ones(len(day), dtype=bool)
    for round_ in range(rounds):
        for pool, mine in pools:
            redo = mine & todo
            if redo.any():
                luck = rng.random(int(redo.sum()))
                if choose:
                    chosen[redo] = pool.draw(day[redo], luck)
        if not choose:
            return None
        if round_ == rounds - 1:  # no round left to redraw in: which events are over the cap does not matter
            break
        todo = _over_cap(chosen, day)
        if not todo.any():
            break
    return parties["party_id"][chosen]


def _over_cap(chosen: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Events beyond the first PERSON_DAY_CAP of their party's day (in row order): `_over_cap_ranked`, on
    only the events of crowded party-days. Few party-days hold more than the cap, so the events are first
    counted per hash bucket of their party-day (a bucket holds its party-days' events and at times another's):
    an event in a bucket of at most PERSON_DAY_CAP events is not over it, and the rest, every event of
    every party-day over the cap among them, are ranked as the plain way ranks all (an event's status
    depends only on its own party-day's earlier events). Saves a sort of every event, ~3x faster."""
    n, days = len(day), int(day.max(initial=0)) + 1
    bits = max(int(BUCKETS_PER_EVENT * n).bit_length(), 4)
    key = (chosen * days + day).astype(np.uint64)
    bucket = ((key * FIBONACCI_HASH) >> np.uint64(64 - bits)).astype(np.intp)  # the key's top bits, mixed
    crowded = np.flatnonzero(np.bincount(bucket, minlength=1 << bits)[bucket] > PERSON_DAY_CAP)
    over = np.zeros(n, dtype=bool)
    if crowded.size:
        over[crowded] = _over_cap_ranked(chosen[crowded], day[crowded])
    return over


BUCKETS_PER_EVENT = 4  # hash buckets per event: few party-days share one
FIBONACCI_HASH = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: multiplying spreads keys over the top bits


def _over_cap_ranked(chosen: np.ndarray, day: np.ndarray) -> np.ndarray:
    """`_over_cap` by ranking every event by party-day."""
    n, days = len(day), int(day.max(initial=0)) + 1
    key = chosen * days + day
    order = stable_order(key, n)
    ranked = key[order]
    over = np.zeros(n, dtype=bool)
    # Sorted by (party-day, row), an event is over the cap when the one PERSON_DAY_CAP places earlier shares
    # its party-day.
    over[order[PERSON_DAY_CAP:]] = ranked[PERSON_DAY_CAP:] == ranked[:-PERSON_DAY_CAP]
    return over


def _over_cap_after(
    over: np.ndarray, chosen: np.ndarray, day: np.ndarray, redrawn: np.ndarray, before: np.ndarray
) -> np.ndarray:
    """`_over_cap(chosen, day)` given `over`, its value before the events `redrawn` (rows) changed party
    from `before`: only the party-days those events left or joined can change, so only their events are
    ranked again (a round redraws a few hundred of tens of thousands of events). An event's status depends
    only on the events of its own party-day before it in row order, and every event of an affected
    party-day is ranked again, in row order. The affected party-days are marked in a table of the touched
    parties' days and looked up there, ~3x cheaper than `np.isin` of their keys (a stable sort of them all
    on numpy's pinned kernels); a table too large for that takes `np.isin`."""
    if not redrawn.size:
        return over
    days = int(day.max(initial=0)) + 1
    moved_day = day[redrawn]
    parties = np.concatenate([before, chosen[redrawn]])
    party_touched = np.zeros(int(max(chosen.max(initial=0), before.max(initial=0))) + 1, dtype=bool)
    party_touched[parties] = True
    rows = np.flatnonzero(party_touched[chosen])  # every event of a touched party, then only its touched days
    slot = np.cumsum(party_touched) - 1  # a touched party's row in the table of touched party-days
    if (int(slot[-1]) + 1) * days <= max(TOUCHED_CELLS_PER_EVENT * len(chosen), MIN_TOUCHED_CELLS):
        touched_days = np.zeros((int(slot[-1]) + 1, days), dtype=bool)
        touched_days[slot[parties], np.concatenate([moved_day, moved_day])] = True
        rows = rows[touched_days[slot[chosen[rows]], day[rows]]]
    else:
        touched = np.concatenate([before * days + moved_day, chosen[redrawn] * days + moved_day])
        rows = rows[np.isin(chosen[rows] * days + day[rows], touched)]
    over = over.copy()
    over[rows] = _over_cap(chosen[rows], day[rows])
    return over


TOUCHED_CELLS_PER_EVENT = 8  # `_over_cap_after`'s table of touched party-days: at most this many cells an event,
MIN_TOUCHED_CELLS = 1 << 16  # or this many (a table larger than that costs more to clear than np.isin's sort)


GUIDE_BUCKETS_PER_MEMBER = 4  # a pool's search guide: a few sums a bucket at most, usually
GUIDE_MAX_WIDTH = 12  # more sums than this in one bucket (tiny activities in a row): search plainly
GUIDE_MIN_KEYS = 2000  # fewer keys (a cap's redraws) are searched plainly: a guide would not pay for itself
LOOKUP_DAYS = 100_000  # a pool looks up who signed up by days 0 .. this (a table of at most 800 kB)


class _Pool:
    """The parties one draw picks from, sorted by sign-up day once for every round of draws (the stable
    sort keeps equal sign-up days in member order)."""

    def __init__(self, members: np.ndarray, signup: np.ndarray, activity: np.ndarray) -> None:
        self.members = members[np.argsort(signup[members], kind="stable")]
        self.signup = signup[self.members]
        self.cumulative = np.cumsum(activity[self.members])
        self.by_day = np.zeros(0, dtype=np.intp)  # signed up by day d, for d = 0, 1, ... (`signed_up_by`)
        self.guide: tuple[float, int, np.ndarray, int] | None = None  # `search`'s buckets, made once

    def signed_up_by(self, day: np.ndarray) -> np.ndarray:
        """How many members signed up on or before each day, `np.searchsorted(self.signup, day, "right")`:
        looked up per day of the timeline (a few hundred searches, once per pool) instead of searched per
        event (tens of thousands); any other day is searched."""
        if not day.size or day.dtype.kind not in "iu" or day.min() < 0 or (last := int(day.max())) >= LOOKUP_DAYS:
            return np.searchsorted(self.signup, day, side="right")
        if last >= len(self.by_day):
            self.by_day = np.searchsorted(self.signup, np.arange(last + 1, dtype=day.dtype), side="right")
        return self.by_day[day]

    def draw(self, day: np.ndarray, luck: np.ndarray) -> np.ndarray:
        """For each day, one member who signed up on or before it, in proportion to activity (`luck`: one
        uniform draw per day)."""
        eligible = self.signed_up_by(day)
        eligible = np.maximum(eligible, 1)  # a day before anyone signed up falls to the earliest member
        pick = self.search(luck * self.cumulative[eligible - 1])
        return self.members[np.minimum(pick, eligible - 1)]

    def search(self, keys: np.ndarray) -> np.ndarray:
        """`np.searchsorted(self.cumulative, keys, side="right")`: how many running sums are <= each key,
        found through a guide table instead of a binary search per key over the whole pool (~2x faster for
        tens of thousands of keys). A bucket function f, monotone (a product with a positive scale, then
        truncated), sorts the sums into GUIDE_BUCKETS_PER_MEMBER buckets a member: every sum in a bucket
        below the key's f(key) is below the key and every one in a bucket above it is above, so the answer
        is the sums before the key's bucket plus those in it that are <= the key, counted one position at a
        time (the bucket's sums are sorted, so they are a prefix of it)."""
        cumulative = self.cumulative
        guide = self._guide() if len(keys) >= GUIDE_MIN_KEYS else None
        if guide is None or not (0.0 <= keys.min() and keys.max() <= cumulative[-1]):  # NaN fails too
            return np.searchsorted(cumulative, keys, side="right")
        scale, buckets, first, width = guide
        bucket = np.minimum((keys * scale).astype(np.int64), buckets - 1)
        found, end = first[bucket], first[bucket + 1]
        last = len(cumulative) - 1
        for _ in range(width):
            found += (found < end) & (cumulative[np.minimum(found, last)] <= keys)
        return found

    def _guide(self) -> tuple[float, int, np.ndarray, int] | None:
        """(scale, buckets, the sums before each bucket, the most sums in one bucket), or None when the sums
        are not positive and finite or crowd a bucket beyond GUIDE_MAX_WIDTH (a plain search is cheaper)."""
        if self.guide is None:
            cumulative = self.cumulative
            total = float(cumulative[-1]) if len(cumulative) else 0.0
            if not (np.isfinite(total) and total > 0 and cumulative[0] >= 0):
                self.guide = (0.0, 0, np.zeros(1, dtype=np.intp), GUIDE_MAX_WIDTH + 1)
            else:
                buckets = GUIDE_BUCKETS_PER_MEMBER * len(cumulative)
                scale = buckets / total
                bucket = np.minimum((cumulative * scale).astype(np.int64), buckets - 1)
                first = np.searchsorted(bucket, np.arange(buckets + 1), side="left")  # sums in buckets < b
                self.guide = (scale, buckets, first, int(np.diff(first).max()))
        return self.guide if self.guide[3] <= GUIDE_MAX_WIDTH else None


def _uuids(draws: np.ndarray) -> np.ndarray:
    """Version-4-shaped UUIDs from (n, 2) draws of the world's stream (deterministic, never from the OS),
    built as text for the whole column at once: the draws' bytes as hex digits (`bytes.hex`, one C call,
    ~4x faster than working out the digits in numpy), laid out one line of ASCII per UUID with its dashes
    and its version and variant digits, decoded and split in one go (Python makes the n strings far faster
    that way than by converting a fixed-width array)."""
    n = len(draws)
    octets = draws.astype(">u8").view(np.uint8).reshape(n, 16)
    text = np.frombuffer(octets.tobytes().hex().encode("ascii"), dtype=np.uint8).reshape(n, 32)
    lines = np.empty((n, 37), dtype=np.uint8)  # 8-4-4-4-12 hex digits, dashes between, a newline after
    lines[:, [8, 13, 18, 23]] = ord("-")
    lines[:, 36] = ord("\n")
    for start, stop, at in ((0, 8, 0), (8, 12, 9), (12, 16, 14), (16, 20, 19), (20, 32, 24)):
        lines[:, at : at + stop - start] = text[:, start:stop]
    lines[:, 14] = ord("4")  # the version: the 13th digit
    lines[:, 19] = _VARIANT_DIGITS.take((octets[:, 8] >> 4) & 3)  # the variant, the 17th digit: 8, 9, a or b
    return np.array(lines.tobytes().decode("ascii").split("\n")[:-1], dtype=object)


_VARIANT_DIGITS = np.frombuffer(b"89ab", dtype=np.uint8)  # RFC 4122's variant: the digit's top bits are 10

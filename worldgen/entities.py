"""The entity tables of X: units with names, regions and capacity; parties; and the event rows.

Step 0 of canonical generation draws units and parties; the volume variable's step expands its per-cell
counts into event rows here. Everything reads the contract (measures, name styles, regions), never a pack.
"""

from __future__ import annotations

import numpy as np
from faker import Faker

from contracts.model import Contract
from worldgen.grid import Grid

SIGNUP_HISTORY_DAYS = 720  # parties signed up during the two years before the timeline, or during it
OPENING_SECONDS = (7 * 3600, 23 * 3600)  # events happen between 07:00 and 23:00
LOYALTY_SHAPE = 0.6  # gamma shape of party activity: a few frequent parties, a long tail of rare ones


def draw_entities(contract: Contract, rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    unit, party = contract.entity("unit"), contract.entity("party")
    fake = Faker("en_US")
    fake.seed_instance(int(rng.integers(2**31)))
    names: list[str] = []
    seen: set[str] = set()
    for i in range(unit.count):
        name = _unit_name(fake, unit.name_style or "company", unit.name, i)
        while name in seen:  # names must identify units within a system
            name = f"{name} {fake.city_suffix()}"
        seen.add(name)
        names.append(name)
    cap = contract.measures.capacity
    capacity = np.clip(np.round(rng.normal(cap.mean, cap.sd, unit.count)), max(cap.min, 1), cap.max)
    regions = np.array(contract.regions, dtype=object)
    first = np.array(sorted(_faker_list(fake, "first_names")), dtype=object)
    last = np.array(sorted(_faker_list(fake, "last_names")), dtype=object)
    n_parties = party.count
    party_names = first[rng.integers(len(first), size=n_parties)] + " " + last[rng.integers(len(last), size=n_parties)]
    periods = contract.timeline.periods
    return {
        "units": {
            "unit_id": np.arange(1, unit.count + 1, dtype=np.int64),
            "name": np.array(names, dtype=object),
            "region": regions[rng.integers(len(regions), size=unit.count)],
            cap.name: capacity,
        },
        "parties": {
            "party_id": np.arange(1, n_parties + 1, dtype=np.int64),
            "name": party_names,
            "region": regions[rng.integers(len(regions), size=n_parties)],
            "signup_day": rng.integers(-SIGNUP_HISTORY_DAYS, periods, size=n_parties).astype(np.int64),
        },
        "panel": panel_keys(unit.count, periods),
    }


def panel_keys(units: int, periods: int) -> dict[str, np.ndarray]:
    unit = np.repeat(np.arange(1, units + 1, dtype=np.int64), periods)
    day = np.tile(np.arange(periods, dtype=np.int64), units)
    return {"unit_id": unit, "day": day}


def _faker_list(fake: Faker, attr: str) -> list[str]:
    provider = next(p for p in fake.providers if hasattr(p, attr))
    values = getattr(provider, attr)
    return list(values.keys() if isinstance(values, dict) else values)


def _unit_name(fake: Faker, style: str, noun: str, i: int) -> str:
    match style:
        case "person":
            return fake.name()
        case "place":
            return f"{fake.city()} {noun.replace('_', ' ').title()}"
        case "code":
            return f"{noun.replace('_', ' ').title()} {fake.city()} {i + 1:03d}"
    return fake.company()


def draw_events(counts: np.ndarray, contract: Contract, grid: Grid, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Expand per-cell counts into event rows with a party, a time of day and an amount."""
    flat = counts.reshape(-1)
    cells = np.repeat(np.arange(flat.size, dtype=np.int64), flat)
    unit_idx, day = cells // grid.periods, cells % grid.periods
    seconds = rng.integers(*OPENING_SECONDS, size=cells.size)
    time = day * 86400 + seconds
    order = np.lexsort((unit_idx, time))
    unit_idx, day, time = unit_idx[order], day[order], time[order]
    grid.set_events(unit_idx, day)
    n_parties = contract.entity("party").count
    loyalty = rng.gamma(LOYALTY_SHAPE, 1.0, n_parties)
    party = rng.choice(n_parties, size=cells.size, p=loyalty / loyalty.sum()) + 1
    amount = contract.measures.amount
    sigma = np.sqrt(np.log1p((amount.sd / amount.mean) ** 2))
    values = rng.lognormal(np.log(amount.mean) - sigma**2 / 2, sigma, cells.size)
    return {
        "event_id": np.arange(1, cells.size + 1, dtype=np.int64),
        "unit_id": unit_idx + 1,
        "party_id": party.astype(np.int64),
        "day": day,
        "time": time.astype(np.int64),
        amount.name: np.round(np.clip(values, amount.min, amount.max), amount.decimals),
    }

"""Skeleton -> draft world contract C: entities and measures, timeline, edges, layers, invariants, deliverables.

Everything that can be fixed before data exists is fixed here, from two named seed streams: `contract`
(sizes, timeline, each edge's parameter seed and effect scale) and `plan` (how each system names and formats
what it reports, worldgen/plan.py). This is the last stage that reads the domain pack: the draft carries
every fact the later stages need (measures, alternative units, name styles, regions). Parameters in natural
units and the phenomena depend on the realised data, so `worldgen/phenomena.py` writes them when it seals
the contract after canonical generation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from contracts.calendar import levels, open_for_all
from contracts.model import (
    AltUnit,
    Calendar,
    Candidate,
    Contract,
    Edge,
    Entity,
    EventShape,
    ForeignKey,
    Invariant,
    Measure,
    Measures,
    PartyShape,
    Persona,
    Timeline,
    Variable,
    generation_layers,
    validate_contract,
)
from worldgen import packs
from worldgen.packs import DomainPack
from worldgen.plan import plan_deliverables
from worldgen.regional import localise, regions_of
from worldgen.seeding import Streams
from worldgen.skeleton import Skeleton


@dataclass(frozen=True)
class WorldSpec:
    """Who a world is: the build's root seed, its index in the build, its size and the persona asking."""

    seed: int
    index: int
    size: str
    persona: Persona

    @property
    def world_id(self) -> str:
        return f"{self.persona.domain}-s{self.seed}-{self.index:05d}"  # worldgen.build.world_id_for agrees


@dataclass(frozen=True)
class SizeSpec:
    periods: int
    events: int  # events the world aims for; units are sized to reach it, parties follow from the pack


SIZES = {
    "small": SizeSpec(periods=180, events=6_000),
    "default": SizeSpec(periods=365, events=60_000),
    "large": SizeSpec(periods=730, events=400_000),
}
UNITS_RANGE = (12, 800)  # enough units to estimate unit-level effects, few enough for a readable master file
UUID_SHARE = 0.4  # event systems that key events by UUID rather than by a running number
EVENT_NUMBER_START = (100_000, 9_000_000)  # a running event number starts somewhere in this range
CHANGE_WINDOW = (0.45, 0.55)  # the management change day falls near the middle, so both halves are long
EFFECT_HEADROOM = 2.8  # a child's summed edge effects stay this many sd (per sqrt(parents)) inside its bounds


def build_contract(world: WorldSpec, pack: DomainPack, skeleton: Skeleton, streams: Streams) -> Contract:
    """The validated draft contract of one world, from the `contract` and `plan` streams."""
    rng = streams.rng("contract")
    spec = SIZES[world.size]
    volume = next(v for v in pack.variables if v.role == "volume")
    calendar, climate = localise(pack.calendar, pack.climate, world.persona.region)
    activity = _mean_activity(calendar, pack.start, spec.periods)
    units = int(np.clip(round(spec.events / (spec.periods * volume.mean * activity)), *UNITS_RANGE))
    low, high = (int(share * spec.periods) for share in CHANGE_WINDOW)
    timeline = Timeline(start=pack.start, periods=spec.periods, change_day=int(rng.integers(low, high)))
    expected_events = units * spec.periods * volume.mean * activity
    parties = max(UNITS_RANGE[0], int(expected_events / rng.uniform(*pack.entities.party.events_per_party)))
    draft = Contract(
        world_id=world.world_id,
        seed=world.seed,
        index=world.index,
        size=world.size,
        domain=pack.domain,
        persona=world.persona,
        timeline=timeline,
        regions=regions_of(world.persona.region, pack.regions) if pack.regions_scope == "national" else pack.regions,
        calendar=calendar,
        climate=climate,
        entities=_entities(pack, units, parties, int(expected_events)),
        measures=_measures(pack),
        parties=_party_shape(pack),
        events=_event_shape(pack, rng),
        variables=[_variable(pack, name, rng) for name in skeleton.nodes],
        edges=_edges(pack, skeleton, rng),
        candidates=[Candidate(parent=e.parent, child=e.child, sign=e.sign) for e in pack.edges],
        layers=[],
        invariants=[],
        deliverables=[],
        phenomena=[],
    )
    depth = generation_layers(draft)
    for v in draft.variables:
        v.layer = depth[v.name]
    draft.layers = [sorted(n for n, d in depth.items() if d == k) for k in range(max(depth.values()) + 1)]
    draft.invariants = _invariants(draft)
    draft.deliverables = plan_deliverables(pack, draft, streams.rng("plan"))
    validate_contract(draft)
    return draft


def _mean_activity(c: Calendar, start: str, periods: int) -> float:
    """The calendar's mean activity per unit-day relative to the nominal level (closed days count as 0)."""
    open_days = open_for_all(c, start, periods)
    level = levels(c, start, periods) * open_days
    lost = c.extra_closed_weekday / 7 + c.outages + (c.openings + c.closures) / 4
    return float(level.mean() * (1 - lost))


def _party_shape(pack: DomainPack) -> PartyShape:
    p = pack.entities.party
    return PartyShape(
        loyalty=p.loyalty, home_share=p.home_share, history_days=p.history_days, since=p.since, columns=p.columns
    )


def _event_shape(pack: DomainPack, rng: np.random.Generator) -> EventShape:
    e = pack.entities.event
    return EventShape(
        completion_hours=round(float(rng.uniform(*e.completion_hours)), 3),
        feedback_delay_hours=e.feedback_delay_hours,
        key_style="uuid" if rng.random() < UUID_SHARE else "sequence",
        key_offset=int(rng.integers(*EVENT_NUMBER_START)),
    )


def _entities(pack: DomainPack, units: int, parties: int, events: int) -> list[Entity]:
    ent = pack.entities
    return [
        Entity(
            name=ent.unit.name,
            role="unit",
            table="units",
            key="unit_id",
            prefix=ent.unit.prefix,
            count=units,
            name_style=ent.unit.name_style,
        ),
        Entity(
            name=ent.party.name,
            role="party",
            table="parties",
            key="party_id",
            prefix=ent.party.prefix,
            count=parties,
            name_style=ent.party.name_style,
        ),
        Entity(
            name=ent.event.name,
            role="event",
            table="events",
            key="event_id",
            prefix=ent.event.prefix,
            count=max(events, 1),
            foreign_keys=[
                ForeignKey(column="unit_id", references=ent.unit.name),
                ForeignKey(column="party_id", references=ent.party.name),
            ],
        ),
    ]


def _alt(unit: packs.AltUnit | None) -> AltUnit | None:
    return None if unit is None else AltUnit(name=unit.name, factor=unit.factor)


def _measure(m: packs.Measure, decimals: int) -> Measure:
    return Measure(
        name=m.name,
        unit=m.unit,
        mean=m.mean,
        sd=m.sd,
        min=m.min,
        max=m.max,
        decimals=decimals,
        alt_unit=_alt(m.alt_unit),
    )


CAPACITY_DECIMALS = 0  # capacities are whole numbers (stations, beds, pumps)
AMOUNT_DECIMALS = 2  # amounts are money or quantities reported to the cent


def _measures(pack: DomainPack) -> Measures:
    ent = pack.entities
    return Measures(
        capacity=_measure(ent.unit.capacity, CAPACITY_DECIMALS), amount=_measure(ent.event.amount, AMOUNT_DECIMALS)
    )


def _variable(pack: DomainPack, name: str, rng: np.random.Generator) -> Variable:
    v = pack.variable(name)
    response = None if v.response is None else round(float(rng.uniform(*v.response)), 4)
    return Variable(
        name=v.name,
        description=v.description,
        grain=v.grain,
        dtype=v.dtype,
        unit=v.unit,
        mean=v.mean,
        sd=v.sd,
        min=None if math.isinf(v.min) else v.min,
        max=None if math.isinf(v.max) else v.max,
        levels=list(v.levels),
        pattern=v.pattern,
        role=v.role,
        system=v.system,
        layer=0,
        decimals=v.decimals,
        alt_unit=_alt(v.alt_unit),
        observe=v.observe,
        denominator=v.denominator,
        window=v.window,
        scope=v.scope,
        shape=v.shape,
        response=response,
    )


def _effect_budget(pack: DomainPack, child: str, parents: int) -> float:
    """Shrink a child's edge effects so that their sum stays inside its natural bounds.

    A child near a bound (ratings near 5 stars, shares near 0) would otherwise be clipped, and clipping
    flattens exactly the slopes, steps and curves the contract promises.
    """
    v = pack.variable(child)
    headroom = min(v.mean - v.min, v.max - v.mean) / v.sd
    return float(min(1.0, headroom / (EFFECT_HEADROOM * math.sqrt(max(parents, 1)))))


def _edges(pack: DomainPack, skeleton: Skeleton, rng: np.random.Generator) -> list[Edge]:
    """Fix each edge's kind, sign, moderator or denominator, effect scale and parameter seed.

    The natural-unit parameters (slopes, threshold levels, curve origins) are drawn from that seed when the
    parent's realised distribution is known, during canonical generation, so a threshold always falls
    inside the parent's range whatever the upstream mechanisms did to it.
    """
    graph = skeleton.graph()
    candidates = pack.candidate_graph()
    capacity = pack.entities.unit.capacity
    edges = []
    for parent, child, kind in skeleton.edges:
        spec = candidates.edges[parent, child]["spec"]
        params: dict = {}
        if kind == "interaction":
            moderators = sorted(
                p for p in graph.predecessors(child) if p != parent and pack.variable(p).dtype in {"float", "count"}
            )
            params["moderator"] = moderators[int(rng.integers(len(moderators)))]
        if kind == "ratio":
            params["denominator"] = f"units.{capacity.name}"
        v = pack.variable(child)
        budget = _effect_budget(pack, child, graph.in_degree(child))
        draw = {"seed": int(rng.integers(2**31)), "child_mean": v.mean, "child_sd": round(v.sd * budget, 6)}
        edges.append(
            Edge(parent=parent, child=child, kind=kind, draw=draw, params=params, sign=spec.sign, note=spec.note)
        )
    return edges


def _invariants(contract: Contract) -> list[Invariant]:
    capacity = contract.measures.capacity
    inv = [
        Invariant(id="unique_units", kind="unique_key", table="units", column="unit_id"),
        Invariant(id="unique_parties", kind="unique_key", table="parties", column="party_id"),
        Invariant(id="unique_events", kind="unique_key", table="events", column="event_id"),
        Invariant(id="unique_panel", kind="unique_key", table="panel", column="unit_id,day"),
        Invariant(
            id="fk_events_units", kind="foreign_key", table="events", column="unit_id", references="units.unit_id"
        ),
        Invariant(
            id="fk_events_parties", kind="foreign_key", table="events", column="party_id", references="parties.party_id"
        ),
        Invariant(id="fk_panel_units", kind="foreign_key", table="panel", column="unit_id", references="units.unit_id"),
        Invariant(
            id="range_event_day", kind="range", table="events", column="day", min=0, max=contract.timeline.periods - 1
        ),
        Invariant(
            id="range_capacity", kind="range", table="units", column=capacity.name, min=capacity.min, max=capacity.max
        ),
    ]
    table = {"unit": "units", "panel": "panel", "event": "events"}
    busiest = float(levels(contract.calendar, contract.timeline.start, contract.timeline.periods).max())
    for v in contract.variables:
        if v.role == "volume":  # the rate obeys the variable's range on a nominal day times the calendar's busiest
            # level (0 on closed days); the count is any count >= 0
            inv.append(
                Invariant(
                    id=f"range_{v.name}_expected",
                    kind="range",
                    table="panel",
                    column=f"{v.name}_expected",
                    min=0,
                    max=None if v.max is None else v.max * busiest,
                )
            )
            inv.append(Invariant(id=f"range_{v.name}", kind="range", table="panel", column=v.name, min=0))
        elif v.dtype != "categorical":
            inv.append(
                Invariant(id=f"range_{v.name}", kind="range", table=table[v.grain], column=v.name, min=v.min, max=v.max)
            )
    volume = contract.volume.name
    inv.append(
        Invariant(
            id="conservation_events",
            kind="conservation",
            table="panel",
            column=volume,
            references="events.event_id",
            note=f"for every unit and day, {volume} equals the number of events",
        )
    )
    return inv

"""Skeleton -> world contract C: entities, timeline, mechanism parameters, invariants, deliverables, phenomena.

Everything that can be fixed before data exists is fixed here, from two named seed streams: `contract`
(sizes, timeline, mechanism parameters) and `plan` (how each system names and formats what it reports).
Targets of period-change and attribution phenomena depend on the realised data, so the contract leaves
them empty and `seal` fills them after the canonical state is generated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np

from contracts.model import (
    Contract,
    Deliverable,
    DeliveredColumn,
    Edge,
    Entity,
    ForeignKey,
    Invariant,
    Persona,
    Phenomenon,
    Timeline,
    Variable,
    generation_layers,
    validate_contract,
)
from worldgen import naming
from worldgen.mechanisms import MECHANISMS, Scale, describe
from worldgen.packs import DomainPack
from worldgen.skeleton import Skeleton


@dataclass(frozen=True)
class SizeSpec:
    periods: int
    events: int
    parties: int


SIZES = {
    "small": SizeSpec(periods=180, events=6_000, parties=400),
    "default": SizeSpec(periods=365, events=60_000, parties=3_000),
    "large": SizeSpec(periods=730, events=400_000, parties=20_000),
}
EXT = {"csv": "csv", "xlsx": "xlsx", "parquet": "parquet", "json": "json", "jsonl": "jsonl"}


def build_contract(
    world_id: str,
    seed: int,
    size: str,
    pack: DomainPack,
    persona: Persona,
    skeleton: Skeleton,
    rng: np.random.Generator,
    plan_rng: np.random.Generator,
) -> Contract:
    spec = SIZES[size]
    volume = next(v for v in pack.variables if v.role == "volume")
    units = int(np.clip(round(spec.events / (spec.periods * volume.mean)), 12, 800))
    timeline = Timeline(
        start=pack.start,
        periods=spec.periods,
        change_day=int(rng.integers(int(0.45 * spec.periods), int(0.55 * spec.periods))),
    )
    ent = pack.entities
    entities = [
        Entity(name=ent.unit.name, role="unit", table="units", key="unit_id", prefix=ent.unit.prefix, count=units),
        Entity(
            name=ent.party.name,
            role="party",
            table="parties",
            key="party_id",
            prefix=ent.party.prefix,
            count=spec.parties,
        ),
        Entity(
            name=ent.event.name,
            role="event",
            table="events",
            key="event_id",
            prefix=ent.event.prefix,
            count=int(units * spec.periods * volume.mean),
            foreign_keys=[
                ForeignKey(column="unit_id", references=ent.unit.name),
                ForeignKey(column="party_id", references=ent.party.name),
            ],
        ),
    ]
    variables = [_variable(pack, name) for name in skeleton.nodes]
    edges = _edges(pack, skeleton, rng)
    draft = Contract(
        world_id=world_id,
        seed=seed,
        size=size,
        domain=pack.domain,
        persona=persona,
        timeline=timeline,
        entities=entities,
        variables=variables,
        edges=edges,
        layers=[],
        invariants=[],
        deliverables=[],
        phenomena=[],
    )
    depth = generation_layers(draft)
    for v in draft.variables:
        v.layer = depth[v.name]
    draft.layers = [sorted(n for n, d in depth.items() if d == k) for k in range(max(depth.values()) + 1)]
    draft.invariants = _invariants(draft, pack)
    draft.deliverables = plan_deliverables(pack, draft, plan_rng)
    draft.phenomena = _phenomena(draft, pack)
    validate_contract(draft)
    return draft


def _variable(pack: DomainPack, name: str) -> Variable:
    v = pack.variable(name)
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
    )


def _scale(pack: DomainPack, name: str, budget: float = 1.0) -> Scale:
    v = pack.variable(name)
    return Scale(mean=v.mean, sd=v.sd * budget, levels=tuple(v.levels), binary=v.dtype == "binary")


def _effect_budget(pack: DomainPack, child: str, parents: int) -> float:
    """Shrink a child's edge effects so that their sum stays inside its natural bounds.

    A child near a bound (ratings near 5 stars, shares near 0) would otherwise be clipped, and clipping
    flattens exactly the slopes, steps and curves the contract promises.
    """
    v = pack.variable(child)
    headroom = min(v.mean - v.min, v.max - v.mean) / v.sd
    return float(min(1.0, headroom / (2.8 * math.sqrt(max(parents, 1)))))


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


def resolve_params(edge: Edge, parent: Scale, extra: dict[str, Scale]) -> dict:
    """Natural-unit parameters of an edge, given its parent's realised scale (deterministic in the seed)."""
    child = Scale(mean=edge.draw["child_mean"], sd=edge.draw["child_sd"])
    rng = np.random.default_rng(edge.draw["seed"])
    params = MECHANISMS[edge.kind].sample_params(parent, child, edge.sign, rng, **extra)
    params["parent_sd"] = float(f"{parent.sd:.6g}")
    return {**edge.params, **params}


LINEAR_STATISTICS = {"slope", "log_slope", "per_capacity_slope", "interaction_coefficient", "level_shift_range"}


def edge_phenomena(contract: Contract, standard_errors: dict[str, float] | None = None) -> list[Phenomenon]:
    """One edge_effect phenomenon per edge, from its resolved parameters (called when sealing).

    For effects estimated by regression the tolerance is the larger of the business tolerance (25%) and three
    standard errors of the estimate in X: with correlated parents or Poisson counts a quarter of the effect
    can be below what any analyst could resolve from the data.
    """
    units_file = contract.deliverables[0].file
    volume = next(v.name for v in contract.variables if v.role == "volume")
    out = []
    for e in contract.edges:
        stat, target, tol = _edge_statistic(e)
        se = (standard_errors or {}).get(f"{e.parent}->{e.child}")
        if stat in LINEAR_STATISTICS and se is not None and math.isfinite(se):
            tol = max(tol, round(3 * se, 6))
        if stat == "half_saturation" and e.child == volume:  # Poisson counts blur the bend of the curve
            tol = 0.5 * e.params["parent_sd"]
        files = [file_of(contract, e.parent), file_of(contract, e.child)]
        if e.kind == "interaction":
            files.append(file_of(contract, e.params["moderator"]))
        if e.kind == "ratio":
            files.append(units_file)
        out.append(
            Phenomenon(
                id=f"edge:{e.parent}->{e.child}",
                kind="edge_effect",
                statistic=stat,
                variables=[e.parent, e.child],
                edge=f"{e.parent}->{e.child}",
                target=target,
                tolerance=max(tol, 1e-6),
                files=sorted(set(files)),
                description=f"{e.parent} -> {e.child} ({e.kind}): {describe(e.kind, e.params)}",
            )
        )
    return out


def _invariants(contract: Contract, pack: DomainPack) -> list[Invariant]:
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
            id="range_capacity",
            kind="range",
            table="units",
            column=pack.entities.unit.capacity.name,
            min=pack.entities.unit.capacity.min,
            max=pack.entities.unit.capacity.max,
        ),
    ]
    table = {"unit": "units", "panel": "panel", "event": "events"}
    for v in contract.variables:
        if v.role == "volume":  # the rate obeys the variable's range; the realised count is any count >= 0
            inv.append(
                Invariant(
                    id=f"range_{v.name}_expected",
                    kind="range",
                    table="panel",
                    column=f"{v.name}_expected",
                    min=v.min,
                    max=v.max,
                )
            )
            inv.append(Invariant(id=f"range_{v.name}", kind="range", table="panel", column=v.name, min=0))
        elif v.dtype != "categorical":
            inv.append(
                Invariant(id=f"range_{v.name}", kind="range", table=table[v.grain], column=v.name, min=v.min, max=v.max)
            )
    volume = next(v.name for v in contract.variables if v.role == "volume")
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


def plan_deliverables(pack: DomainPack, contract: Contract, rng: np.random.Generator) -> list[Deliverable]:
    """Decide which system reports what, in which file, under which names and formats."""
    ent = pack.entities
    {s.name: s for s in pack.systems}
    core = {s.holds: s for s in pack.systems if s.holds != "variables"}
    styles = {s.name: naming.system_style(rng) for s in pack.systems}
    in_world = {v.name: v for v in contract.variables}

    places = {v.name: v.decimals for v in pack.variables}
    places |= {ent.event.amount.name: 2, ent.unit.capacity.name: 0}

    def col(system: str, name: str, source: str, fmt: str | None = None) -> DeliveredColumn:
        decimals = places.get(source.split(".", 1)[1]) if fmt is None else None
        return DeliveredColumn(
            name=naming.apply_case(name, styles[system]["case"]), source=source, format=fmt, decimals=decimals
        )

    def key_col(system: str, entity: str, prefix_source: str) -> DeliveredColumn:
        name = naming.key_column(entity, rng, styles[system]["case"])
        return DeliveredColumn(name=name, source=prefix_source, format=styles[system]["key"])

    def date_col(system: str, name: str, source: str) -> DeliveredColumn:
        return col(system, name, source, styles[system]["date"])

    files: list[Deliverable] = []
    u = core["units"]
    unit_vars = [v for v in contract.variables if v.grain == "unit"]
    files.append(
        Deliverable(
            file=f"{u.name}_{ent.unit.plural}.{EXT[u.format]}",
            system=u.name,
            format=u.format,
            grain="units",
            source_tables=["units"],
            sheets=list(pack.regions) if u.format == "xlsx" else [],
            columns=[
                col(u.name, f"{ent.unit.name}_name", "units.name"),
                col(u.name, "region", "units.region"),
                col(u.name, ent.unit.capacity.name, f"units.{ent.unit.capacity.name}"),
            ]
            + [col(u.name, v.name, f"units.{v.name}") for v in unit_vars],
        )
    )
    p = core["parties"]
    files.append(
        Deliverable(
            file=f"{p.name}_{ent.party.plural}.{EXT[p.format]}",
            system=p.name,
            format=p.format,
            grain="parties",
            source_tables=["parties"],
            columns=[
                key_col(p.name, ent.party.name, "parties.party_id"),
                col(p.name, f"{ent.party.name}_name", "parties.name"),
                col(p.name, "region", "parties.region"),
                date_col(p.name, "signup_date", "parties.signup_day"),
            ],
        )
    )
    e = core["events"]
    event_vars_here = [v for v in contract.variables if v.grain == "event" and v.system == e.name]
    files.append(
        Deliverable(
            file=f"{e.name}_{ent.event.plural}.{EXT[e.format]}",
            system=e.name,
            format=e.format,
            grain="events",
            source_tables=["events", "units"],
            columns=[
                key_col(e.name, ent.event.name, "events.event_id"),
                date_col(e.name, "timestamp", "events.time"),
                key_col(e.name, ent.unit.name, "events.unit_id"),
                col(e.name, f"{ent.unit.name}_name", "units.name"),
                key_col(e.name, ent.party.name, "events.party_id"),
                col(e.name, ent.event.amount.name, f"events.{ent.event.amount.name}"),
            ]
            + [col(e.name, v.name, f"events.{v.name}") for v in event_vars_here],
        )
    )
    for system in (s for s in pack.systems if s.holds == "variables"):
        mine = [v for v in contract.variables if v.system == system.name and v.name in in_world]
        panel_vars = [v for v in mine if v.grain == "panel"]
        event_vars = [v for v in mine if v.grain == "event"]
        ext = EXT[system.format]
        if panel_vars and all(v.pattern == "policy" for v in panel_vars):
            files.append(
                Deliverable(
                    file=f"{system.name}_changes.{ext}",
                    system=system.name,
                    format=system.format,
                    grain="schedule",
                    source_tables=["panel"],
                    columns=[
                        key_col(system.name, ent.unit.name, "panel.unit_id"),
                        col(system.name, "field", "panel.@field"),
                        date_col(system.name, "effective_from", "panel.day"),
                        col(system.name, "value", "panel.@value"),
                    ],
                )
            )
        elif panel_vars:
            files.append(
                Deliverable(
                    file=f"{system.name}_daily.{ext}",
                    system=system.name,
                    format=system.format,
                    grain="panel",
                    source_tables=["panel"],
                    columns=[
                        key_col(system.name, ent.unit.name, "panel.unit_id"),
                        date_col(system.name, "date", "panel.day"),
                    ]
                    + [col(system.name, v.name, f"panel.{v.name}") for v in panel_vars],
                )
            )
        if event_vars:
            detail_ext = "jsonl" if system.format == "xlsx" else ext
            files.append(
                Deliverable(
                    file=f"{system.name}_{ent.event.plural}_feedback.{detail_ext}",
                    system=system.name,
                    format=detail_ext,
                    grain="event_detail",
                    source_tables=["events"],
                    columns=[
                        key_col(system.name, ent.event.name, "events.event_id"),
                        date_col(system.name, "submitted", "events.time"),
                    ]
                    + [col(system.name, v.name, f"events.{v.name}") for v in event_vars],
                )
            )
    return files


def file_of(contract: Contract, variable: str) -> str:
    """The deliverable an analyst reads `variable` from (volume: the event log it is counted from)."""
    v = next(x for x in contract.variables if x.name == variable)
    for d in contract.deliverables:
        sources = {c.source for c in d.columns}
        if v.role == "volume" and d.grain == "events":
            return d.file
        if f"{'units' if v.grain == 'unit' else 'events' if v.grain == 'event' else 'panel'}.{v.name}" in sources:
            return d.file
        if d.grain == "schedule" and v.system == d.system and v.grain == "panel":
            return d.file
    raise KeyError(variable)


def _edge_statistic(edge: Edge) -> tuple[str, float, float]:
    p = edge.params
    parent_sd = p["parent_sd"]
    match edge.kind:
        case "monotone":
            return ("slope" if p["transform"] == "linear" else "log_slope", p["beta"], 0.25 * abs(p["beta"]))
        case "threshold":
            return "threshold_location", p["tau"], 0.35 * parent_sd
        case "saturation":  # the parent level where half the rise is reached; tolerance in parent sd
            return "half_saturation", round(p["origin"] + p["kappa"] * math.log(2), 6), 0.35 * parent_sd
        case "lag":
            return "lag_periods", float(p["lag"]), 1.5
        case "interaction":
            return "interaction_coefficient", p["beta"], 0.3 * abs(p["beta"])
        case "seasonal":
            return "seasonal_amplitude", p["amplitude"], 0.2
        case "categorical":
            spread = max(p["shifts"].values()) - min(p["shifts"].values())
            return "level_shift_range", round(spread, 6), 0.25 * spread
        case "ratio":
            return "per_capacity_slope", p["beta"], 0.25 * abs(p["beta"])
    raise KeyError(edge.kind)


def task_nodes(contract: Contract) -> list[tuple[str, str]]:
    """(kind, variable) per depth bucket: the largest in-degree node asks why it changed (cause), the
    largest out-degree node asks what it changed (consequence). The persona's focus always gets the cause
    task of its bucket. Unit attributes do not change over time, so they never get a cause task."""
    indeg = {v.name: 0 for v in contract.variables}
    outdeg = dict(indeg)
    for e in contract.edges:
        indeg[e.child] += 1
        outdeg[e.parent] += 1
    grain = {v.name: v.grain for v in contract.variables}
    focus = focus_variable(contract)
    chosen: list[tuple[str, str]] = []
    for layer in contract.layers:
        causes = [n for n in sorted(layer) if indeg[n] >= 2 and grain[n] != "unit"]
        if causes:
            chosen.append(("cause", focus if focus in causes else max(causes, key=lambda n: indeg[n])))
        effects = [n for n in sorted(layer) if outdeg[n] >= 2]
        if effects:
            chosen.append(("consequence", max(effects, key=lambda n: outdeg[n])))
    return chosen


def _phenomena(contract: Contract, pack: DomainPack) -> list[Phenomenon]:
    """Period-change and attribution phenomena for every cause-task node (edge effects come when sealing)."""
    out = []
    graph = nx.DiGraph([(e.parent, e.child) for e in contract.edges])
    half = contract.timeline.periods // 2
    causes = [node for kind, node in task_nodes(contract) if kind == "cause"]
    for node in causes:
        out.append(
            Phenomenon(
                id=f"change:{node}",
                kind="period_change",
                statistic="relative_change_h2_vs_h1",
                variables=[node],
                tolerance=0.03,
                files=[file_of(contract, node)],
                description=f"relative change of mean {node} from periods [0, {half}) to [{half}, {contract.timeline.periods})",
            )
        )
    amount = pack.entities.event.amount
    events_file = next(d.file for d in contract.deliverables if d.grain == "events")
    out.append(
        Phenomenon(
            id=f"change:{amount.name}",
            kind="period_change",
            statistic="relative_change_h2_vs_h1",
            variables=[],
            column=f"events.{amount.name}",
            tolerance=0.03,
            files=[events_file],
            description=f"relative change of the mean {pack.entities.event.name} {amount.name} ({amount.unit}) from H1 to H2",
        )
    )
    for node in causes:
        for parent in sorted(graph.predecessors(node)):
            out.append(
                Phenomenon(
                    id=f"share:{parent}->{node}",
                    kind="attribution",
                    statistic="share_of_change",
                    variables=[parent, node],
                    edge=f"{parent}->{node}",
                    tolerance=0.15,
                    files=sorted({file_of(contract, parent), file_of(contract, node)}),
                    description=f"share of the H1->H2 change in {node} explained by {parent}",
                )
            )
    return out


def focus_variable(contract: Contract) -> str:
    """The persona's focus when the world kept it with >= 2 parents, else the largest in-degree node."""
    indeg = {v.name: 0 for v in contract.variables}
    for e in contract.edges:
        indeg[e.child] += 1
    focus = contract.persona.focus
    if focus in indeg and indeg[focus] >= 2:
        return focus
    return max(sorted(indeg), key=lambda n: indeg[n])

"""Which system reports what: the deliverable files of a world, with their names, formats and conventions.

Per system: a units master (xlsx, one sheet per region, names only), a parties file, an event log, and per
variables-system a daily panel file, a change log (for policy-only systems) and/or an event-keyed feedback
file. Each system has its own column case, key column name, key template (`R-0012`, `r12`, `12`, ...) and
date style, drawn from the `plan` stream, so two systems of one world rarely agree.
"""

from __future__ import annotations

import numpy as np

from contracts.model import Contract, Deliverable, DeliveredColumn, Variable
from worldgen import naming
from worldgen.packs import DomainPack, System

EXT = {"csv": "csv", "xlsx": "xlsx", "parquet": "parquet", "json": "json", "jsonl": "jsonl"}


class _Columns:
    """Builds one system's columns in its own conventions (the rng is consumed in column order)."""

    def __init__(self, pack: DomainPack, rng: np.random.Generator):
        self.rng = rng
        self.styles = {s.name: naming.system_style(rng) for s in pack.systems}
        ent = pack.entities
        self.places = {v.name: v.decimals for v in pack.variables}
        self.places |= {ent.event.amount.name: 2, ent.unit.capacity.name: 0}

    def value(self, system: str, name: str, source: str, fmt: str | None = None) -> DeliveredColumn:
        decimals = self.places.get(source.split(".", 1)[1]) if fmt is None else None
        return DeliveredColumn(
            name=naming.apply_case(name, self.styles[system]["case"]), source=source, format=fmt, decimals=decimals
        )

    def key(self, system: str, entity: str, source: str) -> DeliveredColumn:
        name = naming.key_column(entity, self.rng, self.styles[system]["case"])
        return DeliveredColumn(name=name, source=source, format=self.styles[system]["key"])

    def date(self, system: str, name: str, source: str) -> DeliveredColumn:
        return self.value(system, name, source, self.styles[system]["date"])


def plan_deliverables(pack: DomainPack, contract: Contract, rng: np.random.Generator) -> list[Deliverable]:
    """Decide which system reports what, in which file, under which names and formats."""
    cols = _Columns(pack, rng)
    core = {s.holds: s for s in pack.systems if s.holds != "variables"}
    files = [
        _units_file(pack, contract, core["units"], cols),
        _parties_file(pack, core["parties"], cols),
        _events_file(pack, contract, core["events"], cols),
    ]
    for system in (s for s in pack.systems if s.holds == "variables"):
        mine = [v for v in contract.variables if v.system == system.name]
        files += _variable_files(pack, system, mine, cols)
    return files


def _units_file(pack: DomainPack, contract: Contract, u: System, cols: _Columns) -> Deliverable:
    ent = pack.entities
    unit_vars = [v for v in contract.variables if v.grain == "unit"]
    return Deliverable(
        file=f"{u.name}_{ent.unit.plural}.{EXT[u.format]}",
        system=u.name,
        format=u.format,
        grain="units",
        source_tables=["units"],
        sheets=list(pack.regions) if u.format == "xlsx" else [],
        columns=[
            cols.value(u.name, f"{ent.unit.name}_name", "units.name"),
            cols.value(u.name, "region", "units.region"),
            cols.value(u.name, ent.unit.capacity.name, f"units.{ent.unit.capacity.name}"),
        ]
        + [cols.value(u.name, v.name, f"units.{v.name}") for v in unit_vars],
    )


def _parties_file(pack: DomainPack, p: System, cols: _Columns) -> Deliverable:
    party = pack.entities.party
    return Deliverable(
        file=f"{p.name}_{party.plural}.{EXT[p.format]}",
        system=p.name,
        format=p.format,
        grain="parties",
        source_tables=["parties"],
        columns=[
            cols.key(p.name, party.name, "parties.party_id"),
            cols.value(p.name, f"{party.name}_name", "parties.name"),
            cols.value(p.name, "region", "parties.region"),
            cols.date(p.name, "signup_date", "parties.signup_day"),
        ],
    )


def _events_file(pack: DomainPack, contract: Contract, e: System, cols: _Columns) -> Deliverable:
    ent = pack.entities
    event_vars_here = [v for v in contract.variables if v.grain == "event" and v.system == e.name]
    return Deliverable(
        file=f"{e.name}_{ent.event.plural}.{EXT[e.format]}",
        system=e.name,
        format=e.format,
        grain="events",
        source_tables=["events", "units"],
        columns=[
            cols.key(e.name, ent.event.name, "events.event_id"),
            cols.date(e.name, "timestamp", "events.time"),
            cols.key(e.name, ent.unit.name, "events.unit_id"),
            cols.value(e.name, f"{ent.unit.name}_name", "units.name"),
            cols.key(e.name, ent.party.name, "events.party_id"),
            cols.value(e.name, ent.event.amount.name, f"events.{ent.event.amount.name}"),
        ]
        + [cols.value(e.name, v.name, f"events.{v.name}") for v in event_vars_here],
    )


def _variable_files(pack: DomainPack, system: System, mine: list[Variable], cols: _Columns) -> list[Deliverable]:
    """A variables-system's files: a change log (levers only) or a daily file, and an event feedback file."""
    ent = pack.entities
    panel_vars = [v for v in mine if v.grain == "panel"]
    event_vars = [v for v in mine if v.grain == "event"]
    ext = EXT[system.format]
    files = []
    if panel_vars and all(v.pattern == "policy" for v in panel_vars):
        files.append(
            Deliverable(
                file=f"{system.name}_changes.{ext}",
                system=system.name,
                format=system.format,
                grain="schedule",
                source_tables=["panel"],
                columns=[
                    cols.key(system.name, ent.unit.name, "panel.unit_id"),
                    cols.value(system.name, "field", "panel.@field"),
                    cols.date(system.name, "effective_from", "panel.day"),
                    cols.value(system.name, "value", "panel.@value"),
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
                    cols.key(system.name, ent.unit.name, "panel.unit_id"),
                    cols.date(system.name, "date", "panel.day"),
                ]
                + [cols.value(system.name, v.name, f"panel.{v.name}") for v in panel_vars],
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
                    cols.key(system.name, ent.event.name, "events.event_id"),
                    cols.date(system.name, "submitted", "events.time"),
                ]
                + [cols.value(system.name, v.name, f"events.{v.name}") for v in event_vars],
            )
        )
    return files


def file_of(contract: Contract, variable: str) -> str:
    """The deliverable an analyst reads `variable` from (volume: the event log it is counted from)."""
    v = contract.variable(variable)
    table = {"unit": "units", "event": "events", "panel": "panel"}[v.grain]
    for d in contract.deliverables:
        sources = {c.source for c in d.columns}
        if v.role == "volume" and d.grain == "events":
            return d.file
        if f"{table}.{v.name}" in sources:
            return d.file
        if d.grain == "schedule" and v.system == d.system and v.grain == "panel":
            return d.file
    raise KeyError(variable)

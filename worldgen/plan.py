"""Which system reports what: the deliverable files of a world, in each system's own vocabulary.

Per system: a units master (xlsx, one sheet per region) with the unit code, a parties file, an event log, and
per variables-system a daily file, a change log (for policy-only systems) and/or an event-keyed file; and a
data dictionary per system describing each of its columns in its own words. Each system draws, from the
`plan` stream, its column case, its names for every measure (from the pack's aliases), its key template and
date style, and how it identifies units: the master's code in its own format, an id of its own (mapped in
the master), or the unit's name. How many systems a world holds is drawn too (`_spread_over_systems`): some
merge, some hand variables to a spare system of the pack, so worlds hold 4 to 10 systems, not always 8.
"""

from __future__ import annotations

import numpy as np

from contracts.model import Contract, Deliverable, DeliveredColumn, Variable
from worldgen import naming
from worldgen.packs import Alias, DomainPack, System

EXT = {"csv": "csv", "xlsx": "xlsx", "parquet": "parquet", "json": "json", "jsonl": "jsonl"}
DATE_NAMES = {
    "panel": ("date", "business_date", "report_date", "as_of_date", "day"),
    "events": ("created_at", "placed_at", "event_time", "logged_at", "timestamp"),
    "schedule": ("effective_from", "valid_from", "change_date", "start_date"),
    "feedback": ("submitted_at", "answered_at", "response_time", "received_at"),
    "completion": ("completed_at", "closed_at", "finished_at", "done_at"),
}
REGION_NAMES = ("region", "area", "zone", "territory")
FIELD_NAMES = (("field", "value"), ("attribute", "new_value"), ("parameter", "setting"), ("metric", "amount"))
SPLIT_MIN_PANEL = 2  # a system hands daily variables to a spare one only if it keeps at least one
REFERENCE_WEIGHTS = {"code": 0.6, "local": 0.25, "name": 0.15}  # how often a system uses each way to name units


class _Columns:
    """One world's naming: per system a case, key template and date style; per column an alias and a doc."""

    def __init__(self, pack: DomainPack, contract: Contract, rng: np.random.Generator):
        self.pack, self.rng = pack, rng
        self.styles = {s.name: naming.system_style(rng) for s in pack.systems}
        keyed = {v.system for v in contract.variables if v.grain == "panel"}  # systems with a unit key column
        self.refers = {s.name: self._reference(s) for s in pack.systems if s.name in keyed and s.holds == "variables"}
        self._own_reference(pack)
        self.places = {v.name: v.decimals for v in contract.variables}
        self.places |= {m.name: m.decimals for m in (contract.measures.capacity, contract.measures.amount)}
        self.labels = {s.name: s.label for s in pack.systems}

    def _reference(self, system: System, options: list[str] | None = None) -> str:
        options = options or list(system.refers_by)
        weights = np.array([REFERENCE_WEIGHTS[o] for o in options])
        return options[int(self.rng.choice(len(options), p=weights / weights.sum()))]

    def _own_reference(self, pack: DomainPack) -> None:
        """Real multi-system exports never all share the master's code: when every keyed system drew it, one
        that may name units its own way (an id mapped in the master, or the unit's name) does (check 7c)."""
        if any(how != "code" for how in self.refers.values()):
            return
        able = [s for s in pack.systems if s.name in self.refers and set(s.refers_by) - {"code"}]
        if able:
            system = self.pick(able)
            self.refers[system.name] = self._reference(system, [o for o in system.refers_by if o != "code"])

    def pick(self, options: tuple | list):
        return options[int(self.rng.integers(len(options)))]

    def named(self, system: str, stem: str) -> str:
        return naming.apply_case(stem, self.styles[system]["case"])

    def value(self, system: str, source: str, aliases: list[Alias]) -> DeliveredColumn:
        alias = self.pick(aliases)
        return DeliveredColumn(
            name=self.named(system, alias.name),
            source=source,
            decimals=self.places.get(source.split(".", 1)[1]),
            doc=alias.doc,
        )

    def plain(self, system: str, stem: str, source: str, doc: str) -> DeliveredColumn:
        return DeliveredColumn(name=self.named(system, stem), source=source, doc=doc)

    def key(self, system: str, entity: str, aliases: list[str], source: str, fmt: str | None = None) -> DeliveredColumn:
        alias = self.pick(aliases or [entity])
        suffix = self.pick(naming.KEY_SUFFIXES)
        label = self.labels[system]
        fmt = fmt or self.styles[system]["key"]
        doc = f"Identifier of the {alias.replace('_', ' ')} in the {label}."
        if fmt == "name":
            doc = f"Name of the {alias.replace('_', ' ')} as the {label} spells it."
            return DeliveredColumn(name=self.named(system, f"{alias}_name"), source=source, format=fmt, doc=doc)
        if fmt.startswith("local:"):
            doc = f"The {label}'s own number for the {alias.replace('_', ' ')} (not the master code)."
        return DeliveredColumn(name=self.named(system, f"{alias}_{suffix}"), source=source, format=fmt, doc=doc)

    def date(self, system: str, kind: str, source: str, doc: str) -> DeliveredColumn:
        stem = self.pick(DATE_NAMES[kind])
        return DeliveredColumn(
            name=self.named(system, stem), source=source, format=self.styles[system]["date"], doc=doc
        )

    def unit_key(self, system: str, source: str) -> DeliveredColumn:
        unit = self.pack.entities.unit
        how = self.refers.get(system, "code")
        fmt = {"code": None, "local": f"local:{self.styles[system]['key']}", "name": "name"}[how]
        return self.key(system, unit.name, unit.aliases, source, fmt)


def plan_deliverables(pack: DomainPack, contract: Contract, rng: np.random.Generator) -> list[Deliverable]:
    """Decide which system reports what, in which file, under which names and formats."""
    _spread_over_systems(pack, contract, rng)
    cols = _Columns(pack, contract, rng)
    contract.entity("unit").local_ids = sorted(s for s, how in cols.refers.items() if how == "local")
    core = {s.holds: s for s in pack.systems if s.holds != "variables"}
    files = [
        _units_file(pack, contract, core["units"], cols),
        _parties_file(pack, contract, core["parties"], cols),
        _events_file(pack, contract, core["events"], cols),
    ]
    for system in (s for s in pack.systems if s.holds == "variables"):
        mine = [v for v in contract.variables if v.system == system.name]
        files += _variable_files(pack, contract, system, mine, cols)
    systems = sorted({d.system for d in files})
    files += [_dictionary(system, pack) for system in systems]
    return files


def _spread_over_systems(pack: DomainPack, contract: Contract, rng: np.random.Generator) -> None:
    """How many systems this world's variables live in: real worlds hold 4 to 12. A target number of
    variables-systems is drawn; systems are merged (one reports what another did) or a system hands part of
    its panel variables to a spare system of the pack (one with no variables of its own) until the target
    is met or no move fits. Each variable stays in exactly one system, so every phenomenon stays observable."""
    by_name = {s.name: s for s in pack.systems if s.holds == "variables"}
    homes = {name: [v for v in contract.variables if v.system == name] for name in by_name}
    used = sorted(n for n, vs in homes.items() if vs)
    target = int(rng.integers(1, len(by_name) + 1))
    while len(used) != target:
        moves = _merges(by_name, homes, used) if len(used) > target else _splits(by_name, homes, used)
        if not moves:
            break
        source, sink, moved = moves[int(rng.integers(len(moves)))]
        moved = moved if moved is not None else _some(homes[source], rng)
        for v in moved:
            v.system = sink
        homes = {name: [v for v in contract.variables if v.system == name] for name in by_name}
        used = sorted(n for n, vs in homes.items() if vs)


def _fits(system: System, variables: list[Variable]) -> bool:
    """Whether one system can report these variables in its files: a workbook holds schedules only, and
    survey answers (sparse rows) never share a detail file with other event measures."""
    panel = [v for v in variables if v.grain == "panel"]
    events = [v for v in variables if v.grain == "event"]
    if system.format == "xlsx" and (events or any(v.pattern != "policy" for v in panel)):
        return False
    return len({v.observe == "scale" for v in events}) <= 1


def _own_keys_possible(by_name: dict[str, System], homes: dict[str, list[Variable]]) -> bool:
    """Some system with a unit key may still name units its own way (check 7c needs one)."""
    return any(set(by_name[n].refers_by) - {"code"} for n, vs in homes.items() if any(v.grain == "panel" for v in vs))


def _merges(by_name, homes, used) -> list[tuple[str, str, list[Variable] | None]]:
    """(absorbed, absorbing, its variables) for every pair of used systems that may merge."""
    moves = []
    for a in used:
        for b in (b for b in used if b != a and _fits(by_name[b], homes[a] + homes[b])):
            after = {**homes, a: [], b: homes[a] + homes[b]}
            if _own_keys_possible(by_name, after):
                moves.append((a, b, homes[a]))
    return moves


def _splits(by_name, homes, used) -> list[tuple[str, str, None]]:
    """(giving, spare) for every used system with two or more panel variables and every spare system that
    could report them; which of them move is drawn when the move is chosen."""
    spares = [n for n in sorted(by_name) if not homes[n]]
    givers = [a for a in used if sum(v.grain == "panel" for v in homes[a]) >= SPLIT_MIN_PANEL]
    daily = {a: [v for v in homes[a] if v.grain == "panel"] for a in givers}
    return [(a, b, None) for a in givers for b in spares if _fits(by_name[b], daily[a])]


def _some(variables: list[Variable], rng: np.random.Generator) -> list[Variable]:
    """Some of a system's panel variables: at least one moves, at least one stays."""
    panel = [v for v in variables if v.grain == "panel"]
    k = int(rng.integers(1, len(panel)))
    return [panel[i] for i in sorted(rng.choice(len(panel), k, replace=False))]


def _dictionary(system: str, pack: DomainPack) -> Deliverable:
    return Deliverable(
        file=f"{system}_data_dictionary.md",
        system=system,
        format="md",
        grain="dictionary",
        source_tables=[],
        columns=[],
    )


def _aliases(pack: DomainPack, name: str) -> list[Alias]:
    return list(pack.variable(name).aliases)


def _units_file(pack: DomainPack, contract: Contract, u: System, cols: _Columns) -> Deliverable:
    ent = pack.entities
    unit_alias = cols.pick(ent.unit.aliases or [ent.unit.name])
    columns = [
        cols.key(u.name, ent.unit.name, [unit_alias], "units.unit_id"),
        cols.plain(u.name, f"{unit_alias}_name", "units.name", f"Trading name of the {unit_alias.replace('_', ' ')}."),
        cols.plain(u.name, cols.pick(REGION_NAMES), "units.region", "Region the unit belongs to."),
        cols.value(u.name, f"units.{ent.unit.capacity.name}", list(ent.unit.capacity.aliases)),
    ]
    columns += [
        cols.value(u.name, f"units.{v.name}", _aliases(pack, v.name)) for v in contract.variables if v.grain == "unit"
    ]
    for system in contract.entity("unit").local_ids:
        label = cols.labels[system]
        columns.append(
            DeliveredColumn(
                name=cols.named(u.name, f"{system}_id"),
                source=f"units.local_{system}",
                format=f"local:{cols.styles[system]['key']}",
                doc=f"The number the {label} uses for this {unit_alias.replace('_', ' ')}.",
            )
        )
    return Deliverable(
        file=f"{u.name}_{ent.unit.plural}.{EXT[u.format]}",
        system=u.name,
        format=u.format,
        grain="units",
        source_tables=["units"],
        sheets=list(pack.regions) if u.format == "xlsx" else [],
        columns=columns,
    )


def _parties_file(pack: DomainPack, contract: Contract, p: System, cols: _Columns) -> Deliverable:
    party = pack.entities.party
    alias = cols.pick(party.aliases or [party.name])
    joined = DeliveredColumn(
        name=cols.named(p.name, party.since),
        source="parties.signup_day",
        format=cols.styles[p.name]["date"],
        doc=f"Date the {alias.replace('_', ' ')} joined.",
    )
    columns = [
        cols.key(p.name, party.name, [alias], "parties.party_id"),
        cols.plain(p.name, f"{alias}_name", "parties.name", f"Full name of the {alias.replace('_', ' ')}."),
        cols.plain(p.name, cols.pick(REGION_NAMES), "parties.region", "Home region of the account."),
        joined,
    ]
    columns += [cols.plain(p.name, c.name, f"parties.{c.name}", c.doc) for c in party.columns]
    return Deliverable(
        file=f"{p.name}_{party.plural}.{EXT[p.format]}",
        system=p.name,
        format=p.format,
        grain="parties",
        source_tables=["parties"],
        columns=columns,
    )


def _event_key(
    cols: _Columns, contract: Contract, system: str, entity_name: str, aliases: list[str]
) -> DeliveredColumn:
    fmt = "uuid" if contract.events.key_style == "uuid" else None
    return cols.key(system, entity_name, aliases, "events.event_id", fmt)


def _events_file(pack: DomainPack, contract: Contract, e: System, cols: _Columns) -> Deliverable:
    ent = pack.entities
    amount = ent.event.amount
    event_vars_here = [v for v in contract.variables if v.grain == "event" and v.system == e.name]
    unit_alias = cols.pick(ent.unit.aliases or [ent.unit.name])
    columns = [
        _event_key(cols, contract, e.name, ent.event.name, ent.event.aliases),
        cols.date(e.name, "events", "events.time", f"When the {ent.event.name.replace('_', ' ')} was placed."),
        cols.key(e.name, ent.unit.name, [unit_alias], "events.unit_id"),
        cols.plain(e.name, f"{unit_alias}_name", "units.name", "Name of the unit as this system shows it."),
        cols.key(e.name, ent.party.name, ent.party.aliases, "events.party_id"),
        cols.value(e.name, f"events.{amount.name}", list(amount.aliases)),
    ]
    columns += [cols.value(e.name, f"events.{v.name}", _aliases(pack, v.name)) for v in event_vars_here]
    return Deliverable(
        file=f"{e.name}_{ent.event.plural}.{EXT[e.format]}",
        system=e.name,
        format=e.format,
        grain="events",
        source_tables=["events", "units"],
        columns=columns,
    )


def _variable_files(
    pack: DomainPack, contract: Contract, system: System, mine: list[Variable], cols: _Columns
) -> list[Deliverable]:
    """A variables-system's files: a change log (levers only) or a daily file, and an event-keyed file."""
    ent = pack.entities
    panel_vars = [v for v in mine if v.grain == "panel"]
    event_vars = [v for v in mine if v.grain == "event"]
    ext = EXT[system.format]
    files = []
    if panel_vars and all(v.pattern == "policy" for v in panel_vars):
        field, value = cols.pick(FIELD_NAMES)
        columns = [
            cols.unit_key(system.name, "panel.unit_id"),
            cols.plain(system.name, field, "panel.@field", "Which setting changed (its name in this system)."),
            cols.date(system.name, "schedule", "panel.day", "First day the new value applies."),
            cols.plain(system.name, value, "panel.@value", "The setting's value from that day on."),
        ]
        fields = [cols.value(system.name, f"panel.{v.name}", _aliases(pack, v.name)) for v in panel_vars]
        schedule = _deliverable(system, f"{system.name}_changes.{ext}", "schedule", ["panel"], columns)
        files.append(schedule.model_copy(update={"fields": fields}))
    elif panel_vars:
        columns = [
            cols.unit_key(system.name, "panel.unit_id"),
            cols.date(system.name, "panel", "panel.day", "The business day the row reports."),
        ]
        columns += [cols.value(system.name, f"panel.{v.name}", _aliases(pack, v.name)) for v in panel_vars]
        files.append(_deliverable(system, f"{system.name}_daily.{ext}", "panel", ["panel"], columns))
    if event_vars:
        detail_ext = "jsonl" if system.format == "xlsx" else ext
        survey = all(v.observe == "scale" for v in event_vars)
        kind, source = ("feedback", "events.feedback_time") if survey else ("completion", "events.completion_time")
        what = "the answer was received" if survey else f"the {ent.event.name.replace('_', ' ')} was completed"
        columns = [
            _event_key(cols, contract, system.name, ent.event.name, ent.event.aliases),
            cols.date(system.name, kind, source, f"When {what}."),
        ]
        columns += [cols.value(system.name, f"events.{v.name}", _aliases(pack, v.name)) for v in event_vars]
        name = f"{system.name}_{'responses' if survey else ent.event.plural}.{detail_ext}"
        files.append(
            Deliverable(
                file=name,
                system=system.name,
                format=detail_ext,
                grain="event_detail",
                source_tables=["events"],
                columns=columns,
            )
        )
    return files


def _deliverable(
    system: System, file: str, grain: str, tables: list[str], columns: list[DeliveredColumn]
) -> Deliverable:
    return Deliverable(
        file=file, system=system.name, format=system.format, grain=grain, source_tables=tables, columns=columns
    )


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

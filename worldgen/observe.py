"""Canonical X -> observed files E: each business system's view, its naming, and its defects.

For every deliverable of the contract: build the system's clean view of X (typed: integer keys, integer
days), apply the planned defects with the `defects` seed stream, then render keys and dates in the
system's own conventions. The clean view and the defect records are enough to rebuild E exactly, and
undoing the records on E gives back the clean view; both facts are tested.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from contracts.model import TIME_SUFFIX, Contract, Deliverable
from worldgen.canonical import CanonicalState
from worldgen.defects import (
    Defect,
    Duplicates,
    MissingValues,
    ReportingDelay,
    SchemaDrift,
    SpellingVariants,
    UnitDrift,
)
from worldgen.naming import STRFTIME


@dataclass(frozen=True)
class DefectSettings:
    """How heavy the defects are; `scale` multiplies every rate (0 gives clean files)."""

    scale: float = 1.0
    spelling_rate: float = 0.35
    missing_rate: float = 0.03
    duplicate_rate: float = 0.02
    delay_rate: float = 0.5
    delay_max_days: int = 7

    def rate(self, base: float) -> float:
        return min(base * self.scale, 0.95)


@dataclass
class ObservedFile:
    deliverable: Deliverable
    clean: pl.DataFrame  # the system's view of X before defects (typed keys and days)
    frame: pl.DataFrame  # after defects, before rendering
    records: list[dict] = field(default_factory=list)

    def rendered(self, contract: Contract) -> pl.DataFrame:
        return render(self.frame, self.deliverable, contract)


def project(
    contract: Contract,
    state: CanonicalState,
    rng: np.random.Generator,
    settings: DefectSettings = DefectSettings(),
) -> list[ObservedFile]:
    """Every deliverable's clean view with its defects applied, in contract order (the sealed contract is
    the whole specification: which system reports what, in which units, and which units it may drift to)."""
    files = []
    for d in contract.deliverables:
        clean = clean_view(d, contract, state)
        frame, records = with_day(clean, d), []
        for defect in plan_defects(d, contract, rng, settings):
            frame, record = defect.apply(frame, rng)
            if record.get("day_column") == DAY:
                record["day_column"] = f"{d.columns[1].name} (its day)"
            records.append(record)
        files.append(ObservedFile(d, clean, frame.drop(DAY, strict=False), records))
    return files


def _name(d: Deliverable, source: str) -> str:
    return next(c.name for c in d.columns if c.source == source)


def clean_view(d: Deliverable, contract: Contract, state: CanonicalState) -> pl.DataFrame:
    """The system's view of X with observed column names and decimals, before any defect."""
    if d.grain == "schedule":
        return _schedule_view(d, contract, state)
    # Columns that may switch unit stay floats even when whole, so a switch to a finer unit can be recorded.
    drifting = {v.name for v in contract.variables if v.alt_unit is not None} | {contract.measures.amount.name}
    table_of = {"units": "units", "parties": "parties", "events": "events", "event_detail": "events", "panel": "panel"}
    base = table_of[d.grain]
    cols = {}
    for c in d.columns:
        table, column = c.source.split(".", 1)
        if table == "units" and base != "units":  # unit name looked up through the event's unit
            values = state.column("units", column)[state.column(base, "unit_id") - 1]
        else:
            values = state.column(table, column)
        if values.dtype.kind == "f" and c.decimals is not None:
            values = np.round(values, c.decimals)
            if c.decimals == 0 and column not in drifting:  # whole numbers are reported as integers
                values = values.astype(np.int64)
        cols[c.name] = values
    frame = pl.DataFrame(cols)
    if d.sheets:  # one sheet per region: the file's row order is by region, so the view's is too
        frame = frame.sort(_name(d, "units.region"), maintain_order=True)
    return frame


def _schedule_view(d: Deliverable, contract: Contract, state: CanonicalState) -> pl.DataFrame:
    """Policy levers as a change log: each unit's initial value and every later change."""
    periods = contract.timeline.periods
    frames = []
    policies = [v for v in contract.variables if v.system == d.system and v.grain == "panel"]
    for v in policies:
        values = np.round(state.column("panel", v.name).reshape(-1, periods), v.decimals)
        changed = np.ones_like(values, dtype=bool)
        changed[:, 1:] = values[:, 1:] != values[:, :-1]
        unit, day = np.nonzero(changed)
        frames.append(
            pl.DataFrame(
                {
                    d.columns[0].name: (unit + 1).astype(np.int64),
                    d.columns[1].name: [v.name] * len(unit),
                    d.columns[2].name: day.astype(np.int64),
                    d.columns[3].name: values[unit, day].astype(float),
                }
            )
        )
    return pl.concat(frames).sort([d.columns[2].name, d.columns[0].name, d.columns[1].name])


UNIT_SWITCH_WINDOW = (0.3, 0.7)  # a system migrates units somewhere in the middle 40% of the timeline
EVENT_RENAME_WINDOW = (0.55, 0.8)  # the event log's release renames a column in the second half
FEEDBACK_RENAME_WINDOW = (0.5, 0.8)
PANEL_MISSING_SHARE = 0.7  # daily files lose fewer values than event logs
LATE_POSTING_RATE = 0.01  # without a feedback file, 1% of a daily file's rows are posted a day late
FEEDBACK_DELAY_DAYS = 3  # feedback arrives up to three days after the event


def plan_defects(d: Deliverable, contract: Contract, rng: np.random.Generator, s: DefectSettings) -> list[Defect]:
    """Which defects hit this file: every world gets all six kinds somewhere (rng consumed in this order)."""
    if s.scale <= 0:
        return []
    planner = _DefectPlanner(d, contract, rng, s)
    match d.grain:
        case "units":
            return [SpellingVariants(_name(d, "units.name"), s.rate(s.spelling_rate))]
        case "events":
            return planner.event_log()
        case "panel":
            return planner.daily_file()
        case "event_detail":
            return planner.feedback_file()
    return []  # change logs keep exact effective dates: a late entry would shift every lag estimated from it


class _DefectPlanner:
    def __init__(self, d: Deliverable, contract: Contract, rng: np.random.Generator, s: DefectSettings):
        self.d, self.contract, self.rng, self.s = d, contract, rng, s
        self.variables = {v.name: v for v in contract.variables}
        self.value_cols = [c for c in d.columns if c.source.split(".", 1)[1] in self.variables]

    def day_in(self, window: tuple[float, float]) -> int:
        periods = self.contract.timeline.periods
        return int(self.rng.integers(int(window[0] * periods), int(window[1] * periods)))

    def event_log(self) -> list[Defect]:
        d, rng, s = self.d, self.rng, self.s
        amount = self.contract.measures.amount
        defects: list[Defect] = []
        if self.value_cols:
            column = self.value_cols[int(rng.integers(len(self.value_cols)))].name
            defects.append(MissingValues(column, s.rate(s.missing_rate)))
        if amount.alt_unit is None:  # validate_contract requires it; guard the invariant all the same
            raise ValueError("the event amount needs an alternative unit to drift to")
        switch = self.day_in(UNIT_SWITCH_WINDOW)
        column = _name(d, f"events.{amount.name}")
        alt = amount.alt_unit
        defects.append(UnitDrift(column, DAY, switch, alt.factor, amount.unit, alt.name, amount.decimals))
        defects.append(Duplicates(s.rate(s.duplicate_rate)))
        amount_col = next(c for c in d.columns if c.source == f"events.{amount.name}")
        target = self.value_cols[-1] if self.value_cols else amount_col
        renamed = _renamed(target.name, rng)
        defects.append(SchemaDrift(target.name, renamed, DAY, self.day_in(EVENT_RENAME_WINDOW)))
        return defects

    def daily_file(self) -> list[Defect]:
        s = self.s
        date = self.d.columns[1].name
        defects: list[Defect] = []
        for c in self.value_cols:
            defects.append(MissingValues(c.name, s.rate(s.missing_rate * PANEL_MISSING_SHARE)))
            v = self.variables[c.source.split(".", 1)[1]]
            if v.alt_unit is not None:  # a system migration: every drift-able variable switches unit at some point
                switch = self.day_in(UNIT_SWITCH_WINDOW)
                defects.append(UnitDrift(c.name, date, switch, v.alt_unit.factor, v.unit, v.alt_unit.name, v.decimals))
        has_feedback = any(x.grain == "event_detail" for x in self.contract.deliverables)
        if not has_feedback and self.d is _first_panel(self.contract):
            defects.append(ReportingDelay(date, s.rate(LATE_POSTING_RATE), 1))
        return defects

    def feedback_file(self) -> list[Defect]:
        rng, s = self.rng, self.s
        defects: list[Defect] = [MissingValues(c.name, s.rate(s.missing_rate)) for c in self.value_cols]
        # Feedback arrives days after the event; only a join on the event key puts it back on the right day.
        defects.append(ReportingDelay(self.d.columns[1].name, s.rate(s.delay_rate), FEEDBACK_DELAY_DAYS, step=86400))
        if self.value_cols:
            c = self.value_cols[int(rng.integers(len(self.value_cols)))]
            renamed = _renamed(c.name, rng)
            defects.append(SchemaDrift(c.name, renamed, DAY, self.day_in(FEEDBACK_RENAME_WINDOW)))
        return defects


def _first_panel(contract: Contract) -> Deliverable | None:
    return next((x for x in contract.deliverables if x.grain == "panel"), None)


def _renamed(name: str, rng: np.random.Generator) -> str:
    options = [f"{name}_v2", f"{name}New" if name[:1].islower() and "_" not in name else f"{name}_new", f"new_{name}"]
    return options[int(rng.integers(len(options)))]


DAY = "@day"


def with_day(frame: pl.DataFrame, d: Deliverable) -> pl.DataFrame:
    """Event files carry a timestamp; defects keyed on a day see it through a temporary '@day' column."""
    if d.grain in {"events", "event_detail"}:
        return frame.with_columns((pl.col(_name(d, "events.time")) // 86400).alias(DAY))
    return frame


def _render_key(column: pl.Expr, template: str, prefix: str) -> pl.Expr:
    fields = {"P": prefix.upper(), "p": prefix.lower(), "PP": (prefix.upper() * 2)[:3]}
    parts: list[pl.Expr] = []
    for token in re.split(r"(\{[^}]+\})", template):
        if not token:
            continue
        if token.startswith("{n"):
            width = re.search(r":0(\d+)d", token)
            text = column.cast(pl.String)
            parts.append(text.str.zfill(int(width.group(1))) if width else text)
        elif token.startswith("{"):
            parts.append(pl.lit(fields[token[1:-1]]))
        else:
            parts.append(pl.lit(token))
    return pl.concat_str(parts)


def render(frame: pl.DataFrame, d: Deliverable, contract: Contract) -> pl.DataFrame:
    """Keys in the system's template, days as dates in its style (native types for parquet and xlsx)."""
    start = dt.date.fromisoformat(contract.timeline.start)
    prefixes = {e.table: e.prefix for e in contract.entities}
    exprs = []
    native = d.format in {"parquet", "xlsx"}
    for c in d.columns:
        if c.format is None or c.name not in frame.columns:
            continue
        col = pl.col(c.name)
        table, column = c.source.split(".", 1)
        if column in {"unit_id", "party_id", "event_id"}:
            entity = {"unit_id": "units", "party_id": "parties", "event_id": "events"}[column]
            exprs.append(_render_key(col, c.format, prefixes[entity]).alias(c.name))
        elif column == "time":
            stamp = pl.lit(dt.datetime.combine(start, dt.time())) + pl.duration(seconds=col)
            exprs.append((stamp if native else stamp.dt.strftime(STRFTIME[c.format] + TIME_SUFFIX)).alias(c.name))
        else:
            date = pl.lit(start) + pl.duration(days=col)
            exprs.append(
                (date.cast(pl.Date) if native else date.cast(pl.Date).dt.strftime(STRFTIME[c.format])).alias(c.name)
            )
    out = frame.with_columns(exprs) if exprs else frame
    drift_columns = [c for c in out.columns if c not in {x.name for x in d.columns}]
    return out.select([c.name for c in d.columns if c.name in out.columns] + drift_columns)

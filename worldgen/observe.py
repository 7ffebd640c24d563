"""Canonical X -> observed files E: each business system's view, its naming, and its defects.

For every deliverable of the contract: build the system's clean view of X (typed: integer keys, integer
days), apply the planned defects with the `defects` seed stream, then render keys and dates in the
system's own conventions. The clean view and the defect records are enough to rebuild E exactly, and
undoing the records on E gives back the clean view; both facts are tested.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from contracts.frames import with_column
from contracts.keys import BASE_TABLE, shown, template
from contracts.model import TIME_SUFFIX, Contract, Deliverable, DeliveredColumn
from worldgen.canonical import CanonicalState
from worldgen.defects import (
    Defect,
    Duplicates,
    MissingValues,
    ReportingDelay,
    SchemaDrift,
    SpellingVariants,
    UnitDrift,
    _at,
)
from worldgen.naming import STRFTIME
from worldgen.sorting import stable_order

FIT_COLUMNS = 2  # a fit needs the child and its parents in a row: blanks in any of them drop it


@dataclass(frozen=True)
class DefectSettings:
    """How heavy the defects are; `scale` multiplies every rate (0 gives clean files)."""

    scale: float = 1.0
    spelling_rate: float = 0.35  # a third of a CRM's names typed differently from the operational system
    missing_rate: float = 0.03  # a few blanks per column, as exports have them
    duplicate_rate: float = 0.02  # re-sent rows: rare, but enough to bias a naive sum

    def rate(self, base: float) -> float:
        return min(base * self.scale, 0.95)

    def rows_lost(self) -> float:
        """The share of a child's rows an analyst's fit loses to blanks: in its own column and a parent's."""
        return 1 - (1 - self.rate(self.missing_rate)) ** FIT_COLUMNS


@dataclass
class ObservedFile:
    deliverable: Deliverable
    clean: pl.DataFrame  # the system's view of X before defects (typed keys and days)
    frame: pl.DataFrame  # after defects, before rendering
    records: list[dict] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # the columns its rows are sorted by

    def rendered(self, contract: Contract) -> pl.DataFrame:
        return render(self.frame, self.deliverable, contract)


def project(
    contract: Contract,
    state: CanonicalState,
    rng: np.random.Generator,
    settings: DefectSettings = DefectSettings(),
) -> list[ObservedFile]:
    """Every data deliverable's clean view, ordered the way its system lists rows, with its defects applied
    (the sealed contract is the whole specification). Data dictionaries are written from the contract."""
    files = []
    for d in contract.deliverables:
        if d.grain == "dictionary":
            continue
        order = ROW_ORDERS[d.grain][int(rng.integers(len(ROW_ORDERS[d.grain])))]
        clean = clean_view(d, contract, state, order)
        frame, records = with_day(clean, d), []
        for defect in plan_defects(d, contract, rng, settings):
            frame, record = defect.apply(frame, rng)
            if record.get("day_column") == DAY:
                record["day_column"] = f"{d.columns[1].name} (its day)"
            records.append(record)
        files.append(ObservedFile(d, clean, _without(frame, DAY), records, order_columns(d, order)))
    return files


def _without(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """`frame.drop(name, strict=False)`: a new frame sharing the other columns, without the query `drop` runs
    (~0.07 ms a file)."""
    out = frame.clone()  # shallow: the columns are shared, and dropping one leaves `frame` as it was
    if name in out.columns:
        out.drop_in_place(name)
    return out


# How each kind of file lists its rows: by which of its columns, in order (drawn per file).
ROW_ORDERS = {
    "units": (("units.name",), ("units.unit_id",)),
    "parties": (("parties.party_id",), ("parties.signup_day", "parties.party_id")),
    "events": (("events.time", "events.event_id"),),
    "event_detail": (("@time", "events.event_id"), ("events.event_id",)),
    "panel": (("panel.day", "panel.unit_id"), ("panel.unit_id", "panel.day")),
    "schedule": (("panel.day", "panel.unit_id", "panel.@field"), ("panel.unit_id", "panel.@field", "panel.day")),
}


def order_columns(d: Deliverable, order: tuple[str, ...]) -> list[str]:
    """The file's column names an order sorts by (sheets first: a workbook lists each region apart)."""
    by_source = {c.source: c.name for c in d.columns}
    names = [d.columns[1].name if source == "@time" else by_source[source] for source in order]
    return ([by_source["units.region"]] if d.sheets else []) + names


def _name(d: Deliverable, source: str) -> str:
    return next(c.name for c in d.columns if c.source == source)


def clean_view(d: Deliverable, contract: Contract, state: CanonicalState, order: tuple[str, ...]) -> pl.DataFrame:
    """The system's view of X: its rows (open days, answered surveys), keys as it shows them, observed
    column names and decimals, sorted the way the system lists rows; before any defect."""
    if d.grain == "schedule":
        frame = _schedule_view(d, contract, state)
    else:
        frame = _table_view(d, contract, state)
    return sort_rows(frame, order_columns(d, order))


def sort_rows(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """`frame.sort(by, maintain_order=True)`. An event log's rows mostly come out of X already in its order
    (by time, then id): a stable sort of sorted rows leaves them as they are, so it is skipped when a look at
    the integer keys shows they are (~0.1 ms against 2-6 ms for sorting and gathering 60k rows), and only the
    flag the sort would set is set."""
    if _in_order(frame, by):
        return with_column(frame, frame[by[0]].set_sorted())  # flagged as the sort flags it
    order = _key_order(frame, by)
    if order is None:
        return frame.sort(by, maintain_order=True)
    ordered = frame[order]  # gathered by a numpy index, as the sort gathers by its own
    return with_column(ordered, ordered[by[0]].set_sorted())


# A file's sort keys are ids, days and names: a polars sort by them with maintain_order costs 1-5 ms (12 ms by
# a UUID), several times what numpy takes to order one integer code per row that ranks the rows as the keys do.
STRING_RANK_MAX_DISTINCT = 4096  # a text key with at most this many distinct values is ranked by an Enum
CODE_CAPACITY = 2**62  # a row's code (its keys' codes in mixed radix) stays below this, so int64 holds it
KEY_ORDER_MIN_ROWS = 1000  # fewer rows: polars sorts them as fast
PREFIX_BYTES = 7  # other texts are coded by their first bytes (7 keep the code below CODE_CAPACITY)
TIED_ROWS_MAX = 1000  # rows whose codes tie, ordered by their keys in Python: beyond this, polars sorts


def _key_order(frame: pl.DataFrame, by: list[str]) -> np.ndarray | None:
    """The permutation `frame.sort(by, maintain_order=True)` applies, or None (the caller sorts with polars).

    Each row gets one int64 code, its keys' codes (`_order_code`) in mixed radix, the first key most
    significant, so that codes order the rows as the keys do. Codes that tell every key's values apart give
    the order by a stable sort of the codes. Otherwise (a key after one coded by its first bytes only, or
    past the code's capacity, is left out) rows whose codes tie are put in order by their keys' values."""
    if not by or frame.height < KEY_ORDER_MIN_ROWS:
        return None
    combined = np.zeros(frame.height, dtype=np.int64)
    capacity, exact = 1, True
    for name in by:
        coded = _order_code(frame[name], CODE_CAPACITY // capacity)
        if coded is None and name == by[0]:
            return None
        if coded is None:
            exact = False
            break
        code, exact = coded
        span = int(code.max()) + 1
        capacity *= span
        combined = combined * span + code
        if not exact:
            break
    order = _stable_order(combined)
    ties = combined[order[1:]] == combined[order[:-1]]
    if exact or not ties.any():
        return order
    return _order_ties(frame, by, order, ties)


# `np.argsort(kind="stable")` is a timsort for int64, ~3 ms for 60k rows in random order but a tenth of that
# for rows mostly in order already (it merges their runs: a panel listed by unit then day, sorted by day then
# unit, is its units' runs); codes in any other order take the generator's radix sort (~0.25 ms a pass).
PRESORTED_MAX_SHARE = 0.01  # codes with at most this share of descents are mostly in order: the timsort


def _stable_order(codes: np.ndarray) -> np.ndarray:
    """`np.argsort(codes, kind="stable")` of non-negative int64 codes: numpy's timsort for codes mostly in
    order, else `sorting.stable_order` (16-bit radix passes; a packed plain sort for few rows)."""
    if len(codes) < 2 or np.count_nonzero(codes[1:] < codes[:-1]) <= PRESORTED_MAX_SHARE * len(codes):
        return np.argsort(codes, kind="stable")
    return stable_order(codes, len(codes))


def _order_code(series: pl.Series, room: int) -> tuple[np.ndarray, bool] | None:
    """Codes in [0, room), one a row, that never order two values against polars' sort, and whether they are
    exact (equal for equal values only); None for blanks, a type not coded here or codes that need more room."""
    if series.null_count():
        return None
    if series.dtype.is_integer():
        values = series.to_numpy()
        low, high = int(values.min()), int(values.max())
        if high - low >= room:
            return None
        if values.dtype == np.uint64:  # above int64's range: shifted down in its own type first
            return (values - np.uint64(low)).astype(np.int64), True
        return values.astype(np.int64) - low, True
    if series.dtype != pl.String:
        return None
    few = STRING_RANK_MAX_DISTINCT  # (a head with more distinct values than that settles it at less cost)
    if series.head(2 * few).n_unique() <= few and series.n_unique() <= min(few, room):
        # names, regions: each value's rank among the distinct ones
        return series.cast(pl.Enum(series.unique().sort())).to_physical().to_numpy().astype(np.int64), True
    if room < 2 ** (8 * PREFIX_BYTES):
        return None
    return _prefix_code(series), False


def _prefix_code(series: pl.Series) -> np.ndarray:
    """A text's first PREFIX_BYTES bytes as a big-endian number (zeros past its end): texts are ordered by
    their bytes, so a text before another never gets a greater code (but different texts may get equal ones)."""
    n = len(series)
    lengths = series.str.len_bytes().to_numpy().astype(np.int64)
    data = np.frombuffer(series.str.join("").item().encode(), dtype=np.uint8)
    head = np.zeros((n, 8), dtype=np.uint8)  # the leading byte stays 0: the code is below 2**56
    if lengths.min() >= PREFIX_BYTES and lengths.min() == lengths.max():  # one width (UUIDs): a reshape
        head[:, 8 - PREFIX_BYTES :] = data.reshape(n, -1)[:, :PREFIX_BYTES]
    elif len(data):
        at = (np.cumsum(lengths) - lengths)[:, None] + np.arange(PREFIX_BYTES)
        inside = np.arange(PREFIX_BYTES) < lengths[:, None]
        head[:, 8 - PREFIX_BYTES :] = np.where(inside, data[np.minimum(at, len(data) - 1)], 0)
    return head.view(">u8").ravel().astype(np.int64)


def _order_ties(frame: pl.DataFrame, by: list[str], order: np.ndarray, ties: np.ndarray) -> np.ndarray | None:
    """`order` with each run of rows whose codes tie put in order by their keys' values, then their row
    position (as a stable sort leaves them). Python orders integers as polars does, and texts by code point,
    which is their UTF-8 bytes' order, as polars orders them; None for other keys, blanks (Python would not
    order them) or too many tied rows."""
    keys_plain = all(
        (frame[c].dtype.is_integer() or frame[c].dtype == pl.String) and not frame[c].null_count() for c in by
    )
    if not keys_plain:
        return None
    tied = np.zeros(len(order), dtype=bool)  # positions in a run of equal codes
    tied[:-1] |= ties
    tied[1:] |= ties
    positions = np.flatnonzero(tied)
    if len(positions) > TIED_ROWS_MAX:
        return None
    rows = order[positions]
    keys = list(zip(*(frame[c][rows].to_list() for c in by), rows.tolist(), strict=True))  # row last: stable
    ends = np.flatnonzero(~ties[positions[:-1]]) + 1  # where a run ends among the tied positions
    order = order.copy()
    for start, stop in zip([0, *ends.tolist()], [*ends.tolist(), len(positions)], strict=True):
        order[positions[start:stop]] = [key[-1] for key in sorted(keys[start:stop])]
    return order


def _in_order(frame: pl.DataFrame, by: list[str]) -> bool:
    """Whether the rows are already ascending by the keys `by`, in turn; decided only for integer keys
    without blanks (False otherwise, and the caller sorts)."""
    keys = [frame[c] for c in by]
    if not by or not all(k.dtype.is_integer() and k.null_count() == 0 for k in keys):
        return False
    tied = np.ones(max(frame.height - 1, 0), dtype=bool)  # neighbouring rows equal on every key so far
    for key in keys:
        values = key.to_numpy()
        before, after = values[:-1], values[1:]
        if (tied & (after < before)).any():
            return False
        tied &= after == before
    return True


def _table_view(d: Deliverable, contract: Contract, state: CanonicalState) -> pl.DataFrame:
    # Columns that may switch unit stay floats even when whole, so a switch to a finer unit can be recorded.
    drifting = {v.name for v in contract.variables if v.alt_unit is not None} | {contract.measures.amount.name}
    base = BASE_TABLE[d.grain]
    keep = _reported_rows(d, contract, state)
    cols = {}
    for c in d.columns:
        table, column = c.source.split(".", 1)
        key = shown(d, c)
        if key is not None:  # the entity's key as this system shows it
            values = _take(state.column(*key), state.column(base, column)[keep] - 1)
        elif table == "units" and base != "units":  # a unit attribute looked up through the row's unit
            values = _take(state.column("units", column), state.column(base, "unit_id")[keep] - 1)
        else:
            values = _take(state.column(table, column), keep)
        if isinstance(values, np.ndarray) and values.dtype.kind == "f" and c.decimals is not None:
            values = np.round(values, c.decimals)
            if c.decimals == 0 and column not in drifting and np.isfinite(values).all():
                values = values.astype(np.int64)  # whole numbers are reported as integers
        cols[c.name] = values
    return _frame_nan_to_null(cols)


def _frame_nan_to_null(columns: dict[str, np.ndarray | pl.Series]) -> pl.DataFrame:
    """`pl.DataFrame(columns, nan_to_null=True)`. Given three or more long float arrays, polars converts them
    in a thread pool it starts and joins for that one frame, at more CPU than the conversions cost: each
    float array is made here into the series polars would make of it, so no pool is started."""
    series = {
        name: pl.Series(name, values, nan_to_null=True)
        if isinstance(values, np.ndarray) and values.dtype.kind == "f"
        else values
        for name, values in columns.items()
    }
    return pl.DataFrame(series, nan_to_null=True)


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray | pl.Series:
    """values[rows]; text is gathered by polars from a series of the table's own rows, since a numpy array of
    Python strings costs ~20-60 ns a row to become a frame's column: a unit's name on each of its events, and
    a frozen column's texts (`text_series`, made once for the world's files and its canonical table)."""
    if values.dtype == object and len(rows):
        series = text_series(values)
        if series is None and len(rows) > len(values):
            series = pl.Series(values)
        if series is not None and series.dtype == pl.String:
            return _at(series, rows)  # gathered by numpy's index, without the query `gather` runs
    return values[rows]


# `pl.Series(values)` of each frozen text column, by the array's id while it lives (the arrays themselves are
# not hashable). The projection gathers its files' texts from it and the write stage writes the canonical
# table from it: an event log's UUIDs cost 1.2 ms a conversion, once instead of once a file and once more.
_TEXT_SERIES: dict[int, tuple[weakref.ref, pl.Series | None]] = {}


def text_series(values: np.ndarray) -> pl.Series | None:
    """`pl.Series(values)` of a frozen (read-only) object array of texts without a blank, made once per array;
    None for any other array (a blank would make a subset of blanks a column of another type than the plain
    way's, and a writable array may change)."""
    if values.dtype != object or values.flags.writeable or values.ndim != 1:
        return None
    key = id(values)
    cached = _TEXT_SERIES.get(key)
    if cached is not None and cached[0]() is values:
        return cached[1]
    try:
        series: pl.Series | None = pl.Series(values)  # strict: a value not a text raises, not converted
    except (TypeError, ValueError, pl.exceptions.PolarsError):
        series = None
    if series is not None and (series.dtype != pl.String or series.null_count()):
        series = None  # remembered too: not converted again
    _TEXT_SERIES[key] = (weakref.ref(values, lambda _, key=key: _TEXT_SERIES.pop(key, None)), series)
    return series


def _reported_rows(d: Deliverable, contract: Contract, state: CanonicalState) -> np.ndarray:
    """Which rows of the base table the file reports: open unit-days, or events whose survey was answered."""
    base = BASE_TABLE[d.grain]
    n = len(state.column(base, "unit_id" if base in ("panel", "events", "units") else "party_id"))
    if d.grain == "panel":
        return np.flatnonzero(state.column("panel", "open").astype(bool))
    if d.grain == "event_detail":
        surveys = [c.source.split(".", 1)[1] for c in d.columns if c.source.split(".", 1)[1] in _scales(contract)]
        if surveys:
            answered = np.zeros(n, dtype=bool)
            for name in surveys:
                answered |= state.column("events", f"responded_{name}").astype(bool)
            return np.flatnonzero(answered)
    return np.arange(n)


def _scales(contract: Contract) -> set[str]:
    return {v.name for v in contract.variables if v.observe == "scale"}


def _schedule_view(d: Deliverable, contract: Contract, state: CanonicalState) -> pl.DataFrame:
    """Policy levers as a change log: each unit's initial value and every later change."""
    periods = contract.timeline.periods
    frames = []
    key = shown(d, d.columns[0])
    assert key is not None
    shown_keys = state.column(*key)
    for f in d.fields:
        v = contract.variable(f.source.split(".", 1)[1])
        values = np.round(state.column("panel", v.name).reshape(-1, periods), v.decimals)
        changed = np.ones_like(values, dtype=bool)
        changed[:, 1:] = values[:, 1:] != values[:, :-1]
        unit, day = np.nonzero(changed)
        frames.append(
            pl.DataFrame(
                {
                    d.columns[0].name: shown_keys[unit],
                    d.columns[1].name: [f.name] * len(unit),
                    d.columns[2].name: day.astype(np.int64),
                    d.columns[3].name: values[unit, day].astype(float),
                }
            )
        )
    return pl.concat(frames)


UNIT_SWITCH_WINDOW = (0.3, 0.7)  # a system migrates units somewhere in the middle 40% of the timeline
EVENT_RENAME_WINDOW = (0.55, 0.8)  # the event log's release renames a column in the second half
FEEDBACK_RENAME_WINDOW = (0.5, 0.8)  # the feedback app's release renames a field in the second half
PANEL_MISSING_SHARE = 0.7  # daily files lose fewer values than event logs
LATE_POSTING_RATE = 0.01  # 1% of the first daily file's rows are posted under the next day


def plan_defects(d: Deliverable, contract: Contract, rng: np.random.Generator, s: DefectSettings) -> list[Defect]:
    """Which defects hit this file: every world gets all six kinds somewhere (rng consumed in this order).

    The units master is the reference (clean names and codes); other systems spell names their own way.
    Change logs keep exact effective dates: a late entry would shift every lag estimated from them.
    """
    if s.scale <= 0:
        return []
    planner = _DefectPlanner(d, contract, rng, s)
    defects = planner.names()
    match d.grain:
        case "events":
            defects += planner.event_log()
        case "panel":
            defects += planner.daily_file()
        case "event_detail":
            defects += planner.feedback_file()
    return defects


class _DefectPlanner:
    def __init__(self, d: Deliverable, contract: Contract, rng: np.random.Generator, s: DefectSettings):
        self.d, self.contract, self.rng, self.s = d, contract, rng, s
        self.variables = {v.name: v for v in contract.variables}
        self.value_cols = [c for c in d.columns if c.source.split(".", 1)[1] in self.variables]

    def names(self) -> list[Defect]:
        """Unit names as this system spells them: in an event log's name column, or where names are keys."""
        spelled = [
            c for c in self.d.columns if c.format == "name" or (self.d.grain == "events" and c.source == "units.name")
        ]
        return [SpellingVariants(c.name, self.s.rate(self.s.spelling_rate)) for c in spelled]

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
        if self.d is _first_panel(self.contract):
            switches = tuple(sorted({x.from_day - 1 for x in defects if isinstance(x, UnitDrift)}))
            defects.append(ReportingDelay(date, s.rate(LATE_POSTING_RATE), 1, avoid=switches))
        return defects

    def feedback_file(self) -> list[Defect]:
        rng, s = self.rng, self.s
        defects: list[Defect] = [MissingValues(c.name, s.rate(s.missing_rate)) for c in self.value_cols]
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
        return frame.with_columns((pl.col(d.columns[1].name) // 86400).alias(DAY))
    return frame


def _render_key(column: pl.Expr, template: str, prefix: str, bounds: tuple[int, int] | None = None) -> pl.Expr:
    """The key template's text of an integer column; `bounds`, the column's (min, max) where known."""
    fields = {"P": prefix.upper(), "p": prefix.lower(), "PP": (prefix.upper() * 2)[:3]}
    parts: list[pl.Expr] = []
    for token in re.split(r"(\{[^}]+\})", template):
        if not token:
            continue
        if token.startswith("{n"):
            width = re.search(r":0(\d+)d", token)
            top = 10 ** int(width.group(1)) if width else 0
            if width and bounds is not None and 0 <= bounds[0] and bounds[1] < top:
                # n + 10**w has w + 1 digits, a leading 1 and then n zero-padded: half zfill's cost
                parts.append((column + top).cast(pl.String).str.slice(1))
            else:
                text = column.cast(pl.String)
                parts.append(text.str.zfill(int(width.group(1))) if width else text)
        elif token.startswith("{"):
            parts.append(pl.lit(fields[token[1:-1]]))
        else:
            parts.append(pl.lit(token))
    return pl.concat_str(parts)


# Rendering a key or a date as text costs 100-250 ns a row, but a file repeats few distinct days, units and
# parties: each is rendered once and the rows look their text up, by position in the column's [min, max]
# span where that is dense (days), else by a join on the distinct values (codes spread over a wide range).
# A lookup is used when it renders at most this share of the rows (an event log's own ids, one a row, are
# rendered row by row).
LOOKUP_MAX_SHARE = 0.5
SECONDS_PER_DAY = 86400


def _via_lookup(values: pl.Series, text: Callable[[pl.Expr], pl.Expr], repeats: bool = True) -> pl.Series:
    """`text` of every value of an integer column, computed once per distinct value where that pays
    (`repeats=False`: a column of ids that are one a row, not worth looking for repeats in)."""

    def rendered(s: pl.Series) -> pl.Series:
        return s.to_frame().select(text(pl.col(values.name)).alias("@text")).to_series()

    lo, hi = values.min(), values.max()
    if not values.dtype.is_integer() or lo is None:
        return rendered(values)
    if hi - lo + 1 <= LOOKUP_MAX_SHARE * len(values):
        span = pl.int_range(lo, hi + 1, dtype=values.dtype, eager=True).alias(values.name)
        return rendered(span).gather(values - lo)  # a null value gathers a null, as rendering it gives
    distinct = values.unique(maintain_order=True) if repeats else values  # (keeping order is cheaper in polars)
    if len(distinct) > LOOKUP_MAX_SHARE * len(values):
        return rendered(values)
    lookup = pl.DataFrame([distinct, rendered(distinct)])
    return values.to_frame().join(lookup, on=values.name, how="left", maintain_order="left")["@text"]


@functools.cache
def _times_of_day() -> pl.Series:
    """' HH:MM:SS' of every second of a day (built once per process)."""
    seconds = pl.int_range(0, SECONDS_PER_DAY, eager=True).to_frame("s")
    stamp = pl.lit(dt.datetime(2000, 1, 1)) + pl.duration(seconds=pl.col("s"))
    return seconds.select(stamp.dt.strftime(TIME_SUFFIX)).to_series()


def _render_column(values: pl.Series, c: DeliveredColumn, start: dt.date, prefixes: dict, native: bool) -> pl.Series:
    """One key, date or time column in the system's conventions (native types for parquet and xlsx)."""
    column = c.source.split(".", 1)[1]
    key_template = template(c)
    if key_template is not None:
        entity = {"events.event_id": "events"}.get(c.source, "parties" if "party" in column else "units")
        bounds = (
            (values.min(), values.max()) if values.dtype.is_integer() and values.null_count() < len(values) else None
        )
        glued = _glued_key(values, key_template, prefixes[entity], bounds)
        if glued is not None:
            return glued
        key = lambda col: _render_key(col, key_template, prefixes[entity], bounds)  # noqa: E731
        return _via_lookup(values, key, repeats=entity != "events")
    if column.endswith("time") and native:
        stamp = pl.lit(dt.datetime.combine(start, dt.time())) + pl.duration(seconds=pl.col(values.name))
        return values.to_frame().select(stamp).to_series()
    if column.endswith("time"):  # the date of its day, then the time of day: both looked up
        glued = _glued_time(values, start, STRFTIME[c.format])
        if glued is not None:
            return glued
        day = _via_lookup(values // SECONDS_PER_DAY, lambda col: _day_text(col, start, STRFTIME[c.format]))
        return day + _times_of_day().gather(values % SECONDS_PER_DAY)  # polars' // and % floor, as dates do
    if native:
        date = pl.lit(start) + pl.duration(days=pl.col(values.name))
        return values.to_frame().select(date.cast(pl.Date)).to_series()
    return _via_lookup(values, lambda col: _day_text(col, start, STRFTIME[c.format]))


# A key or time column whose texts all have one byte length (zero-padded numbers, times after a date in one
# style) is rendered in numpy: each row's text is parts side by side, each part a fixed-width text taken from
# a small table by the row's index into it (the digits of a number four at a time, the date of its day, the
# time of day). Texts of up to 12 bytes become Arrow string views, which hold them whole in their 16 bytes,
# each part's bytes shifted into place as little-endian words; longer ones are laid out in one record a row
# under an Arrow string array. ~1 ms against 2-4 ms for polars' string expressions on 60k rows (mostly each
# row's own text, unlike days).
DIGIT_GROUP = 4  # a number's digits come from the table of every group of up to this many digits
MAX_DIGITS = 18  # zero-padded widths beyond int64's digits are rendered by polars
INLINE_BYTES = 12  # an Arrow string view holds a text of up to 12 bytes after its 4-byte length


@dataclass(frozen=True)
class _Texts:
    """Texts of one byte length (`width`): each one as a void item of that width, and as little-endian
    words (its first 8 bytes, then its next 8, zeros past its end)."""

    width: int
    items: np.ndarray  # 1-d, of void items
    words: tuple[np.ndarray, ...]  # ceil(width / 8) uint64 arrays


Parts = list[tuple[_Texts, np.ndarray | None]]  # a table, and each row's index into it (None: its one text)


def _glued(name: str, parts: Parts) -> pl.Series:
    """The texts made of `parts` side by side, as a polars text column."""
    n = next(len(rows) for _, rows in parts if rows is not None)
    width = sum(table.width for table, _ in parts)
    if width <= INLINE_BYTES and hasattr(pa, "string_view"):  # (Arrow string views: pyarrow 16 on)
        return _glued_views(name, parts, n, width)
    layout = np.dtype([(f"p{k}", table.items.dtype) for k, (table, _) in enumerate(parts)])
    records = np.empty(n, dtype=layout)
    for k, (table, rows) in enumerate(parts):
        records[f"p{k}"] = table.items[0] if rows is None else np.take(table.items, rows)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(records)]
    return pl.Series(name, pa.Array.from_buffers(pa.large_string(), n, buffers))


def _glued_views(name: str, parts: Parts, n: int, width: int) -> pl.Series:
    """`_glued` for texts of `width` <= 12 bytes, as Arrow string views: two little-endian words a row, the
    length and the text's first 4 bytes, then its next 8 (zeros past its end)."""
    words = [np.full(n, width, dtype=np.uint64), np.zeros(n, dtype=np.uint64)]
    at = 4  # the view's byte where the part goes
    for table, rows in parts:
        for j, column in enumerate(table.words):
            value = column[:1] if rows is None else np.take(column, rows)
            word, shift = divmod(at + 8 * j, 8)
            words[word] |= value << np.uint64(8 * shift)  # bits shifted past the word are dropped...
            if shift and word == 0:
                words[1] |= value >> np.uint64(64 - 8 * shift)  # ...and carried into the next
        at += table.width
    views = np.empty((n, 2), dtype=np.uint64)
    views[:, 0], views[:, 1] = words
    return pl.Series(name, pa.Array.from_buffers(pa.string_view(), n, [None, pa.py_buffer(views)]))


def _text_table(texts: pl.Series) -> _Texts | None:
    """Texts of one byte length as a `_Texts` (None for blanks, no texts, or texts of different lengths)."""
    lengths = texts.str.len_bytes()
    if not len(texts) or texts.null_count() or lengths.min() != lengths.max() or lengths[0] == 0:
        return None
    width = int(lengths[0])
    data = np.frombuffer(texts.str.join("").item().encode(), dtype=np.uint8).reshape(len(texts), width)
    padded = np.zeros((len(texts), -(-width // 8) * 8), dtype=np.uint8)
    padded[:, :width] = data
    words = tuple(np.ascontiguousarray(column) for column in padded.view("<u8").T)
    items = data.view(f"V{width}").ravel()
    for array in (items, *words):  # the digit and time tables are cached for the process: nobody may write them
        array.flags.writeable = False
    return _Texts(width, items, words)


@functools.cache
def _digit_table(digits: int) -> _Texts:
    """'0..0' to '9..9': every number below 10**digits, zero-padded to `digits` characters."""
    table = _text_table(pl.Series([f"{k:0{digits}d}" for k in range(10**digits)], dtype=pl.String))
    assert table is not None
    return table


@functools.cache
def _time_table() -> _Texts:
    """' HH:MM:SS' of every second of a day, as `_times_of_day` gives them."""
    table = _text_table(_times_of_day())
    assert table is not None
    return table


def _digit_parts(numbers: np.ndarray, digits: int) -> Parts:
    """Numbers below 10**digits zero-padded to `digits` characters, as `_glued` parts: groups of up to
    DIGIT_GROUP digits, split off from the right by one divmod each."""
    groups: Parts = []
    rest = numbers
    while digits > 0:
        size = min(DIGIT_GROUP, digits)
        rest, group = np.divmod(rest, 10**size) if digits > size else (rest, rest)
        groups.append((_digit_table(size), group))
        digits -= size
    return groups[::-1]


def _glued_key(values: pl.Series, key_template: str, prefix: str, bounds: tuple | None) -> pl.Series | None:
    """`_render_key`'s texts of an integer column without blanks whose numbers all come out with one number
    of digits (all below 10**width, zero-padded to it, or all of one length beyond it), built by `_glued`;
    None otherwise, or where `_via_lookup` renders few numbers of a narrow range once (a file's units)."""
    tokens = [t for t in re.split(r"(\{[^}]+\})", key_template) if t]
    numbered = [t for t in tokens if t.startswith("{n")]
    fields = {"P": prefix.upper(), "p": prefix.lower(), "PP": (prefix.upper() * 2)[:3]}
    if bounds is None or values.null_count() or len(numbered) != 1 or bounds[0] < 0:
        return None
    if any(t.startswith("{") and not t.startswith("{n") and t[1:-1] not in fields for t in tokens):
        return None
    if bounds[1] - bounds[0] + 1 <= LOOKUP_MAX_SHARE * len(values):
        return None
    padded = re.search(r":0(\d+)d", numbered[0])  # as `_render_key` reads the width; no width: plain digits
    width = int(padded.group(1)) if padded else 1
    if width == 0:  # `{n:00d}`: the plain path's own reading of it (`_render_key`) decides
        return None
    low_digits, high_digits = len(str(bounds[0])), len(str(bounds[1]))
    if high_digits > width and low_digits != high_digits:
        return None  # some numbers padded, or longer than others: texts of several lengths
    digits = max(width, high_digits)
    if digits > MAX_DIGITS:
        return None
    numbers = values.to_numpy().astype(np.int64)
    parts: Parts = []
    for token in tokens:
        if token.startswith("{n"):
            parts += _digit_parts(numbers, digits)
        else:
            text = fields[token[1:-1]] if token.startswith("{") else token
            table = _text_table(pl.Series([text], dtype=pl.String))
            if table is None:  # an empty field (a pack's empty prefix): no bytes to glue, the plain path
                return None
            parts.append((table, None))
    return _glued(values.name, parts)


def _glued_time(values: pl.Series, start: dt.date, style: str) -> pl.Series | None:
    """The date of each second's day in `style`, then its time of day, built by `_glued` when every date
    has one length and the days span at most as many as the rows; None otherwise (or for blanks)."""
    if not values.dtype.is_integer() or values.null_count() or not len(values):
        return None
    if max(abs(values.min()), abs(values.max())) >= 2**62:  # (int64 holds the seconds: taken as they are)
        return None
    seconds = values.to_numpy().astype(np.int64)
    days = seconds // SECONDS_PER_DAY  # numpy's // floors, as polars' does
    first, last = int(days.min()), int(days.max())
    if last - first + 1 > len(values):
        return None
    span = pl.int_range(first, last + 1, dtype=pl.Int64, eager=True).alias("day")
    dates = _text_table(span.to_frame().select(_day_text(pl.col("day"), start, style)).to_series())
    if dates is None:
        return None
    return _glued(values.name, [(dates, days - first), (_time_table(), seconds - days * SECONDS_PER_DAY)])


def _day_text(col: pl.Expr, start: dt.date, style: str) -> pl.Expr:
    return (pl.lit(start) + pl.duration(days=col)).cast(pl.Date).dt.strftime(style)


def render(frame: pl.DataFrame, d: Deliverable, contract: Contract) -> pl.DataFrame:
    """Keys in the system's template, days as dates in its style (native types for parquet and xlsx)."""
    start = dt.date.fromisoformat(contract.timeline.start)
    prefixes = {e.table: e.prefix for e in contract.entities}
    native = d.format in {"parquet", "xlsx"}
    columns = []  # the file's columns in its order, then those a schema drift added; a frame of them is free
    for c in d.columns:
        if c.name not in frame.columns:
            continue
        if c.format is None or c.format in ("name", "uuid"):
            columns.append(frame[c.name])
        else:
            columns.append(_render_column(frame[c.name], c, start, prefixes, native).alias(c.name))
    named = {c.name for c in d.columns}
    return pl.DataFrame(columns + [frame[c] for c in frame.columns if c not in named])

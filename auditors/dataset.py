"""Analysis tables built from a world: from X (the truth), or from E alone, cleaned or raw.

`from_canonical` reads X. `from_observed` reads only the observed files and the contract's data dictionary
(which column of which file holds which key, date or variable) and, with `clean=True`, does what a careful
analyst would: read keys by their digits, match CRM names to the order system's spelling, merge columns
renamed mid-year, drop re-sent duplicates and detect and undo unit switches. It never reads
projection.json. With `clean=False` it does only the parsing, as a hurried analyst would.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from auditors.checks import read_parsed
from auditors.worldio import World, normalise
from contracts.model import Contract, Deliverable

# Conversion factors an analyst recognises when a column's level jumps, by what the data dictionary says
# the column is measured in: money goes to cents, data and energy to a thousandth, weight to pounds or
# grams, time to the next smaller unit. A measure in other units (mm, shares, counts) has none.
FACTORS_BY_UNIT = (
    (("usd", "eur", "gbp", "dollar", "euro", "pound", "$", "chf", "cad", "aud"), (100.0,)),
    (("gb", "mb", "tb", "kwh", "mwh", "wh", "litre", "liter", "m3"), (1000.0,)),
    (("kg", "tonne", "ton"), (2.20462, 1000.0)),
    (("hour", "minute", "min", "second"), (60.0,)),
)
# Unit-switch detection (repair_unit_drift), as an analyst would do it by eye on a daily-median chart:
MIN_DAYS = 20  # fewer daily medians than this cannot show a switch
EDGE_DAYS = 7  # a switch is looked for at least a week from either end
LOCAL_DAYS = 21  # and judged on the three weeks either side of it
DENSE_SHARE = 0.5  # a daily column non-zero at least half the time is checked report to report
PERSIST_DAYS = 4  # a switch holds for the next days' reports; a one-day dip (a holiday) does not
SETTLED_DAYS = 28  # and for the next month's: a wet spell lifts a level for days, not for a month
ADJACENT_GAP_DAYS = 7  # consecutive reports of a unit at most a week apart (closed days in between)
WHOLE_BIAS = 0.1  # what a year's real level changes add to a step estimated from whole segments (log units)
MIN_JUMP = 1.8  # a switch multiplies the level by at least 1.8 (conversion factors are 2.2 or more)
SHARPNESS = 0.3  # the week-on-week step must carry the whole jump (within 30%): switches are not gradual
FACTOR_MATCH = 0.25  # the step must be within 0.25 log-units (or 3 standard errors) of a known factor
MIN_UNITS_FOR_STEP = 5  # unit-by-unit steps need a handful of units with values either side
FACTOR_SHARE = 0.1  # or within a tenth of the factor's own log size (x100 accepted from x63 to x158)
SWITCH_CANDIDATES = 3  # report-to-report steps naming a factor that are tried, largest first
FACTOR_MARGIN = 0.75  # and the factor matched must be clearly nearer than the next one
UNIT_WINDOW_DAYS = 14  # each unit's level is compared two weeks before and after the switch
UNIT_STEP_SHARE = 0.5  # a unit switches if its level moves at least half the factor, in its direction
UNITS_SWITCHING = 0.8  # a system migration moves at least 80% of units on the same day
SMALL_FACTOR = 10  # a factor under this (kg to lb) is a step a real shared cause can also take in a day
SCATTER_ALLOWANCE = 2.25  # a conversion's day scatters units' steps at most this many times an ordinary day's
SCATTER_SHARE = 0.4  # the units whose steps a day's scatter spans (the closest together: others may be hit)
MIN_SCATTER = 0.01  # log units: rounding alone scatters steps this much (values repeating day to day do not)
SWITCH_REPORTS = 2  # a switch moves the units between the two reports either side of it, even one blurred
SUFFIXES = re.compile(r"\b(inc|llc|ltd|plc|group|co|and sons|corp)\b\.?")


@dataclass
class Dataset:
    """units (unit_id, capacity, unit variables), panel (unit_id x day grid: `open` where the unit was seen
    operating, variables blank where not reported) and events (one row per event, survey answers blank where
    the customer did not answer)."""

    units: pl.DataFrame
    panel: pl.DataFrame
    events: pl.DataFrame
    capacity: str
    # What analyses of this dataset derive once and share (auditors.estimate: sorted tables, aligned panels).
    cache: dict = field(default_factory=dict, repr=False, compare=False)


def from_canonical(world: World) -> Dataset:
    """X as an analyst would see it if every file were perfect: open unit-days, answered surveys."""
    contract = world.contract
    assert contract is not None
    t = world.canonical
    capacity = _capacity_name(contract)
    unit_vars = [v.name for v in contract.variables if v.grain == "unit"]
    event_vars = [v.name for v in contract.variables if v.grain == "event"]
    panel_vars = [v.name for v in contract.variables if v.grain == "panel"]
    amount = _amount_name(contract)
    surveys = {v.name for v in contract.variables if v.observe == "scale"}
    answered = [
        pl.when(pl.col(f"responded_{v}") == 1).then(pl.col(v)).otherwise(None).alias(v) if v in surveys else pl.col(v)
        for v in event_vars
    ]
    events = t["events"].select("event_id", "unit_id", "day", amount, *answered)
    is_open = pl.col("open") == 1
    panel = t["panel"].select(
        "unit_id",
        "day",
        is_open.cast(pl.Int8).alias("open"),
        *[pl.when(is_open).then(pl.col(v)).alias(v) for v in panel_vars],
    )
    return Dataset(
        t["units"].select("unit_id", capacity, *unit_vars),
        _with_event_means(panel, events, event_vars),
        events,
        capacity,
    )


def _capacity_name(contract: Contract) -> str:
    return contract.measures.capacity.name


def _amount_name(contract: Contract) -> str:
    return contract.measures.amount.name


def _with_event_means(
    panel: pl.DataFrame,
    events: pl.DataFrame,
    event_vars: list[str],
    events_cells: tuple[Grid, np.ndarray] | None = None,
) -> pl.DataFrame:
    """The panel with each unit-day's mean of each event variable (`group_means` joined on). `events_cells`: the
    events' cells in a grid (open_grid's), used where the panel still is that grid."""
    if not event_vars:
        return panel
    grid = _as_grid(panel)
    if (
        grid is None
        or events.schema.get("unit_id") != pl.Int64
        or events.schema.get("day") != pl.Int64
        or any(c in panel.columns for c in event_vars)  # a join would suffix them
    ):
        return panel.join(group_means(events, event_vars), on=["unit_id", "day"], how="left", maintain_order="left")
    # The panel is the whole unit x day grid in order: each event's cell is its row, and each cell's mean is
    # summed over its events in row order by bincount, as `group_means` sums each group (the same floats).
    unit_ids, periods = grid
    known = events_cells is not None and events_cells[0][1] == periods and np.array_equal(events_cells[0][0], unit_ids)
    at = events_cells[1] if known else grid_cells(events, unit_ids, periods)
    keep = at >= 0
    every = bool(keep.all())  # every event in the grid (the usual case): no rows to leave out
    cell = at if every else at[keep]
    events_in_cell = None  # each cell's count of events: the count of a column with a value on every event
    means = []
    for column in event_vars:
        values = events[column].cast(pl.Float64).to_numpy()
        values = values if every else values[keep]
        present = np.isfinite(values)
        if present.all():  # the same whole numbers as the weighted count, in one pass shared by such columns
            if events_in_cell is None:
                events_in_cell = np.bincount(cell, minlength=panel.height).astype(np.float64)
            count, total = events_in_cell, np.bincount(cell, weights=values, minlength=panel.height)
        else:
            count = np.bincount(cell, weights=present.astype(float), minlength=panel.height)
            total = np.bincount(cell, weights=np.where(present, values, 0.0), minlength=panel.height)
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        # A cell without a value is null (`fill_nan(None)` of the plain way: the only NaN are those cells).
        means.append(pl.Series(column, mean, dtype=pl.Float64, nan_to_null=True))
    return panel.with_columns(means)


def _as_grid(panel: pl.DataFrame) -> tuple[np.ndarray, int] | None:
    """(sorted unit ids, periods) if the panel's rows are exactly every unit's days 0..periods-1 in unit, day
    order with Int64 keys (the grid `grid_cells` indexes), else None."""
    if panel.schema.get("unit_id") != pl.Int64 or panel.schema.get("day") != pl.Int64 or panel.height == 0:
        return None
    if panel["unit_id"].null_count() or panel["day"].null_count():
        return None
    unit, day = panel["unit_id"].to_numpy(), panel["day"].to_numpy()
    periods = int(np.argmax(unit != unit[0])) or len(unit)  # the first unit's run of rows
    if panel.height % periods:
        return None
    unit_ids = unit[::periods]
    if np.any(unit_ids[1:] <= unit_ids[:-1]):  # compared, never subtracted: a difference can wrap around
        return None
    if not (
        np.array_equal(unit, np.repeat(unit_ids, periods))
        and np.array_equal(day, np.tile(np.arange(periods), len(unit_ids)))
    ):
        return None
    return unit_ids, periods


def group_means(events: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Each unit-day's mean of each column, summed in row order.

    Polars adds a group's values in whatever order its threads meet them, so a mean's last bits vary from
    run to run, and a scan over that mean can then flip between two near-equal fits: the audit would not be
    reproducible. numpy's bincount adds in row order, every time.
    """
    keyed = events.filter(pl.col("unit_id").is_not_null() & pl.col("day").is_not_null())
    unit, day = keyed["unit_id"].to_numpy(), keyed["day"].to_numpy()
    first_day = int(day.min()) if len(day) else 0
    span = int(day.max()) - first_day + 1 if len(day) else 1
    groups, index = np.unique(unit.astype(np.int64) * span + (day - first_day), return_inverse=True)
    index = index.reshape(-1)
    out = {"unit_id": groups // span, "day": groups % span + first_day}
    for column in columns:
        values = keyed[column].cast(pl.Float64).to_numpy()
        present = np.isfinite(values)
        count = np.bincount(index, weights=present.astype(float), minlength=len(groups))
        total = np.bincount(index, weights=np.where(present, values, 0.0), minlength=len(groups))
        out[column] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    frame = pl.DataFrame(out, schema={"unit_id": pl.Int64, "day": pl.Int64, **{c: pl.Float64 for c in columns}})
    return frame.with_columns(pl.col(c).fill_nan(None) for c in columns)


# --- from E -----------------------------------------------------------------------------------------


def _read_all(world: World, clean: bool) -> dict[str, list[tuple[Deliverable, pl.DataFrame]]]:
    """Every data file parsed, its columns named by what they hold (the contract's dictionary)."""
    by_grain: dict[str, list[tuple[Deliverable, pl.DataFrame]]] = {}
    for d in world.contract.deliverables:
        if d.grain == "dictionary":
            continue
        frame = read_parsed(world, d)
        if clean:
            frame = merge_renamed_columns(frame, d)
        else:
            frame = _selected(frame, [c.name for c in d.columns if c.name in frame.columns])
        rename = {c.name: _canonical_name(d, c) for c in d.columns if c.name in frame.columns}
        by_grain.setdefault(d.grain, []).append((d, _renamed(frame, rename)))
    return by_grain


def _selected(frame: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """frame.select(names) for distinct names it has, as a frame of those columns (no query to plan); the
    select itself otherwise (its error, if any, is the one reported)."""
    if len(set(names)) != len(names) or not set(names) <= set(frame.columns):
        return frame.select(names)
    return pl.DataFrame([frame.get_column(name) for name in names])


def _renamed(frame: pl.DataFrame, mapping: dict[str, str]) -> pl.DataFrame:
    """frame.rename(mapping) by setting the names of a (shallow) copy, where the new names are distinct; the
    rename itself otherwise."""
    names = [mapping.get(name, name) for name in frame.columns]
    if len(set(names)) != len(names) or not set(mapping) <= set(frame.columns):
        return frame.rename(mapping)
    renamed = frame.clone()  # shares the columns' data
    renamed.columns = names
    return renamed


def _canonical_name(d: Deliverable, c) -> str:
    column = c.source.split(".", 1)[1].lstrip("@")
    return "time" if column in ("feedback_time", "completion_time") else column


class UnitKeys:
    """Resolves how each system names a unit (master code, its own id, the name) to the master code."""

    def __init__(self, master: pl.DataFrame, d: Deliverable, clean: bool):
        self.clean = clean
        self.codes = set(master["unit_id"].drop_nulls().to_list())
        mapped = [c.source.split(".", 1)[1] for c in d.columns if (c.format or "").startswith("local:")]
        self.local = {
            column.removeprefix("local_"): dict(zip(master[column].to_list(), master["unit_id"].to_list(), strict=True))
            for column in mapped
        }
        self.mapping_columns = set(mapped)
        names = master["name"].to_list()
        self.by_name = dict(zip(names, master["unit_id"].to_list(), strict=True))
        self.by_clean = {clean_name(str(n)): uid for n, uid in self.by_name.items()}

    def resolve(self, frame: pl.DataFrame, d: Deliverable, column: str = "unit_id") -> pl.DataFrame:
        """The frame with its unit column as master codes (unresolvable rows keep a null)."""
        c = next((x for x in d.columns if x.source.endswith(".unit_id")), None)
        if c is None or column not in frame.columns:
            return frame
        fmt = c.format or ""
        if fmt == "name":
            names = frame[column].unique().drop_nulls().to_list()
            codes = {n: self._by_name(n) for n in names}  # once per distinct name: fuzzy matching is slow
            return frame.with_columns(pl.col(column).replace_strict(codes, default=None, return_dtype=pl.Int64))
        if fmt.startswith("local:") and self.clean:  # an analyst maps a system's own ids through the master
            mapping = self.local.get(d.system, {})
            return frame.with_columns(pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.Int64))
        return frame  # codes (a hurried analyst also reads a system's own ids as codes)

    def _by_name(self, name) -> int | None:
        if name is None:
            return None
        if name in self.by_name or not self.clean:
            return self.by_name.get(name)
        key = clean_name(str(name))
        if key not in self.by_clean:
            close = difflib.get_close_matches(key, list(self.by_clean), n=1, cutoff=NAME_MATCH_CUTOFF)
            key = close[0] if close else key
        return self.by_clean.get(key)


NAME_MATCH_CUTOFF = 0.75  # how close a misspelled name must be to a master name to be taken as it


def from_observed(world: World, clean: bool = True) -> Dataset:
    """The analysis tables from E alone: cleaned as a careful analyst would (`clean`) or only parsed."""
    contract = world.contract
    assert contract is not None
    by_grain = _read_all(world, clean)
    master_d, master = by_grain["units"][0]
    keys = UnitKeys(master, master_d, clean)
    units_of = {v.name: v.unit for v in contract.variables}
    units_of[_amount_name(contract)] = contract.measures.amount.unit
    events = _observed_events(contract, by_grain, keys, units_of, clean)
    skip = {"unit_id", "name", "region"} | keys.mapping_columns
    units = master.select("unit_id", *[c for c in master.columns if c not in skip])
    units = units.filter(pl.col("unit_id").is_not_null()).unique(subset=["unit_id"], keep="first", maintain_order=True)
    panel, events_cells = _observed_panel(contract, by_grain, keys, units_of, clean, units, events)
    if clean:
        panel = _shared_series_consensus(contract, panel, master)
    event_vars = [v.name for v in contract.variables if v.grain == "event" and v.name in events.columns]
    panel = _with_event_means(panel, events, event_vars, events_cells)
    return Dataset(units, panel, events, _capacity_name(contract))


def _observed_events(contract: Contract, by_grain: dict, keys: UnitKeys, units_of: dict, clean: bool) -> pl.DataFrame:
    """The event log with every event-keyed file joined on: de-duplicated and unit-repaired when cleaning."""
    amount = _amount_name(contract)
    event_vars = [v.name for v in contract.variables if v.grain == "event"]
    events_d, events = by_grain["events"][0]
    events = keys.resolve(events, events_d).with_columns((pl.col("time") // 86400).cast(pl.Int64).alias("day"))
    if clean:
        events = first_per_event(events)
        daily = is_daily_panel(events)  # the repairs change values, not keys: the answer holds for every column
        for column in [amount] + [v for v in event_vars if v in events.columns]:
            events = repair_unit_drift(events, column, units_of[column], daily)
    for _, detail in by_grain.get("event_detail", []):
        detail, event_rows = _selected(detail, [c for c in detail.columns if c != "time"]), None
        if clean:
            detail = first_per_event(detail)
            for column in [c for c in detail.columns if c in event_vars]:
                dated, event_rows = _dated_rows(detail, events)
                detail = repair_unit_drift(dated, column, units_of[column]).drop("day")  # the same rows, in order
        # The events' ids are distinct here when cleaning (first_per_event): each detail row's event is its match.
        events = _with_detail(events, detail, event_rows)
    return _selected(events, ["event_id", "unit_id", "day", amount, *[v for v in event_vars if v in events.columns]])


def first_per_event(frame: pl.DataFrame) -> pl.DataFrame:
    """frame.unique(subset=["event_id"], keep="first", maintain_order=True), by marking each id's first row:
    for 64-bit integer ids without nulls in a short span (a system's usually are), by counts in a table of the
    span and a sort of only the rows whose id repeats (no hashing); for text ids, by polars' `is_first_distinct`
    (a null is an id, as for `unique`). The frame itself when no id repeats."""
    ids = frame["event_id"]
    if ids.dtype == pl.String:
        keep = ids.is_first_distinct()
    elif ids.dtype == pl.Int64 and not ids.null_count() and frame.height:
        values = ids.to_numpy()
        low, high = int(values.min()), int(values.max())
        if high - low >= DENSE_IDS_SPAN * len(values):
            return frame.unique(subset=["event_id"], keep="first", maintain_order=True)
        counts = np.bincount(values - low)
        if counts.max() == 1:  # no id twice
            return frame
        repeated = np.flatnonzero(counts[values - low] > 1)  # the rows of ids seen twice (re-sent: a few)
        first = np.unique(values[repeated], return_index=True)[1]  # each such id's first of them (a stable sort)
        keep = np.ones(len(values), dtype=bool)
        keep[repeated] = False
        keep[repeated[first]] = True
        keep = pl.Series(keep)
    else:
        return frame.unique(subset=["event_id"], keep="first", maintain_order=True)
    return frame if keep.all() else frame.filter(keep)


def _dated(detail: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """detail.join(events.select("event_id", "day"), on="event_id"): the detail rows of known events, in their
    order, with the event's day (read by position where the events' ids are distinct 64-bit integers)."""
    return _dated_rows(detail, events)[0]


def _dated_rows(detail: pl.DataFrame, events: pl.DataFrame) -> tuple[pl.DataFrame, np.ndarray | None]:
    """`_dated`, and each of its rows' event (its row in `events`; None if the join's columns would clash).
    Where the join runs (text ids), it carries the events' row numbers along: a join pairs rows by their keys
    alone, so one more column on the right leaves its pairs and their order as they were."""
    at = row_of(detail["event_id"], events["event_id"]) if "day" not in detail.columns else None
    if at is None:
        if EVENT_ROW in detail.columns:
            return detail.join(events.select("event_id", "day"), on="event_id", maintain_order="left"), None
        joined = detail.join(
            events.select("event_id", "day").with_row_index(EVENT_ROW), on="event_id", maintain_order="left"
        )
        return joined.drop(EVENT_ROW), joined[EVENT_ROW].to_numpy().astype(np.int64)
    known = at >= 0
    return detail.filter(pl.Series(known)).with_columns(events["day"].gather(at[known])), at[known]


EVENT_ROW = "__event_row"  # the events' row numbers carried through `_dated_rows`' join


def _with_detail(events: pl.DataFrame, detail: pl.DataFrame, event_rows: np.ndarray | None = None) -> pl.DataFrame:
    """events.join(detail, on="event_id", how="left"): each event's detail row gathered by position (null where
    it has none) where the detail's ids are distinct 64-bit integers and no column would be suffixed.

    `event_rows` (from `_dated_rows`), if given, is each detail row's event, and the events' ids are distinct:
    an event's matches are then the detail rows naming its row, and with no row named twice, the join's rows
    are the events' own (no id needs comparing again)."""
    names = [c for c in detail.columns if c != "event_id"]
    if any(c in events.columns for c in names):
        return events.join(detail, on="event_id", how="left", maintain_order="left")
    at = _rows_named(event_rows, events.height) if event_rows is not None else None
    if at is None:
        at = row_of(events["event_id"], detail["event_id"])
    if at is None:
        return events.join(detail, on="event_id", how="left", maintain_order="left")
    rows = pl.Series(at).set(pl.Series(at < 0), None)
    return events.hstack(detail.select(names).gather(rows).get_columns())


def _rows_named(event_rows: np.ndarray, height: int) -> np.ndarray | None:
    """Each event's detail row (-1 where none names it), None if a row is named twice (the join repeats it)."""
    at = np.full(height, -1, dtype=np.int64)
    at[event_rows] = np.arange(len(event_rows))
    return at if np.count_nonzero(at >= 0) == len(event_rows) else None


def row_of(keys: pl.Series, ids: pl.Series) -> np.ndarray | None:
    """Each key's row in `ids` (-1 where it has none, or is null), when both are Int64 and the ids are distinct
    and not null (an equi-join's matches, one at most per key); None otherwise."""
    if keys.dtype != pl.Int64 or ids.dtype != pl.Int64 or ids.null_count():
        return None
    table = ids.to_numpy()
    known = keys.is_not_null().to_numpy()
    wanted = keys.fill_null(0).to_numpy()
    if len(table) and int(table.max()) - int(table.min()) < DENSE_IDS_SPAN * len(table):
        return rows_in_span(wanted, known, table)
    order = None if np.all(table[1:] > table[:-1]) else np.argsort(table, kind="stable")
    ordered = table if order is None else table[order]
    if np.any(ordered[1:] == ordered[:-1]):  # an id twice: a join repeats its keys' rows
        return None
    if len(ordered) == 0:
        return np.full(len(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
    found = known & (ordered[at] == wanted)
    rows = at if order is None else order[at]
    return np.where(found, rows, -1)


DENSE_IDS_SPAN = 4  # ids spanning fewer values than 4 per id are looked up in a table of the span


def rows_in_span(wanted: np.ndarray, known: np.ndarray, table: np.ndarray) -> np.ndarray | None:
    """`row_of` (and the fit's unit positions) for ids in a short span (a table's ids usually are 1..n): each
    id's row marked in a table of the span, each key looked up in it, in one pass each instead of a sort and
    a binary search. None if an id repeats."""
    wanted, table = wanted.astype(np.int64, copy=False), table.astype(np.int64, copy=False)  # e.g. int32 ids
    low, high = int(table.min()), int(table.max())
    rows = np.full(high - low + 1, -1, dtype=np.int64)
    rows[table - low] = np.arange(len(table))
    if np.count_nonzero(rows >= 0) != len(table):  # an id twice: a join repeats its keys' rows
        return None
    inside = known & (wanted >= low) & (wanted <= high)  # compared, never subtracted: keys can be any int64
    at = rows[np.where(inside, wanted, low) - low]
    return np.where(inside, at, -1)


# size: the panel is assembled from every kind of file an analysis has already read
def _observed_panel(
    contract: Contract, by_grain: dict, keys: UnitKeys, units_of: dict, clean: bool, units: pl.DataFrame, events
) -> tuple[pl.DataFrame, tuple[Grid, np.ndarray] | None]:
    """The unit x day grid: `open` where the unit was seen operating, the volume counted from the events,
    every daily file joined on, every change log expanded into daily steps. Also the events' cells in the grid
    open_grid laid out (and that grid), if it did."""
    periods, volume = contract.timeline.periods, contract.volume.name
    daily = [(d, keys.resolve(f, d)) for d, f in by_grain.get("panel", [])]
    frame_cells: list[np.ndarray] = []  # each daily file's cells in open_grid's grid, then the events'
    panel = open_grid(units, events, [f for _, f in daily], periods, volume, frame_cells)
    grid = None
    if panel is None:  # keys that are not all 64-bit integers: the joins decide (or refuse)
        panel = joined_grid(units, events, [f for _, f in daily], periods, volume)
    elif periods > 0:  # open_grid lays out every unit's days 0..periods-1 in unit order: files join onto its cells
        grid = (panel["unit_id"].to_numpy()[::periods], periods)
    events_cells = (grid, frame_cells[-1]) if grid is not None else None
    for index, (_, frame) in enumerate(daily):
        # One row per unit and day is needed to join at all; a raw analysis just keeps the first.
        known = frame.filter(pl.col("unit_id").is_not_null()) if frame["unit_id"].null_count() else frame
        deduped = first_per_unit_day(known)
        # The file's rows as open_grid placed them (repairs change values only): its cells hold while the grid does.
        cells = frame_cells[index] if grid is not None and known.height == frame.height and deduped is known else None
        frame = deduped
        if clean:
            # The same keys for every column's repair; distinct unit-days (just made so) are a daily panel.
            daily_panel = True if frame.height else is_daily_panel(frame)
            for column in [c for c in frame.columns if c not in ("unit_id", "day")]:
                frame = repair_unit_drift(frame, column, units_of.get(column, ""), daily_panel)
        panel, grid = _joined(panel, frame, grid, cells)
    for d, frame in by_grain.get("schedule", []):
        names = {f.name: f.source.split(".", 1)[1] for f in d.fields}  # the system's setting names
        schedule = keys.resolve(frame, d).with_columns(pl.col("field").replace(names))
        panel, grid = _expand_schedule(panel, schedule, grid)
    return panel, events_cells


def first_per_unit_day(frame: pl.DataFrame) -> pl.DataFrame:
    """frame.unique(subset=["unit_id", "day"], keep="first", maintain_order=True): for 64-bit integer keys
    without nulls, the rows at each key's first occurrence (np.unique's), in their order."""
    unit, day = frame["unit_id"], frame["day"]
    if frame.height == 0 or unit.dtype != pl.Int64 or day.dtype != pl.Int64 or unit.null_count() or day.null_count():
        return frame.unique(subset=["unit_id", "day"], keep="first", maintain_order=True)
    unit, day = unit.to_numpy(), day.to_numpy()
    unit_span, day_span = int(unit.max()) - int(unit.min()) + 1, int(day.max()) - int(day.min()) + 1
    if unit_span * day_span >= 1 << 62:  # one key per unit-day would overflow
        return frame.unique(subset=["unit_id", "day"], keep="first", maintain_order=True)
    key = (unit - unit.min()) * day_span + (day - day.min())
    _, first = np.unique(key, return_index=True)
    return frame if len(first) == frame.height else frame[np.sort(first)]


Grid = tuple[np.ndarray, int]  # (sorted unit ids, periods): a panel whose rows are every unit's days in order


def _joined(
    panel: pl.DataFrame, frame: pl.DataFrame, grid: Grid | None, cells: np.ndarray | None = None
) -> tuple[pl.DataFrame, Grid | None]:
    """panel.join(frame, on=["unit_id", "day"], how="left"), and the grid the result still is (None once the
    join itself ran: its row order is its own). `cells`: the frame's rows' cells in the grid, if known."""
    on_grid = join_on_grid(panel, frame, grid, cells)
    if on_grid is None:
        return panel.join(frame, on=["unit_id", "day"], how="left", maintain_order="left"), None
    return on_grid, grid


def join_on_grid(
    panel: pl.DataFrame, frame: pl.DataFrame, grid: Grid | None, cells: np.ndarray | None = None
) -> pl.DataFrame | None:
    """panel.join(frame, on=["unit_id", "day"], how="left") where the panel is the grid of `grid` and the frame
    has at most one row per unit-day: each cell's row gathered by position (null where none), the panel's
    rows in their order. None (the join must run) without a grid, for keys that are not 64-bit integers, a
    unit-day twice or a column name the join would suffix."""
    names = [c for c in frame.columns if c not in ("unit_id", "day")]
    if (
        grid is None
        or frame.schema.get("unit_id") != pl.Int64
        or frame.schema.get("day") != pl.Int64
        or any(c in panel.columns for c in names)
    ):
        return None
    unit_ids, periods = grid
    cells = grid_cells(frame, unit_ids, periods) if cells is None else cells  # given: as grid_cells found them
    matched = np.flatnonzero(cells >= 0)
    row = np.full(panel.height, -1, dtype=np.int64)
    row[cells[matched]] = matched
    if np.count_nonzero(row >= 0) != len(matched):  # two rows of one unit-day: the join repeats its cell
        return None
    at = pl.Series(row).set(pl.Series(row < 0), None)
    return panel.hstack(frame.select(names).gather(at).get_columns())  # one gather of the frame: fewer calls


def _shared_series_consensus(contract: Contract, panel: pl.DataFrame, master: pl.DataFrame) -> pl.DataFrame:
    """A regional or national series (weather, an index, a rate) is one number per region (nation) and day,
    whichever unit's file reports it: an analyst takes the units' consensus (their median), which mends a
    unit's blank or late-posted value, and fills it in on every day the unit was open."""
    shared = [v for v in contract.variables if v.grain == "panel" and v.scope != "unit" and v.name in panel.columns]
    if not shared or "region" not in master.columns:
        return panel
    columns = [(v.name, v.scope == "nation") for v in shared]
    on_grid = _consensus_on_grid(panel, master, columns)
    return on_grid if on_grid is not None else _consensus_plain(panel, master, columns)


def _consensus_plain(panel: pl.DataFrame, master: pl.DataFrame, shared: list[tuple[str, bool]]) -> pl.DataFrame:
    """`_shared_series_consensus` in polars, for any panel: each (column, national)'s median per day (and
    region, unless national), by a window over the panel with the units' regions joined on."""
    regions = (
        master.select("unit_id", "region").drop_nulls("unit_id").unique("unit_id", keep="first", maintain_order=True)
    )
    panel = panel.join(regions, on="unit_id", how="left", maintain_order="left")
    for name, national in shared:
        consensus = pl.col(name).median().over(["day"] if national else ["region", "day"])
        panel = panel.with_columns(pl.when(pl.col("open") == 1).then(consensus).alias(name))
    return panel.drop("region")


def _consensus_on_grid(
    panel: pl.DataFrame, master: pl.DataFrame, shared: list[tuple[str, bool]]
) -> pl.DataFrame | None:
    """`_shared_series_consensus` on arrays where the panel is a grid (`_as_grid`): each (column, national)'s
    median per day (and region, unless national) over the units' reported values, as polars takes medians
    (`_sorted_medians`), on the open unit-days. None (polars decides) unless the columns are Float64 with no
    NaN, no infinity and no -0.0 (polars orders those its own way), the units' codes Int64 and their regions text or
    integers (grouped as Python compares them: as polars does)."""
    grid = _as_grid(panel)
    if grid is None or "region" in panel.columns or not panel.schema.get("open", pl.String).is_integer():
        return None
    kind = master.schema["region"]
    if master.schema["unit_id"] != pl.Int64 or not (kind == pl.String or kind.is_integer()):
        return None
    if any(panel.schema[name] != pl.Float64 for name, _ in shared):
        return None
    unit_ids, periods = grid
    region_of: dict = {}
    for unit, region in zip(master["unit_id"].to_list(), master["region"].to_list(), strict=True):
        if unit is not None:
            region_of.setdefault(unit, region)  # the first row of a unit, as the plain path's unique keeps
    numbers: dict = {}  # each region (a null too: the join's units without one) numbered as first met
    region = np.array([numbers.setdefault(region_of.get(int(u)), len(numbers)) for u in unit_ids], dtype=np.int64)
    closed = (panel["open"] != 1).fill_null(True).to_numpy().reshape(len(unit_ids), periods)
    out = panel.clone()  # shares the other columns' data
    for name, national in shared:
        series = panel[name]
        values = series.to_numpy().reshape(len(unit_ids), periods)  # a null as NaN
        if np.count_nonzero(~np.isfinite(values)) != series.null_count() or np.any((values == 0) & np.signbit(values)):
            return None  # a NaN, an infinity (inf - inf is NaN to numpy's midpoint) or a -0.0 among the values
        consensus = np.empty_like(values)
        for number in range(len(numbers)) if not national else (None,):
            units = slice(None) if national else region == number
            consensus[units] = _day_medians(values[units])
        consensus[closed] = np.nan
        out.replace_column(panel.get_column_index(name), pl.Series(name, consensus.reshape(-1), nan_to_null=True))
    return out


def _day_medians(values: np.ndarray) -> np.ndarray:
    """Each day's (column's) median of the units' (rows') values, blanks (NaN) left out, as polars takes it
    (`_sorted_medians`; NaN where a day has no value)."""
    ordered = np.sort(values.T, axis=1)  # each day's values in order, blanks last
    count = np.count_nonzero(~np.isnan(ordered), axis=1)
    days = np.arange(ordered.shape[0])
    lower = ordered[days, np.maximum(count - 1, 0) // 2]
    upper = ordered[days, np.minimum(count // 2, ordered.shape[1] - 1)]
    median = np.where(lower == upper, lower, lower + (upper - lower) * 0.5)
    return np.where(count > 0, median, np.nan)


# size: the grid, its cells and the frames' cells (`cells`, for the joins that follow) read best together
def open_grid(
    units: pl.DataFrame,
    events: pl.DataFrame,
    daily: list[pl.DataFrame],
    periods: int,
    volume: str,
    cells_out: list[np.ndarray] | None = None,
) -> pl.DataFrame | None:
    """The unit x day grid with `open` and the volume, as the joins of `_days_seen` and the event counts onto
    it give them, computed on the grid's cells directly (every key is an integer: no join is needed); None
    unless every unit and day column is Int64 (then the joins run, and refuse what they refuse). Each frame's
    rows' cells (`grid_cells`: the daily frames', then the events') are appended to `cells_out` if given."""
    frames = [*daily, events]
    if units.schema["unit_id"] != pl.Int64 or any(
        f.schema.get("unit_id") != pl.Int64 or f.schema.get("day") != pl.Int64 for f in frames
    ):
        return None
    unit_ids = sorted_unique(np.concatenate([units["unit_id"].to_numpy(), events["unit_id"].drop_nulls().to_numpy()]))
    cells = len(unit_ids) * periods
    is_open = np.zeros(cells, dtype=np.int8)
    for frame in frames:
        at = grid_cells(frame, unit_ids, periods)
        is_open[at[at >= 0]] = 1
        if cells_out is not None:
            cells_out.append(at)
    # `at` is the events' cells (the last frame)
    counts = np.bincount(at[at >= 0], minlength=cells).astype(np.uint32)
    grid = pl.DataFrame(
        {
            "unit_id": np.repeat(unit_ids, periods),
            "day": np.tile(np.arange(periods, dtype=np.int64), len(unit_ids)),
            "open": is_open,
            volume: counts,
        },
        schema={"unit_id": pl.Int64, "day": pl.Int64, "open": pl.Int8, volume: pl.UInt32},
    )
    return grid.with_columns(pl.when(pl.col("open") == 1).then(pl.col(volume)).alias(volume))


def grid_cells(frame: pl.DataFrame, unit_ids: np.ndarray, periods: int) -> np.ndarray:
    """Each row's cell in the grid of the sorted unit_ids x days 0..periods-1 (unit-major), -1 where its unit
    or day is null or outside the grid (the rows an equi-join on unit_id and day would not match)."""
    unit, day = frame["unit_id"], frame["day"]
    if len(unit_ids) == 0:
        return np.full(frame.height, -1, dtype=np.int64)
    if unit.null_count() or day.null_count():
        known = (unit.is_not_null() & day.is_not_null()).to_numpy()
        u, d = unit.fill_null(0).to_numpy(), day.fill_null(-1).to_numpy()
    else:  # no nulls: the keys as they are
        known, u, d = np.ones(frame.height, dtype=bool), unit.to_numpy(), day.to_numpy()
    lo, hi = int(unit_ids[0]), int(unit_ids[-1])
    if hi - lo < DENSE_KEY_SPAN:  # ids in a short range: each one's position read from a table
        table = np.full(hi - lo + 1, -1, dtype=np.int64)
        table[unit_ids - lo] = np.arange(len(unit_ids))
        at = table[np.clip(u, lo, hi) - lo]
        found = known & (u >= lo) & (u <= hi) & (at >= 0)
    else:
        at = np.minimum(np.searchsorted(unit_ids, u), len(unit_ids) - 1)
        found = known & (unit_ids[at] == u)
    found &= (d >= 0) & (d < periods)
    return np.where(found, at * periods + d, -1)


DENSE_KEY_SPAN = 1 << 22  # integer keys spanning fewer values than this are looked up in a table


def sorted_unique(ids: np.ndarray) -> np.ndarray:
    """np.unique of integer ids (sorted, distinct), by marking a table when they span a short range."""
    if ids.dtype.kind not in "iu" or len(ids) == 0 or int(ids.max()) - int(ids.min()) >= DENSE_KEY_SPAN:
        return np.unique(ids)
    lo = int(ids.min())
    present = np.zeros(int(ids.max()) - lo + 1, dtype=bool)
    present[ids - lo] = True
    return (np.flatnonzero(present) + lo).astype(ids.dtype)


def joined_grid(
    units: pl.DataFrame, events: pl.DataFrame, daily: list[pl.DataFrame], periods: int, volume: str
) -> pl.DataFrame:
    """The unit x day grid with `open` (a daily system reported the unit-day, or an event happened) and the
    volume (events counted on open days), by joins (what `open_grid` computes on the cells)."""
    unit_ids = sorted(set(units["unit_id"].to_list()) | set(events["unit_id"].drop_nulls().to_list()))
    grid = pl.DataFrame(
        {"unit_id": np.repeat(unit_ids, periods), "day": np.tile(np.arange(periods), len(unit_ids))},
        schema={"unit_id": pl.Int64, "day": pl.Int64},
    )
    counts = events.group_by("unit_id", "day").len(name=volume)
    return (
        grid.join(_days_seen(daily, events), on=["unit_id", "day"], how="left", maintain_order="left")
        .with_columns(pl.col("open").fill_null(0))
        .join(counts, on=["unit_id", "day"], how="left", maintain_order="left")
        .with_columns(pl.when(pl.col("open") == 1).then(pl.col(volume).fill_null(0)).alias(volume))
    )


def _days_seen(daily: list[pl.DataFrame], events: pl.DataFrame) -> pl.DataFrame:
    """Unit-days an analyst knows the unit operated: a daily system reported it, or an event happened."""
    frames = [f.select("unit_id", "day") for f in daily] + [events.select("unit_id", "day")]
    return pl.concat(frames).drop_nulls().unique().with_columns(pl.lit(1, dtype=pl.Int8).alias("open"))


def merge_renamed_columns(frame: pl.DataFrame, d: Deliverable) -> pl.DataFrame:
    """A column renamed mid-year shows up as an extra, mostly empty column whose name contains the old one."""
    known = [c.name for c in d.columns if c.name in frame.columns]
    extras = [c for c in frame.columns if c not in known]
    for extra in extras:
        owner = next((k for k in known if normalise(k) in normalise(extra)), None)
        if owner is not None:
            frame = frame.with_columns(
                pl.coalesce(pl.col(owner), pl.col(extra).cast(frame.schema[owner], strict=False)).alias(owner)
            )
    return _selected(frame, known)


def clean_name(name: str) -> str:
    text = name.lower().replace("&", " and ")
    text = re.sub(r"[^a-z0-9 ]", " ", text)
    text = SUFFIXES.sub(" ", text)
    return " ".join(text.split())


def _expand_schedule(
    panel: pl.DataFrame, schedule: pl.DataFrame, grid: Grid | None = None
) -> tuple[pl.DataFrame, Grid | None]:
    """Change logs become daily step functions: each value holds from its effective day to the next change.
    Also the grid the panel still is (`_joined`): on it, the panel is already in unit and day order."""
    for fld in sorted(schedule["field"].unique().to_list()):
        changes = schedule.filter(pl.col("field") == fld).select("unit_id", "day", pl.col("value").alias(fld))
        changes = changes.sort("unit_id", "day").unique(subset=["unit_id", "day"], keep="last", maintain_order=True)
        panel, grid = _joined(panel, changes, grid)
        if grid is None:
            panel = panel.sort("unit_id", "day")
        panel = panel.with_columns(pl.col(fld).forward_fill().backward_fill().over("unit_id"))
    return panel, grid


def plausible_factors(unit: str) -> tuple[float, ...]:
    """The unit switches an analyst would consider for a column measured in `unit`."""
    words = re.findall(r"[a-z$0-9]+", unit.lower().split("/")[0])
    return next((factors for names, factors in FACTORS_BY_UNIT if any(w.startswith(names) for w in words)), ())


def is_daily_panel(frame: pl.DataFrame) -> bool:
    """Whether a frame is (nearly) one row per unit and day: a daily report of many units."""
    if "unit_id" not in frame.columns:
        return False
    repeated = _rows_repeating_keys(frame)
    if repeated is None:
        return frame.select("unit_id", "day").is_duplicated().mean() < DAILY_REPEATS
    return repeated / frame.height < DAILY_REPEATS  # the mean of `is_duplicated`: the same count over the same n


DAILY_REPEATS = 0.05  # a daily panel has fewer than 5% of its rows on a unit-day another row also has


def _rows_repeating_keys(frame: pl.DataFrame) -> int | None:
    """How many rows share their (unit_id, day) with another row (`is_duplicated().sum()`), counted in a table
    of (unit, day) cells (units numbered in a table of their span), for Int64 keys without nulls in short spans
    (fewer than DENSE_KEY_SPAN units and cells); else None."""
    if frame.height == 0 or frame.schema.get("day") != pl.Int64 or frame.schema["unit_id"] != pl.Int64:
        return None
    unit, day = frame["unit_id"], frame["day"]
    if unit.null_count() or day.null_count():
        return None
    unit, day = unit.to_numpy(), day.to_numpy()
    low_unit, low_day = int(unit.min()), int(day.min())
    unit_span, day_span = int(unit.max()) - low_unit + 1, int(day.max()) - low_day + 1
    if unit_span >= DENSE_KEY_SPAN:
        return None
    present = np.zeros(unit_span, dtype=bool)
    present[unit - low_unit] = True
    numbered = np.cumsum(present) - 1  # each unit's number among the units present
    if int(numbered[-1] + 1) * day_span >= DENSE_KEY_SPAN:
        return None
    counts = np.bincount(numbered[unit - low_unit] * day_span + (day - low_day))
    return int(counts[counts > 1].sum())


def repair_unit_drift(frame: pl.DataFrame, column: str, unit: str, daily_panel: bool | None = None) -> pl.DataFrame:
    """Find a day after which a column's level jumps by a factor its unit makes plausible and convert it back.

    Works on the logs of every positive value (not daily medians), so a measure that is zero on most days
    (refunds, downtime) shows its switch as clearly as a daily average does. `daily_panel` is
    `is_daily_panel(frame)` when the caller already knows it (the repairs of a frame's columns share it).
    """
    factors = plausible_factors(unit)
    if column not in frame.columns or not frame.schema[column].is_numeric() or not factors:
        return frame
    if (frame[column].min() or 0) < 0:  # a quantity that goes negative (a temperature) has no unit to switch
        return frame
    if daily_panel is None:
        daily_panel = is_daily_panel(frame)
    dense = daily_panel and (frame[column] > 0).mean() >= DENSE_SHARE
    rows = PositiveRows(frame, column)  # the column's positive rows as arrays, read once for every test below
    if dense:
        # A daily report of many units: a switch moves every unit between one report and the next, which
        # no season or lever does; this finds a switch even inside a seasonal ramp.
        found = _adjacent_switch(frame, column, factors, rows)
        if found is not None:
            return _converted(frame, column, *found)
        # A day-to-day noisy measure (a harvest that rain halves one day) can spread a switch's step over
        # two reports; the level either side of the best split still shows it, as for a sparse measure.
    positive = frame.select("day", column).filter(pl.col(column) > 0).sort("day")
    days = positive["day"].to_numpy()
    if len(sorted_unique(days)) < MIN_DAYS:
        return frame
    logs = np.log(positive[column].cast(pl.Float64).to_numpy())
    split = _best_split(days, logs)
    if split is None:
        return frame
    from_day, jump, local, se = split
    # A unit switch is a sharp step by a conversion factor an analyst recognises; seasons and regime
    # changes are gradual or the wrong size, and are left alone.
    if abs(jump) < np.log(MIN_JUMP) or abs(local - jump) > SHARPNESS * abs(jump):
        return frame
    estimates = [(local, se), _whole_step(days, logs, from_day)]
    if "unit_id" in frame.columns:
        estimates.append(_unit_step(frame, column, from_day, (local, se), rows))
    matched = {_known_factor(step, max(FACTOR_MATCH, 3 * step_se), factors) for step, step_se in estimates}
    matched.discard(None)
    if len(matched) != 1:  # no estimate of the step names a factor, or two name different ones
        return frame
    factor = matched.pop()
    if dense:
        from_day = _daily_switch_day(frame, column, from_day, (jump, factor), rows)
        if from_day is None:
            return frame
    if "unit_id" in frame.columns and not _every_unit_switches(frame, column, from_day, factor, rows):
        return frame  # a lever changed for some units (a policy), not the unit of the whole system
    return _converted(frame, column, from_day, factor)


def _converted(frame: pl.DataFrame, column: str, from_day: int, factor: float) -> pl.DataFrame:
    """The column divided by `factor` from `from_day` on."""
    fixed = pl.when(pl.col("day") >= from_day).then(pl.col(column) / factor).otherwise(pl.col(column))
    return frame.with_columns(fixed.cast(pl.Float64).alias(column))


def _daily_switch_day(
    frame: pl.DataFrame, column: str, day: int, jump_factor: tuple[float, float], rows: PositiveRows | None = None
) -> int | None:
    """The day a daily report's split-found switch takes effect: the split's own `day` if the units confirm it
    there, the day their own reports place it if the split missed it, else None (no switch).

    In a daily report a switch moves the units by the whole jump between the few reports either side of its
    day, even when a bad day blurs it, or by half the factor between the two reports either side when the
    level climbs steeply through it; a load ramping up over a week or more (which three weeks either side make
    look sharp) does neither.
    Unless the split missed the day: a switch into a slump (a fortnight of few, low reports) leaves the slump's
    converted values between the old level and the new, every split across the slump is about as sure, and it
    can land a week or two late, where the reports either side are all converted. No real cause steps every
    unit's own reports by half a large factor (tenfold for cents), so the units place such a switch
    themselves; a factor under SMALL_FACTOR is a step a ramp also takes over a few reports.
    """
    jump, factor = jump_factor
    if _sharp_over_days(frame, column, day, jump, rows) or _persists(frame, column, day, factor, SWITCH_REPORTS, rows):
        return day
    if abs(np.log(factor)) >= np.log(SMALL_FACTOR):
        return _cliff_day(frame, column, day, factor)
    return None


def _best_split(days: np.ndarray, logs: np.ndarray) -> tuple[int, float, float, float] | None:
    """The day splitting the log values into the most surely different halves: (day, whole-segment jump, the
    jump between the weeks either side of it, that local jump's standard error).

    Only days with values are candidates, and "the weeks either side" are the LOCAL_DAYS reporting days
    before and after: a switch made during a closure (a school's summer break) shows on the first day
    after it, against the last days before it."""
    reported = sorted_unique(days)
    first, last = int(days.min()), int(days.max())
    inside = (reported >= first + EDGE_DAYS) & (reported <= last - EDGE_DAYS + 1)
    positions = np.flatnonzero(inside)
    if len(positions) == 0:
        return None
    candidates = reported[positions]
    cut = np.searchsorted(days, candidates)  # values before each candidate day
    n = len(logs)
    csum = np.concatenate([[0.0], np.cumsum(logs)])
    jumps = (csum[n] - csum[cut]) / (n - cut) - csum[cut] / cut
    # Where the switch is: the jump most certain, not the largest. A week of values at one end (claims
    # trailing the first deliveries) can differ more than a switch does, on a sliver of the evidence; each
    # jump is weighed by sqrt(before * after / n), the inverse of its standard error under equal noise.
    # Which day: the largest jump within a week of there (a bad day on the switch's day blurs the weights).
    near = int(np.argmax(np.abs(jumps) * np.sqrt(cut * (n - cut) / n)))
    window = np.flatnonzero(np.abs(candidates - candidates[near]) <= EDGE_DAYS)
    k = int(window[np.argmax(np.abs(jumps[window]))])
    day, at = int(candidates[k]), int(positions[k])
    opens = reported[max(at - LOCAL_DAYS, 0)]
    closes = reported[min(at + LOCAL_DAYS, len(reported) - 1)]
    before = logs[(days >= opens) & (days < day)]
    after = logs[(days >= day) & (days < closes)]
    if len(before) < 2 or len(after) < 2:
        return None
    local = float(np.median(after) - np.median(before))
    se = float(np.sqrt(np.var(before) / len(before) + np.var(after) / len(after)))
    return day, float(jumps[k]), local, se


def _adjacent_switch(
    frame: pl.DataFrame, column: str, factors: tuple[float, ...], rows: PositiveRows | None = None
) -> tuple[int, float] | None:
    """The day most units' values jump from their previous report by the same plausible factor.

    The largest few report-to-report steps are tried in turn (a week from either end of the data): a
    level near zero early in a season can jump further than a switch, but it does not persist. A small
    factor's step must also move the units alike (SCATTER_ALLOWANCE). On arrays where the steps are all
    finite and no unit reports a day twice (`_adjacent_steps`), else in polars (`_adjacent_switch_plain`)."""
    steps = _adjacent_steps(frame, column, rows)
    if steps is None:
        return _adjacent_switch_plain(frame, column, factors)
    return _adjacent_switch_arrays(frame, column, factors, steps, rows)


# size: the search, the factor test and the persistence test read best as one sequence
def _adjacent_switch_plain(frame: pl.DataFrame, column: str, factors: tuple[float, ...]) -> tuple[int, float] | None:
    """`_adjacent_switch` by polars operations (the reference the array path is tested against)."""
    steps = (
        frame.filter(pl.col(column) > 0)
        .sort("unit_id", "day")
        .select(
            "day",
            pl.col(column).cast(pl.Float64).log().diff().over("unit_id").alias("step"),
            (pl.col("day") - pl.col("day").shift(1).over("unit_id")).alias("gap"),
        )
        .filter(pl.col("step").is_not_null() & (pl.col("gap") <= ADJACENT_GAP_DAYS))
    )
    if steps.height == 0:
        return None
    first, last = int(frame["day"].min()), int(frame["day"].max())
    by_day = steps.group_by("day").agg(pl.col("step").median().alias("m"), pl.len().alias("n"))
    by_day = by_day.filter(
        (pl.col("n") >= MIN_UNITS_FOR_STEP) & pl.col("day").is_between(first + EDGE_DAYS, last - EDGE_DAYS)
    ).join(_narrowest_spreads(steps), on="day", how="left", maintain_order="left")
    ordinary_scatter = max(float(by_day["scatter"].median() or 0.0), MIN_SCATTER)
    spread = 1.25 * 1.4826 * float((steps["step"] - steps["step"].median()).abs().median())
    # The step report to report must name a factor (with the noise of a day-to-day change); the largest
    # few that do are tried (a bigger step naming no factor, a dry spell ending, does not crowd them out).
    ranked = by_day.sort(pl.col("m").abs(), "day", descending=[True, False])
    matches = known_factors(ranked["m"].to_numpy(), 3 * spread / np.sqrt(ranked["n"].to_numpy()), factors)
    named = []
    for row in np.flatnonzero(~np.isnan(matches))[:SWITCH_CANDIDATES]:
        named.append((ranked.row(int(row), named=True), float(matches[row])))
    for best, factor in named:
        # It must persist: each unit's reports in the few days after stay at the new level (a dip does not).
        if not all(_persists(frame, column, int(best["day"]), factor, days) for days in (PERSIST_DAYS, SETTLED_DAYS)):
            continue
        # A conversion multiplies every unit by the same factor, so most units' steps that day lie as close
        # together as on any day; a shared cause moving a volatile load 2.2x moves each site by
        # its own amount.
        if abs(np.log(factor)) < np.log(SMALL_FACTOR) and best["scatter"] > SCATTER_ALLOWANCE * ordinary_scatter:
            continue
        on_day = steps.filter(pl.col("day") == best["day"])["step"].to_numpy()
        share = UNIT_STEP_SHARE * abs(np.log(factor))
        moved = (np.sign(on_day) == np.sign(np.log(factor))) & (np.abs(on_day) > share)
        if moved.mean() >= UNITS_SWITCHING:
            return int(best["day"]), factor
    return None


# size: the plain path's sequence over arrays, step by step
def _adjacent_switch_arrays(
    frame: pl.DataFrame,
    column: str,
    factors: tuple[float, ...],
    steps: tuple[np.ndarray, np.ndarray],
    rows: PositiveRows | None = None,
) -> tuple[int, float] | None:
    """`_adjacent_switch_plain` on the steps' arrays (`_adjacent_steps`: ordered by day and step): each day's
    median, count and scatter read from its run, the medians as polars takes them (`_sorted_medians`)."""
    day, step = steps
    if len(step) == 0:
        return None
    first, last = int(frame["day"].min()), int(frame["day"].max())
    starts, sizes = _runs(day)
    days, medians, scatter = day[starts], _sorted_medians(step, starts, sizes), _scatter_widths(step, starts, sizes)
    chosen = (sizes >= MIN_UNITS_FOR_STEP) & (days >= first + EDGE_DAYS) & (days <= last - EDGE_DAYS)
    days, medians, sizes, scatter = days[chosen], medians[chosen], sizes[chosen], scatter[chosen]
    ordinary_scatter = max(_median_of(scatter) or 0.0, MIN_SCATTER)
    spread = 1.25 * 1.4826 * _median_of(np.abs(step - _median_of(step)))
    ranked = np.lexsort((days, -np.abs(medians)))  # the largest median step first, then the earliest day
    matches = known_factors(medians[ranked], 3 * spread / np.sqrt(sizes[ranked]), factors)
    for row in np.flatnonzero(~np.isnan(matches))[:SWITCH_CANDIDATES]:
        at, factor = ranked[row], float(matches[row])
        best_day = int(days[at])
        if not all(_persists(frame, column, best_day, factor, window, rows) for window in (PERSIST_DAYS, SETTLED_DAYS)):
            continue
        if abs(np.log(factor)) < np.log(SMALL_FACTOR) and scatter[at] > SCATTER_ALLOWANCE * ordinary_scatter:
            continue
        on_day = step[day == best_day]
        share = UNIT_STEP_SHARE * abs(np.log(factor))
        moved = (np.sign(on_day) == np.sign(np.log(factor))) & (np.abs(on_day) > share)
        if moved.mean() >= UNITS_SWITCHING:
            return best_day, factor
    return None


def _adjacent_steps(
    frame: pl.DataFrame, column: str, rows: PositiveRows | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The (day, step) pairs of `_adjacent_switch_plain`'s steps (each unit's log step from its previous
    positive report at most ADJACENT_GAP_DAYS before), ordered by day and step; None (polars decides) unless
    the keys are Int64 without nulls, days within DAY_LIMIT, no unit reports a day twice (the plain path's
    sort would order such reports its own way) and every log is finite (so the medians are plain numbers).
    `rows`: the column's positive rows if the caller has them (`PositiveRows`)."""
    positive = (rows if rows is not None and rows.frame is frame else PositiveRows(frame, column)).arrays
    if positive is None:
        return None
    number, day, logs = positive.number, positive.day, positive.logs  # the plain path's rows, polars' own log
    if not np.all(np.isfinite(logs)) or (len(day) and (day.min() <= -DAY_LIMIT or day.max() >= DAY_LIMIT)):
        return None
    order = _unit_day_order(number, day)
    number, day, logs = number[order], day[order], logs[order]
    same_unit = number[1:] == number[:-1]
    if np.any(same_unit & (day[1:] == day[:-1])):
        return None
    follows = same_unit & (day[1:] - day[:-1] <= ADJACENT_GAP_DAYS)
    days, steps = day[1:][follows], (logs[1:] - logs[:-1])[follows]
    # By day, then step. Equal steps are equal numbers (no step is -0.0): their order is no matter.
    if len(steps) and int(days.max()) - int(days.min()) < 1 << 16:  # days as 16-bit keys: a radix sort
        by_step = np.argsort(steps)
        order = by_step[np.argsort((days[by_step] - days.min()).astype(np.uint16), kind="stable")]
    elif len(steps) == 0 or (int(days.max()) - int(days.min()) + 1) * len(steps) >= 1 << 62:  # a key would overflow
        order = np.lexsort((steps, days))
    else:  # one sort of a key made of the day and the step's rank (faster than np.lexsort on floats)
        rank = np.empty(len(steps), dtype=np.int64)
        rank[np.argsort(steps)] = np.arange(len(steps))
        order = np.argsort((days - days.min()) * len(steps) + rank)
    return days[order], steps[order]


def _unit_day_order(number: np.ndarray, day: np.ndarray) -> np.ndarray:
    """An order of rows by unit number, then day (np.lexsort((day, number)) up to the order of rows repeating a
    unit-day, which the callers refuse): none needed where the rows already are in that order."""
    if len(day) == 0:
        return np.zeros(0, dtype=np.int64)
    low, span = int(day.min()), int(day.max()) - int(day.min()) + 1
    if (int(number.max()) + 1) * span >= 1 << 62:  # a key would overflow
        return np.lexsort((day, number))
    key = number * span + (day - low)
    if np.all(key[1:] > key[:-1]):
        return np.arange(len(key))
    return np.argsort(key)


class PositiveRows:
    """A column's positive rows (where `pl.col(column) > 0` holds, as polars filters: a NaN is above 0, a null is
    not) as arrays, read on first use and shared by the tests one repair makes of a column (a repair changes
    values, not keys, and only after its tests)."""

    def __init__(self, frame: pl.DataFrame, column: str):
        self.frame, self.column = frame, column

    @cached_property
    def arrays(self) -> _PositiveArrays | None:
        """None (polars decides) unless the keys are Int64 without nulls."""
        frame, column = self.frame, self.column
        if frame.schema.get("unit_id") != pl.Int64 or frame.schema.get("day") != pl.Int64:
            return None
        unit, days = frame["unit_id"], frame["day"]
        if unit.null_count() or days.null_count():
            return None
        values = frame[column]
        keep = (values > 0).fill_null(False)
        picked = values.filter(keep)
        keep, unit, all_days = keep.to_numpy(), unit.to_numpy(), days.to_numpy()
        return _PositiveArrays(
            reported=sorted_unique(all_days),
            number=_unit_numbers(unit[keep]),
            day=all_days[keep],
            logs=picked.cast(pl.Float64).log().to_numpy(),  # polars' own log, as the plain paths take it
            values=picked.to_numpy() if values.dtype == pl.Float64 else None,
        )


@dataclass
class _PositiveArrays:
    reported: np.ndarray  # every reported day of the frame (any value), sorted and distinct: `_around`'s days
    number: np.ndarray  # each positive row's unit, numbered in the order of the units' codes
    day: np.ndarray
    logs: np.ndarray
    values: np.ndarray | None  # the values themselves, for a Float64 column


def _unit_numbers(unit: np.ndarray) -> np.ndarray:
    """Each code's rank among the distinct codes (0, 1, ...): the codes' order and equality, as small numbers."""
    if len(unit) == 0:
        return np.zeros(0, dtype=np.int64)
    low, high = int(unit.min()), int(unit.max())
    if high - low >= DENSE_KEY_SPAN:
        return np.unique(unit, return_inverse=True)[1].reshape(-1).astype(np.int64)
    present = np.zeros(high - low + 1, dtype=bool)
    present[unit - low] = True
    return (np.cumsum(present) - 1)[unit - low]


DAY_LIMIT = 1 << 40  # days this far out are no calendar's: the plain path handles them (and any wrap-around)


def _runs(day: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The start and length of each run of equal days in an ordered array."""
    starts = np.flatnonzero(np.r_[True, day[1:] != day[:-1]]) if len(day) else np.zeros(0, dtype=np.int64)
    return starts, np.diff(np.r_[starts, len(day)])


def _sorted_medians(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each run's median of values ordered within their runs, as polars computes a median: the middle value,
    or for an even count the lower middle one plus half the way to the upper one (the lower one where they
    are equal), which is not numpy's (lower + upper) / 2 to the last bit. For values with no -0.0 (a log step
    is never -0.0: x - x is 0.0): polars may order a -0.0 and a 0.0 either way."""
    lower, upper = values[starts + (sizes - 1) // 2], values[starts + sizes // 2]
    return np.where(lower == upper, lower, lower + (upper - lower) * 0.5)


def _median_of(values: np.ndarray) -> float | None:
    """polars' median of finite values (None for none)."""
    if len(values) == 0:
        return None
    return float(_sorted_medians(np.sort(values), np.zeros(1, dtype=np.int64), np.array([len(values)]))[0])


def _narrowest_spreads(steps: pl.DataFrame) -> pl.DataFrame:
    """Each day's "scatter": the narrowest interval holding SCATTER_SHARE of its units' steps. A share of
    units hit by something else on a switch's day (rain in one region) leaves the rest as tight as on any
    day; units each moving by their own amount spread every such share."""
    ordered = steps.select("day", "step").sort("day", "step")
    day, step = ordered["day"].to_numpy(), ordered["step"].to_numpy()
    starts, sizes = _runs(day)
    scatter = _scatter_widths(step, starts, sizes)
    return pl.DataFrame({"day": day[starts], "scatter": scatter}, schema_overrides={"day": ordered.schema["day"]})


def _scatter_widths(step: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """`_narrowest_spreads`' widths, for steps ordered within each day's run."""
    held = np.maximum(np.ceil(SCATTER_SHARE * sizes).astype(np.int64), 2)  # steps an interval must hold
    group = np.repeat(np.arange(len(starts)), sizes)
    first = np.flatnonzero(np.arange(len(step)) - starts[group] <= (sizes - held)[group])  # an interval opens here
    widths = np.full(len(starts), np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf (a day of infinite steps) is NaN, as polars' width is
        np.minimum.at(widths, group[first], step[first + held[group[first]] - 1] - step[first])
    return widths


def _around(frame: pl.DataFrame, day: int, reports: int) -> pl.Expr:
    """Rows within `reports` reporting days either side of `day` (closed stretches do not count: a switch
    made during a summer break is judged on the weeks of data either side of the break)."""
    bounds = _around_bounds(frame["day"].drop_nulls().to_numpy(), day, reports)
    if bounds is None:
        return pl.lit(False)
    return (pl.col("day") >= bounds[0]) & (pl.col("day") < bounds[1])


def _around_bounds(days: np.ndarray, day: int, reports: int) -> tuple[int, int] | None:
    """`_around`'s days: from the first (opens) to before the last (closes); None where no day is reported."""
    return _around_reported(sorted_unique(days), day, reports)


def _around_reported(reported: np.ndarray, day: int, reports: int) -> tuple[int, int] | None:
    """`_around_bounds` of the reported days (sorted, distinct)."""
    if len(reported) == 0:
        return None
    at = int(np.searchsorted(reported, day))
    opens = int(reported[max(at - reports, 0)])
    closes = int(reported[at + reports]) if at + reports < len(reported) else int(reported[-1]) + 1
    return opens, closes


def _persists(
    frame: pl.DataFrame, column: str, day: int, factor: float, reports: int, rows: PositiveRows | None = None
) -> bool:
    """Whether units' levels over `reports` reporting days after `day` sit at least half the factor away from
    those before: a switch holds for good, rain or a holiday moves the level and lets it go."""
    step = _window_step(frame, column, day, reports, rows)
    return step is not None and step[0] * np.sign(np.log(factor)) >= UNIT_STEP_SHARE * abs(np.log(factor))


def _sharp_over_days(frame: pl.DataFrame, column: str, day: int, jump: float, rows: PositiveRows | None = None) -> bool:
    """Whether a daily report's units step by (nearly) the whole jump between the few reports either side of
    `day` (PERSIST_DAYS)."""
    step = _window_step(frame, column, day, PERSIST_DAYS, rows)
    return step is not None and abs(step[0] - jump) <= SHARPNESS * abs(jump)


def _cliff_day(frame: pl.DataFrame, column: str, day: int, factor: float) -> int | None:
    """The reporting day within LOCAL_DAYS reports either side of `day` (the span whose levels the split's local
    jump compares) at which the units' own reports step furthest in the factor's direction, if the median unit
    steps by at least half the factor there (UNIT_STEP_SHARE); else None. For a factor of SMALL_FACTOR or more.

    A unit's step at a day is from its last report before it to its first on or after it (at most
    ADJACENT_GAP_DAYS apart), not between calendar days: in a fortnight of few reports most units skip the
    switch's day, and a few days either side hold some units' converted reports on the wrong side of a day
    after it (a window step there is as large as on the day). Each unit's own reports step by the factor only
    across the switch's own day."""
    positive = frame.filter(pl.col(column) > 0)
    reports = (
        positive.sort("unit_id", "day")
        .select(
            pl.col("day").shift(1).over("unit_id").alias("last"),
            pl.col("day").alias("next"),
            pl.col(column).cast(pl.Float64).log().diff().over("unit_id").alias("step"),
        )
        .filter(pl.col("step").is_not_null() & (pl.col("next") - pl.col("last") <= ADJACENT_GAP_DAYS))
    )
    reported = sorted_unique(positive["day"].to_numpy())
    if reports.height == 0:
        return None
    at = int(np.searchsorted(reported, day))
    span = reported[max(at - LOCAL_DAYS, 0) : at + LOCAL_DAYS + 1]
    span = span[(span >= reported[0] + EDGE_DAYS) & (span <= reported[-1] - EDGE_DAYS + 1)]  # as the split's
    last, following, step = (reports[c].to_numpy() for c in ("last", "next", "step"))
    direction = np.sign(np.log(factor))
    best, furthest = None, -np.inf
    for candidate in span:
        held = step[(last < candidate) & (following >= candidate)]  # each unit's reports either side of it
        if len(held) >= MIN_UNITS_FOR_STEP and float(np.median(held)) * direction > furthest:
            best, furthest = int(candidate), float(np.median(held)) * direction
    return best if best is not None and furthest >= UNIT_STEP_SHARE * abs(np.log(factor)) else None


def _whole_step(days: np.ndarray, logs: np.ndarray, day: int) -> tuple[float, float]:
    """The step between everything before and everything after `day`: many values, at the price of whatever
    else changed over the year (its standard error carries a bias allowance)."""
    before, after = logs[days < day], logs[days >= day]
    whole_se = float(np.sqrt(np.var(before) / len(before) + np.var(after) / len(after))) + WHOLE_BIAS
    return float(np.mean(after) - np.mean(before)), whole_se


def _window_step(
    frame: pl.DataFrame, column: str, day: int, window: int, rows: PositiveRows | None = None
) -> tuple[float, float] | None:
    """Median across units of each unit's log step between the `window` days before and after `day`."""
    levels = _unit_levels_around(frame, column, day, window, logged=True, rows=rows)
    if levels is None:  # polars decides
        levels = _unit_levels_plain(frame, column, day, window, logged=True)
    steps = levels[1] - levels[0]  # in the units' order, which no median depends on
    if len(steps) < MIN_UNITS_FOR_STEP:
        return None
    median = float(np.median(steps))
    return median, 1.25 * 1.4826 * float(np.median(np.abs(steps - median))) / np.sqrt(len(steps))


def _unit_levels_around(
    frame: pl.DataFrame, column: str, day: int, reports: int, logged: bool, rows: PositiveRows | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each unit's median level (of its logs if `logged`) over its positive values in the `reports` reporting
    days before `day` and over those from `day` on (`_around`), for the units with values on both sides:
    (before, after), the units in no particular order. On arrays (`rows`, the column's positive rows, if the
    caller has them), as polars takes medians (`_sorted_medians`); None (polars decides) unless the keys are
    Int64 without nulls and the levels finite Float64 numbers."""
    if frame.schema.get("unit_id") != pl.Int64 or frame.schema.get("day") != pl.Int64:
        return None
    if not logged and frame.schema[column] != pl.Float64:  # an integer median is polars' own conversion
        return None
    positive = (rows if rows is not None and rows.frame is frame else PositiveRows(frame, column)).arrays
    if positive is None:
        return None
    bounds = _around_reported(positive.reported, day, reports)
    if bounds is None:
        return np.zeros(0), np.zeros(0)
    inside = (positive.day >= bounds[0]) & (positive.day < bounds[1])  # as `_around` and the filter keep
    level = (positive.logs if logged else positive.values)[inside]
    if not np.all(np.isfinite(level)):
        return None
    if len(level) == 0:
        return np.zeros(0), np.zeros(0)
    side = positive.number[inside] * 2 + (positive.day[inside] >= day)  # a unit's values before, then after
    order = _grouped_order(side, level)
    side, level = side[order], level[order]
    starts = np.flatnonzero(np.r_[True, side[1:] != side[:-1]])
    medians = _sorted_medians(level, starts, np.diff(np.r_[starts, len(side)]))
    run = side[starts]
    both = (run[1:] == run[:-1] + 1) & (run[1:] % 2 == 1)  # a unit's before run, then its after run
    return medians[:-1][both], medians[1:][both]


def _grouped_order(group: np.ndarray, value: np.ndarray) -> np.ndarray:
    """An order of rows by group (small non-negative numbers), then value (np.lexsort((value, group)) up to the
    order of equal values, which is no matter where equal values are equal numbers): the values sorted once,
    then a stable radix sort by 16-bit group."""
    if len(group) and int(group.max()) < 1 << 16:
        by_value = np.argsort(value)
        return by_value[np.argsort(group[by_value].astype(np.uint16), kind="stable")]
    return np.lexsort((value, group))


def _unit_levels_plain(
    frame: pl.DataFrame, column: str, day: int, reports: int, logged: bool
) -> tuple[np.ndarray, np.ndarray]:
    """`_unit_levels_around` in polars, for any frame: each unit's median (of logs if `logged`) before and from
    `day` among its positive values `reports` reporting days either side, the units with both."""
    level = pl.col(column).cast(pl.Float64).log() if logged else pl.col(column)
    per_unit = (
        frame.filter(_around(frame, day, reports) & (pl.col(column) > 0))
        .group_by("unit_id")
        .agg(
            level.filter(pl.col("day") < day).median().alias("before"),
            level.filter(pl.col("day") >= day).median().alias("after"),
        )
        .drop_nulls()
    )
    return per_unit["before"].to_numpy(), per_unit["after"].to_numpy()


def _unit_step(
    frame: pl.DataFrame, column: str, day: int, pooled: tuple[float, float], rows: PositiveRows | None = None
) -> tuple[float, float]:
    """The most precise of: the pooled step, and the median across units of each unit's log step between
    the days just before and after `day` (a week or three each side). Unit by unit, a lever changed for some
    units around the same time moves only those; pooled, a measure that is rarely non-zero has more values."""
    best = pooled  # (step, standard error)
    for window in (EDGE_DAYS, LOCAL_DAYS):
        step = _window_step(frame, column, day, window, rows)
        if step is not None and step[1] < best[1]:
            best = step
    return best


def _known_factor(step: float, tolerance: float, factors: tuple[float, ...]) -> float | None:
    """The conversion factor (or its inverse) a log step matches, if one matches unambiguously.

    A large factor is matched within a share of itself: x100 seen as x75 (a real change on the same day)
    is still cents, while a factor of 2.2 must be met closely, for a real doubling would look alike."""
    options = sorted(((abs(step - np.log(f)), f) for known in factors for f in (known, 1 / known)), key=lambda t: t[0])
    best, factor = options[0]
    second = options[1][0] if len(options) > 1 else np.inf
    within = max(tolerance, FACTOR_SHARE * abs(np.log(factor)))
    return factor if best < within and best < FACTOR_MARGIN * second else None


def known_factors(steps: np.ndarray, noise: np.ndarray, factors: tuple[float, ...]) -> np.ndarray:
    """`_known_factor(step, max(FACTOR_MATCH, noise), factors)` of every step at once (NaN for None): the
    same distances, the same stable ranking of the options and the same comparisons, elementwise."""
    options = [f for known in factors for f in (known, 1 / known)]
    logs = np.array([np.log(f) for f in options])
    shares = np.array([FACTOR_SHARE * abs(np.log(f)) for f in options])
    steps = np.asarray(steps, dtype=float)
    distance = np.abs(steps[:, None] - logs[None, :])
    order = np.argsort(distance, axis=1, kind="stable")
    rows = np.arange(len(steps))
    best = distance[rows, order[:, 0]]
    second = distance[rows, order[:, 1]] if len(options) > 1 else np.full(len(steps), np.inf)
    noise = np.asarray(noise, dtype=float)
    tolerance = np.where(noise > FACTOR_MATCH, noise, FACTOR_MATCH)  # max(FACTOR_MATCH, noise), NaN -> FACTOR_MATCH
    share = shares[order[:, 0]]
    within = np.where(share > tolerance, share, tolerance)  # max(tolerance, share)
    ok = (best < within) & (best < FACTOR_MARGIN * second)
    return np.where(ok, np.array(options)[order[:, 0]], np.nan)


def _every_unit_switches(
    frame: pl.DataFrame, column: str, from_day: int, factor: float, rows: PositiveRows | None = None
) -> bool:
    """A system migration changes every unit's numbers by the same factor on the same day."""
    levels = _unit_levels_around(frame, column, from_day, UNIT_WINDOW_DAYS, logged=False, rows=rows)
    if levels is None:  # polars decides
        levels = _unit_levels_plain(frame, column, from_day, UNIT_WINDOW_DAYS, logged=False)
    if len(levels[0]) == 0:
        return False
    ratio = np.log(levels[1] / levels[0])
    step = np.log(factor)
    moved = (np.sign(ratio) == np.sign(step)) & (np.abs(ratio) > UNIT_STEP_SHARE * abs(step))
    return float(np.mean(moved)) >= UNITS_SWITCHING

"""Structural checks: the contract, the ledger, the invariants in X, and the recorded projection.

Each check returns a `contracts.audit.CheckResult` with a status and a one-line reason; the auditor never
raises on a broken world, it reports it.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import polars as pl

from auditors.schema import contract_schema_error
from auditors.worldio import (
    World,
    files_read_later,
    key_numbers,
    parse_time,
    read_and_keep,
    read_observed,
    read_text,
)
from contracts.audit import CheckResult
from contracts.errors import WorldFormatError
from contracts.frames import with_column
from contracts.hashing import file_sha256, series_sha256
from contracts.keys import BASE_TABLE, ID_COLUMNS, is_text_key, shown, template
from contracts.model import Contract, Deliverable

AUDIT_FILES = {"audit.json"}


PROBLEMS_KEPT = 20  # a report lists the first problems; the reason line names the first


def _ok(name: str, reason: str) -> CheckResult:
    return CheckResult(name=name, status="pass", reason=reason)


def _bad(name: str, reason: str, problems: list[str] | None = None) -> CheckResult:
    return CheckResult(name=name, status="fail", reason=reason, problems=(problems or [])[:PROBLEMS_KEPT])


def check_contract(world: World) -> CheckResult:
    """Schema-valid, acyclic, layers equal to longest-path depth (contracts.validate_contract)."""
    error = contract_schema_error(world.raw_contract)
    if error is not None:
        return _bad("contract", f"not valid against the contract schema: {error[:160]}")
    if world.contract is None:
        return _bad("contract", world.contract_error or "invalid contract")
    c = world.contract
    loose = [ph.id for ph in c.phenomena if not _tolerance_is_a_finding(ph, c)]
    if loose:
        return _bad(
            "contract", f"{len(loose)} phenomenon tolerance(s) too loose to be a finding, e.g. {loose[0]}", loose
        )
    return _ok("contract", f"schema-valid, acyclic, {len(c.layers)} layers by longest-path depth, {len(c.edges)} edges")


# Statistics whose tolerance must be smaller than the effect itself (else 'no effect' would pass).
SIGNED = {"slope", "log_slope", "per_capacity_slope", "interaction_coefficient", "level_shift_range"}
# Statistics with a fixed scale: a tolerance above these bounds accepts almost any answer.
ABSOLUTE_BOUNDS = {
    "relative_change_h2_vs_h1": 0.1,  # +-10 points would accept 'no change' for most real changes
    "share_of_change": 0.3,  # +-30 points would accept an even split for two drivers
    "lag_periods": 3.0,  # +-3 days cannot tell a half-week from a week
    "seasonal_amplitude": 0.3,  # the swing is a share of the slope, between 0 and 1
}
LOCATED_BOUND_SD = 1.0  # a step or bend located only within +-1 parent sd is not located at all


def tolerance_is_a_finding(statistic: str, target: float | None, tolerance: float, parent_sd: float) -> bool:
    """A tolerance wide enough to accept 'no effect' or any location makes a phenomenon unfalsifiable."""
    if target is None:
        return False
    if statistic in SIGNED:
        return tolerance < abs(target)
    if statistic in ABSOLUTE_BOUNDS:
        return tolerance <= ABSOLUTE_BOUNDS[statistic]
    if statistic in {"threshold_location", "half_saturation"}:
        return tolerance <= LOCATED_BOUND_SD * parent_sd
    return False


def _tolerance_is_a_finding(ph, contract: Contract) -> bool:
    edge = next((e for e in contract.edges if f"{e.parent}->{e.child}" == ph.edge), None) if ph.edge else None
    parent_sd = edge.params.get("parent_sd", 0.0) if edge is not None else 0.0
    return tolerance_is_a_finding(ph.statistic, ph.target, ph.tolerance, parent_sd)


def _hasher(world: World):
    """A file's SHA-256 by its name in the world, each file hashed once (world.json and the projection step
    list the same observed files). A file that the audit reads whole later (a table, the projection record)
    is read whole here and its bytes kept for its reader (`read_and_keep`): read once, the same digest."""
    later = files_read_later(world)

    def digest(rel: str) -> str:
        data = read_and_keep(world, rel) if rel in later else None
        return hashlib.sha256(data).hexdigest() if data is not None else file_sha256(world.path / rel)

    return functools.cache(digest)


def check_ledger(world: World) -> CheckResult:
    """Recorded hashes match the files, steps run in layer order, no step changed its parents."""
    contract = world.contract
    assert contract is not None
    problems: list[str] = []
    listed = world.meta.get("files", {})
    sha256 = _hasher(world)
    for rel, digest in listed.items():
        path = world.path / rel
        if not path.is_file():
            problems.append(f"{rel} listed in world.json is missing")
        elif sha256(rel) != digest:
            problems.append(f"{rel} does not match its hash in world.json")
    on_disk = {p.relative_to(world.path).as_posix() for p in world.path.rglob("*") if p.is_file()}
    # audit.json and an interrupted audit's temporary file (.audit.json.<pid>-<hex>.tmp) are the auditor's own.
    ours = {r for r in on_disk if r.startswith(".audit.json.") and r.endswith(".tmp")}
    unlisted = sorted(
        r for r in on_disk - set(listed) - {"world.json"} - AUDIT_FILES - ours if not r.startswith("tasks/")
    )
    if unlisted:
        problems.append(f"files not in world.json: {', '.join(unlisted[:3])}")
    ledger = world.ledger
    if [r.get("step") for r in ledger] != list(range(len(ledger))):
        problems.append("ledger steps are not numbered 0..n-1 in order")
    layer_steps = [r for r in ledger if str(r.get("name", "")).startswith("layer ")]
    if [r.get("variables") for r in layer_steps] != contract.layers:
        problems.append("ledger layer steps do not follow the contract's layers")
    tables = world.canonical
    produced: dict[str, str] = {}
    for record in ledger:
        if record.get("name") == "projection":
            for rel, digest in record.get("outputs", {}).items():
                if not (world.path / rel).is_file() or sha256(rel) != digest:
                    problems.append(f"projection output {rel} does not match the ledger")
            continue
        for name, digest in record.get("inputs", {}).items():
            if produced.get(name) != digest:
                problems.append(f"step {record.get('step')} read {name} in a state no earlier step committed")
        if not record.get("checks", {}).get("parents_unchanged", False):
            problems.append(f"step {record.get('step')} changed its parents")
        for name, digest in record.get("outputs", {}).items():
            if name in produced:
                problems.append(f"step {record.get('step')} overwrote {name}")
            table, column = name.split(".", 1)
            if table not in tables or column not in tables[table].columns:
                problems.append(f"{name} recorded in the ledger is missing from canonical/")
            elif series_sha256(tables[table][column]) != digest:
                problems.append(f"canonical {name} does not match its ledger hash")
            produced[name] = digest
    if problems:
        return _bad("ledger", problems[0], problems)
    return _ok(
        "ledger", f"{len(listed)} file hashes and {len(produced)} column hashes match; {len(ledger)} steps in order"
    )


def check_invariants(world: World) -> CheckResult:
    contract = world.contract
    assert contract is not None
    tables = world.canonical
    failed = []
    ranges = _range_stats(tables, contract.invariants)
    for k, inv in enumerate(contract.invariants):
        df = tables.get(inv.table)
        cols = inv.column.split(",")
        if df is None or any(c not in df.columns for c in cols):
            failed.append(f"{inv.id}: {inv.table}.{inv.column} missing")
            continue
        # Keys may never be blank; a measure is blank only where nothing happened (a closed day, a rate with
        # no trials), which ranges skip.
        if inv.kind != "range" and any(
            df[c].null_count() or (df[c].dtype.is_float() and df[c].is_nan().any()) for c in cols
        ):
            failed.append(f"{inv.id}: blank or NaN values in {inv.table}.{inv.column}")
            continue
        match inv.kind:
            case "unique_key":
                ok = _strictly_increasing(df, cols) or df.select(cols).is_duplicated().sum() == 0
            case "foreign_key":
                ref_table, ref_col = (inv.references or ".").split(".", 1)
                ok = ref_table in tables and bool(df[inv.column].is_in(tables[ref_table][ref_col].implode()).all())
            case "range":
                count, low, high = ranges[k] if k in ranges else df.select(_range(inv.column)).row(0)
                ok = count == 0 or (
                    (inv.min is None or low >= inv.min - 1e-9) and (inv.max is None or high <= inv.max + 1e-9)
                )
            case "conservation":
                ok = _conserved(df, tables, inv.column)
            case _:
                ok = False
        if not ok:
            failed.append(inv.id)
    if failed:
        return _bad("invariants", f"{len(failed)} invariant(s) violated in X: {', '.join(failed[:5])}", failed)
    return _ok("invariants", f"all {len(contract.invariants)} invariants hold in X")


def _conserved_plain(df: pl.DataFrame, tables: dict[str, pl.DataFrame], column: str) -> bool:
    """Each row's `column` is the number of events on its unit and day (0 for none)."""
    counts = tables["events"].group_by(["unit_id", "day"]).len()
    joined = df.join(counts, on=["unit_id", "day"], how="left").with_columns(pl.col("len").fill_null(0))
    return bool((joined[column] == joined["len"]).all())


CELL_KEYS = ("unit_id", "day")
MAX_CELLS_PER_ROW = 8  # a count table larger than this many cells per row is left to the join


def _conserved(df: pl.DataFrame, tables: dict[str, pl.DataFrame], column: str) -> bool:
    """`_conserved_plain`, with the events counted per unit-day cell by a bincount of the cells' positions
    in the rows' box of units by days, instead of a group-by and a join. Only for integer keys and counts
    without blanks (a blank key matches nothing in the join), a box of at most MAX_CELLS_PER_ROW cells per
    row, and a table without a column 'len' (the join would rename it); any other case the plain way."""
    events = tables.get("events")
    if events is None or "len" in df.columns or not {column, *CELL_KEYS} <= set(df.columns):
        return _conserved_plain(df, tables, column)
    if not set(CELL_KEYS) <= set(events.columns):
        return _conserved_plain(df, tables, column)
    keys = [df[k] for k in CELL_KEYS] + [events[k] for k in CELL_KEYS]
    if df.is_empty() or not all(s.dtype in INTEGER_ORDER and not s.null_count() for s in [*keys, df[column]]):
        return _conserved_plain(df, tables, column)
    if keys[0].dtype != keys[2].dtype or keys[1].dtype != keys[3].dtype:  # keys of one type, as the generator's
        return _conserved_plain(df, tables, column)
    lows = [int(keys[0].min()), int(keys[1].min())]  # type: ignore[arg-type]
    spans = [int(keys[0].max()) - lows[0] + 1, int(keys[1].max()) - lows[1] + 1]  # type: ignore[arg-type]
    if spans[0] * spans[1] > MAX_CELLS_PER_ROW * (df.height + events.height):
        return _conserved_plain(df, tables, column)
    unit, day = (k.to_numpy().astype(np.int64) - low for k, low in zip(keys[2:], lows, strict=True))
    inside = (unit >= 0) & (unit < spans[0]) & (day >= 0) & (day < spans[1])  # events outside match no row
    counts = np.bincount(unit[inside] * spans[1] + day[inside], minlength=spans[0] * spans[1])
    unit, day = (k.to_numpy().astype(np.int64) - low for k, low in zip(keys[:2], lows, strict=True))
    return bool((counts[unit * spans[1] + day] == df[column].to_numpy().astype(np.int64)).all())


def _range(column: str, tag: str = "") -> list[pl.Expr]:
    """The count, least and greatest of a column's values as numbers, blanks and NaN left out (one pass)."""
    values = pl.col(column).drop_nulls().cast(pl.Float64).drop_nans()
    return [values.len().alias(f"n{tag}"), values.min().alias(f"lo{tag}"), values.max().alias(f"hi{tag}")]


def _range_stats(tables: dict[str, pl.DataFrame], invariants: list) -> dict[int, tuple]:
    """`_range` of each range invariant (by its position), those of one table in one select instead of one
    each. A table whose select fails is left out (its invariants are then computed, and fail, one by one)."""
    by_table: dict[str, list[int]] = {}
    for k, inv in enumerate(invariants):
        if inv.kind == "range" and inv.table in tables and inv.column in tables[inv.table].columns:
            by_table.setdefault(inv.table, []).append(k)
    stats = {}
    for table, positions in by_table.items():
        try:
            row = tables[table].select(e for k in positions for e in _range(invariants[k].column, str(k))).row(0)
        except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - each one's own select raises its error
            continue
        stats.update((k, row[3 * i : 3 * i + 3]) for i, k in enumerate(positions))
    return stats


def _strictly_increasing(df: pl.DataFrame, cols: list[str]) -> bool:
    """Whether the rows' integer keys `cols` strictly increase (in the order of `cols`), so none repeats: a
    table written in key order is seen unique in one pass instead of hashing every key. False for any
    other table (the caller then looks for repeats), for keys that are not integers, and for blank keys."""
    if df.height < 2 or len(set(cols)) != len(cols) or not all(df.schema[c].is_integer() for c in cols):
        return False
    later, tied = pl.lit(False), pl.lit(True)  # row i vs row i-1: greater on the columns so far / equal on them
    for c in cols:  # compared, never subtracted: a difference of integers can wrap around
        previous = pl.col(c).shift(1)
        later, tied = later | (tied & (pl.col(c) > previous)), tied & (pl.col(c) == previous)
    return bool(df.select(later.slice(1).all(ignore_nulls=False)).item())


# --- projection: undo the recorded defects on E and compare with the projection of X ------------------


def clean_view(d: Deliverable, contract: Contract, tables: dict[str, pl.DataFrame], order: list[str]) -> pl.DataFrame:
    """The auditor's own projection of X for one deliverable (keys as shown, integer days and seconds), its
    rows (open unit-days, answered surveys) sorted by the recorded `order` columns."""
    view = _schedule_view(d, contract, tables) if d.grain == "schedule" else _table_view(d, contract, tables)
    return sorted_rows(view, order) if order else view


INTEGER_ORDER = {pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32}  # all fit an int64
MAX_KEY = 2**63 - 1  # the combined key of integer order columns must fit an int64
KEYED_SORT_ROWS = 4096  # below this the plain sort costs less than finding the key's ranges (measured)
RUN_ROWS = 64  # keys whose sorted runs are longer than this on average are sorted as runs (measured)


def sorted_rows(view: pl.DataFrame, order) -> pl.DataFrame:
    """view.sort(order, maintain_order=True). Where the order columns are integers without blanks (days,
    seconds, numeric keys), their values are combined into one int64 key (mixed radix: the first column
    weighs most), whose stable argsort is the same row order in one pass instead of a comparison of rows
    column by column (a key in no order is sorted the faster unstable way, and kept only if it has no ties,
    which leave just one order); any other case (text, blanks, key too wide, names that are not columns)
    the plain sort, which also raises what it raises."""
    names = order if isinstance(order, list) else []
    if not names or view.height < KEYED_SORT_ROWS or len(set(map(str, names))) != len(names):
        return view.sort(order, maintain_order=True)
    if not all(isinstance(c, str) and c in view.columns and view.schema[c] in INTEGER_ORDER for c in names):
        return view.sort(order, maintain_order=True)
    columns = [view[c] for c in names]
    if any(c.null_count() for c in columns):
        return view.sort(order, maintain_order=True)
    lows = [int(c.min()) for c in columns]  # type: ignore[arg-type]
    spans = [int(c.max()) - low + 1 for c, low in zip(columns, lows, strict=True)]  # type: ignore[arg-type]
    if np.prod(np.array(spans, dtype=object)) > MAX_KEY:
        return view.sort(order, maintain_order=True)
    key = np.zeros(view.height, dtype=np.int64)
    for column, low, span in zip(columns, lows, spans, strict=True):  # below MAX_KEY at every step: no wrap
        key = key * span + (column.to_numpy().astype(np.int64) - low)
    descents = int(np.count_nonzero(key[1:] < key[:-1]))
    if descents == 0:
        return view  # already in order (an events file by its time and key): the stable sort keeps every row
    if descents * RUN_ROWS < len(key):  # long sorted runs (a daily file by day, written unit by unit)
        return view[np.argsort(key, kind="stable")]  # the stable sort merges runs: faster than any other here
    rows = np.argsort(key)  # not stable, but 2-5x faster than the stable sort on keys in no order (measured)
    ordered = key[rows]
    if not (ordered[1:] > ordered[:-1]).all():  # ties (rows whose order keys repeat): their order matters
        rows = np.argsort(key, kind="stable")
    return view[rows]  # no ties: the only order that sorts the key, so the stable sort's


def _shown(d: Deliverable, c, tables: dict[str, pl.DataFrame], ids: pl.Expr) -> pl.Expr:
    """The key a column shows for the entity ids in `ids` (a code, a system's own id, a name or a UUID)."""
    table, column = shown(d, c)  # type: ignore[misc]
    source = tables[table]
    id_column = {"units": "unit_id", "parties": "party_id", "events": "event_id"}[table]
    return _replace(ids, source[id_column], source[column])


def _shown_on_own_rows(d: Deliverable, c, tables: dict[str, pl.DataFrame]) -> pl.Expr | None:
    """`_shown(d, c, tables, pl.col(id))` (aliased) where the file's rows are rows of the entity table itself
    (an events file's event key): each row's id, unique in the table, finds that same row, so the key is
    the row's own shown column, taken as it is instead of looked up. None in any other case."""
    table, column = c.source.split(".", 1)
    shown_table, shown_column = shown(d, c)  # type: ignore[misc]
    if table != shown_table or table != BASE_TABLE[d.grain] or ID_COLUMNS.get(column) != table:
        return None
    if tables[table].is_empty() or not _unique_keys(tables[table][column]):
        return None  # the plain lookup's dict keeps the last of repeated keys; no keys leave ids' type as is
    return pl.col(shown_column).alias(c.name)


def _unique_keys(keys: pl.Series) -> bool:
    """No key blank, none repeated (then a lookup by them needs no dict)."""
    return keys.null_count() == 0 and (_increasing(keys) or not keys.is_duplicated().any())


def _replace(ids: pl.Expr, keys: pl.Series, values: pl.Series) -> pl.Expr:
    """ids.replace_strict(dict(zip(keys, values)), return_dtype=values.dtype): the key and value columns
    passed as they are when the keys are unique and present (the dict would hold the same pairs), instead
    of a dict of every row built in Python."""
    if _unique_keys(keys):
        return ids.replace_strict(keys, values, return_dtype=values.dtype)
    lookup = dict(zip(keys.to_list(), values.to_list(), strict=True))
    return ids.replace_strict(lookup, return_dtype=values.dtype)


def _increasing(keys: pl.Series) -> bool:
    """Integer ids in strictly increasing order (a table's ids usually are): none repeats, seen in one pass
    instead of hashing them all."""
    if keys.dtype != pl.Int64 or keys.null_count():
        return False
    return bool((keys.slice(1) > keys.slice(0, len(keys) - 1)).all())  # compared: a difference can wrap around


def _table_view(d: Deliverable, contract: Contract, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    try:
        exprs = _view_columns(d, tables)
    except Exception:
        if (keep := _kept_rows(d, contract)) is not None:
            tables[BASE_TABLE[d.grain]].filter(keep)  # the whole table's filter ran first: its error comes first
        raise
    return _reported_rows(d, contract, tables, exprs).select(exprs)


def _view_columns(d: Deliverable, tables: dict[str, pl.DataFrame]) -> list[pl.Expr]:
    """The file's columns as expressions on its base table's rows."""
    base = BASE_TABLE[d.grain]
    schema = tables[base].schema  # the reported rows' too: a filter keeps the columns
    exprs = []
    for c in d.columns:
        table, column = c.source.split(".", 1)
        if shown(d, c) is not None:
            own = _shown_on_own_rows(d, c, tables)
            exprs.append(own if own is not None else _shown(d, c, tables, pl.col(column)).alias(c.name))
            continue
        if table == "units" and base != "units":
            units = tables["units"]
            exprs.append(_replace(pl.col("unit_id"), units["unit_id"], units[column]).alias(c.name))
            continue
        expr = pl.col(column)
        if c.decimals is not None and schema[column].is_float():
            expr = expr.round(c.decimals).fill_nan(None)
        exprs.append(expr.alias(c.name))
    return exprs


def _reported_rows(
    d: Deliverable, contract: Contract, tables: dict[str, pl.DataFrame], exprs: list[pl.Expr]
) -> pl.DataFrame:
    """The base table's rows a file reports: open unit-days for a daily file, answered surveys for a
    survey file, every row otherwise; of a filtered table only the columns `exprs` and the filter read
    are filtered (a daily file shows a few of the panel's many columns), when all of them are there (else
    the whole table, so that a missing column raises as it did)."""
    frame = tables[BASE_TABLE[d.grain]]
    keep = _kept_rows(d, contract)
    if keep is None:
        return frame
    read = {name for e in [*exprs, keep] for name in e.meta.root_names()}
    if read <= set(frame.columns):
        frame = frame.select([name for name in frame.columns if name in read])
    return frame.filter(keep)


def _kept_rows(d: Deliverable, contract: Contract) -> pl.Expr | None:
    """Which base-table rows a file reports, None for all of them."""
    if d.grain == "panel":
        return pl.col("open") == 1
    if d.grain == "event_detail":
        surveys = {v.name for v in contract.variables if v.observe == "scale"}
        answered = [f"responded_{c.source.split('.', 1)[1]}" for c in d.columns if c.source.split(".", 1)[1] in surveys]
        if answered:
            return pl.any_horizontal([pl.col(a) == 1 for a in answered])
    return None


def _schedule_view(d: Deliverable, contract: Contract, tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    key, fld, day, value = (c.name for c in d.columns)
    parts = []
    panel = tables["panel"].sort(["unit_id", "day"])
    for f in d.fields:
        v = contract.variable(f.source.split(".", 1)[1])
        rounded = panel.select("unit_id", "day", pl.col(v.name).round(v.decimals).alias("v"))
        changes = rounded.filter((pl.col("v") != pl.col("v").shift(1).over("unit_id")) | (pl.col("day") == 0))
        parts.append(
            changes.select(
                _shown(d, d.columns[0], tables, pl.col("unit_id")).alias(key),
                pl.lit(f.name).alias(fld),
                pl.col("day").alias(day),
                pl.col("v").cast(pl.Float64).alias(value),
            )
        )
    return pl.concat(parts)


def read_parsed(world: World, d: Deliverable) -> pl.DataFrame:
    """One observed file read and parsed once per audit (three checks analyse every file)."""
    if d.file not in world.parsed_cache:
        world.parsed_cache[d.file] = parse_observed(world, d, read_observed(world, d))
    return world.parsed_cache[d.file]


def parse_observed(world: World, d: Deliverable, frame: pl.DataFrame) -> pl.DataFrame:
    """Numeric keys to their numbers, dates to day (or second) offsets, in the dictionary's columns; names
    and UUIDs stay text."""
    exprs: list[pl.Expr | pl.Series] = []
    for c in d.columns:
        if c.name not in frame.columns or c.format is None or is_text_key(c):
            continue
        if template(c) is not None:
            exprs.append(key_numbers(frame[c.name]))
        else:
            seconds = c.source.split(".", 1)[1].endswith("time")
            exprs.append(parse_time(frame, c.name, c.format, world.start, seconds=seconds).cast(pl.Int64).alias(c.name))
    return frame.with_columns(exprs) if exprs else frame


def _blanks(column: pl.Series, rows) -> np.ndarray:
    """Whether each of the rows is empty (null, or NaN in a float column)."""
    picked = column.gather(np.asarray(rows, dtype=np.int64))
    blank = picked.is_null()
    if picked.dtype.is_float():
        blank = blank | picked.is_nan().fill_null(True)
    return blank.to_numpy()


def _blank_rows(column: pl.Series, values: np.ndarray, rows, numeric: bool) -> np.ndarray:
    """`_blanks(column, rows)`, read off `values` (the numeric column as floats, null as NaN) when the rows
    are integers within the column; any other case (text, a row out of range) the plain way."""
    if numeric and len(rows):
        index = np.asarray(rows)
        if index.dtype.kind == "i" and index.ndim == 1 and index.min() >= 0 and index.max() < len(values):
            return np.isnan(values[index])
    return _blanks(column, rows)


MAX_ROW = 1 << 40  # far beyond any file's rows, far below where int64 sums of ranges wrap


def _rows(ranges: list[list[int]]) -> np.ndarray:
    """The rows of [start, end) ranges, in order: `_rows_plain`, in one pass for integer ranges (a record
    lists hundreds) instead of an arange each."""
    if not ranges:
        return np.zeros(0, dtype=np.int64)
    try:
        bounds = np.asarray(ranges)
    except (ValueError, TypeError, OverflowError):
        bounds = None
    if bounds is None or bounds.dtype != np.int64 or bounds.ndim != 2 or bounds.shape[1] != 2:
        return _rows_plain(ranges)
    if (bounds < -MAX_ROW).any() or (bounds > MAX_ROW).any():  # the sums below could wrap: the plain way refuses
        return _rows_plain(ranges)
    starts, lengths = bounds[:, 0], np.maximum(bounds[:, 1] - bounds[:, 0], 0)  # an empty range adds no row
    if lengths.sum(dtype=np.float64) > MAX_ROW:
        return _rows_plain(ranges)
    before = np.cumsum(lengths) - lengths  # rows of the earlier ranges
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - before, lengths)


def _rows_plain(ranges: list[list[int]]) -> np.ndarray:
    return np.concatenate([np.arange(a, b) for a, b in ranges]) if ranges else np.zeros(0, dtype=np.int64)


TEXT_SAMPLE = 1024  # a text column's first rows show whether its texts repeat
TEXT_REPEATS = 4  # texts mapped once per distinct text when the first rows repeat each this often on average


def _variants_restored(column: pl.Series, changes: list) -> pl.Series | None:
    """A text column with its recorded key variants replaced by their originals; None unless the column and
    the record are all text (then `undo` maps each value itself). A column whose texts repeat (a unit's name
    on each of its rows) is mapped once per distinct text, each row taking its text's by its place in an
    Enum of them; in any other only the rows showing a variant (a few of a file's keys) are looked at and
    replaced: a replace over every row costs twice the search for them."""
    back = {variant: original for original, variant, _how in changes}
    if column.dtype != pl.String or column.null_count() == column.len() or not back:
        return None
    if not all(isinstance(x, str) for pair in back.items() for x in pair):
        return None
    variants = list(back)
    sample = column.head(TEXT_SAMPLE)
    if sample.n_unique() * TEXT_REPEATS <= sample.len():  # names on many rows each: mapped once per distinct text
        distinct = column.drop_nulls().unique()
        texts = distinct.to_list()
        present = set(texts)
        missing = [v for v in variants if v not in present]
        if missing:
            raise ValueError(f"{column.name} should show the recorded variant {missing[0]!r}, which it never does")
        codes = column.cast(pl.Enum(distinct)).to_physical()  # each row's distinct text by its place; blank: none
        return pl.Series(column.name, [back.get(t, t) for t in texts], dtype=pl.String).gather(codes)
    rows = column.is_in(pl.Series(variants, dtype=pl.String).implode()).arg_true()  # blank rows show none
    shown = column.gather(rows)
    present = set(shown.unique().to_list())
    missing = [v for v in variants if v not in present]
    if missing:
        raise ValueError(f"{column.name} should show the recorded variant {missing[0]!r}, which it never does")
    return column.clone().scatter(rows, shown.replace(variants, list(back.values())))  # the frame's stays


def undo(frame: pl.DataFrame, records: list[dict]) -> pl.DataFrame:
    """The auditor's own inverse of each recorded defect, applied in reverse order (vectorised)."""
    for r in reversed(records):
        kind = r["kind"]
        if kind == "duplicates":
            inserted = r["inserted_at"]
            if inserted and max(inserted) >= frame.height:
                raise ValueError(f"recorded duplicate rows beyond the file's {frame.height} rows")
            keep = np.ones(frame.height, dtype=bool)
            keep[r["inserted_at"]] = False
            frame = frame.filter(pl.Series(keep))
            continue
        column = r["column"]
        numeric = frame.schema[column].is_numeric()
        if kind == "id_variants" and (restored := _variants_restored(frame[column], r["changes"])) is not None:
            frame = with_column(frame, restored)
            continue
        values = (
            frame[column].cast(pl.Float64).to_numpy().copy()
            if numeric
            else np.array(frame[column].to_list(), dtype=object)
        )
        if kind == "id_variants":
            back = {variant: original for original, variant, _how in r["changes"]}
            present = set(values.tolist())
            missing = [v for v in back if v not in present]
            if missing:
                raise ValueError(f"{column} should show the recorded variant {missing[0]!r}, which it never does")
            listed = values.tolist()
            values = np.array(list(map(back.get, listed, listed)), dtype=object)  # back.get(v, v) for each v
        elif kind == "missing":
            present = [r["rows"][i] for i in np.flatnonzero(~_blank_rows(frame[column], values, r["rows"], numeric))]
            if present:
                raise ValueError(f"{column} row {present[0]} is recorded as blanked but holds {values[present[0]]!r}")
            if r["rows"]:
                values[np.array(r["rows"])] = np.array(
                    [np.nan if v is None else v for v in r["values"]] if numeric else r["values"], dtype=values.dtype
                )
        elif kind == "delay":
            values[np.array(r["rows"], dtype=np.int64)] -= np.array(r["days"], dtype=float) * r.get("step", 1)
        elif kind == "unit_drift":
            rows = _rows(r["row_ranges"])
            values[rows] = np.round(values[rows] / r["factor"], r["decimals"])
        elif kind == "schema_drift":
            rows = _rows(r["row_ranges"])
            if not _blank_rows(frame[column], values, rows, numeric).all():
                raise ValueError(f"{column} should be empty after its rename to {r['new_column']}, but holds values")
            new = frame[r["new_column"]]
            new = new.cast(pl.Float64).to_numpy() if numeric else np.array(new.to_list(), dtype=object)
            values[rows] = new[rows]
            frame = frame.drop(r["new_column"])
        else:
            raise ValueError(f"unknown defect kind {kind!r}")
        frame = with_column(frame, pl.Series(column, values, strict=False, nan_to_null=numeric))
    return frame


def frames_match(observed: pl.DataFrame, expected: pl.DataFrame) -> str | None:
    """None if equal (floats to 1e-6 relative), else the first difference in words."""
    if observed.columns != expected.columns:
        return f"columns {observed.columns} differ from {expected.columns}"
    if observed.height != expected.height:
        return f"{observed.height} rows, expected {expected.height}"
    for name in expected.columns:
        a, b = observed[name], expected[name]
        if a.dtype == b.dtype and (a.dtype.is_numeric() or a.dtype == pl.String) and a.equals(b):
            continue  # the same values of one type (equal, or both blank, or both NaN): every row matches
        if b.dtype.is_numeric() and a.dtype.is_numeric():
            x, y = a.cast(pl.Float64).to_numpy(), b.cast(pl.Float64).to_numpy()
            same = (x == y) | (np.isnan(x) & np.isnan(y))  # equal values are close: the test only where not
            if not same.all():
                same = np.isclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True)
        else:
            same = (a.cast(pl.String).fill_null("\0") == b.cast(pl.String).fill_null("\0")).to_numpy()
        if not same.all():
            row = int(np.flatnonzero(~same)[0])
            return f"column {name!r} row {row}: {a[row]!r} vs {b[row]!r}"
    return None


def check_projection(world: World) -> CheckResult:
    """E is X plus exactly the recorded defects, in the recorded row order; each system's data dictionary
    documents every column its files ship."""
    contract = world.contract
    assert contract is not None
    files = {f["file"]: f for f in world.projection.get("files", [])}
    problems = []
    undone = 0
    tables = [d for d in contract.deliverables if d.grain != "dictionary"]
    for d in tables:
        if d.file not in files:
            problems.append(f"{d.file}: no projection record")
            continue
        records = files[d.file].get("defects", [])
        try:
            observed = read_parsed(world, d)
            restored = undo(observed, records)
        except Exception as exc:  # noqa: BLE001 - a file that cannot be undone is a failed check, not a crash
            problems.append(f"{d.file}: cannot undo its recorded defects ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        difference = frames_match(restored, clean_view(d, contract, world.canonical, files[d.file].get("order", [])))
        if difference:
            problems.append(f"{d.file}: after undoing its record, {difference}")
        undone += len(records)
    problems += _dictionary_problems(world, contract)
    if problems:
        return _bad("projection", problems[0], problems)
    return _ok(
        "projection",
        f"undoing {undone} recorded defects reproduces the projection of X in all {len(tables)} files; "
        "every column is documented",
    )


def _dictionary_problems(world: World, contract: Contract) -> list[str]:
    problems = []
    for doc in (d for d in contract.deliverables if d.grain == "dictionary"):
        try:
            text = read_text(world, doc.file)
        except WorldFormatError as exc:
            problems.append(str(exc))
            continue
        for d in (x for x in contract.deliverables if x.system == doc.system and x.grain != "dictionary"):
            undocumented = [c.name for c in d.columns if f"| {c.name} |" not in text]
            if d.file not in text or undocumented:
                problems.append(f"{doc.file}: does not document {d.file} {undocumented[:3]}")
    return problems

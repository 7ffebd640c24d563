"""Observation defects: small wrappers that take a table and return a new one plus an exact record.

A defect never mutates its input (polars frames are immutable) and its record holds everything needed to
undo it: `undo(apply(df)) == df` for every defect, which the tests check property-style. Records name
observed columns, rows (0-based positions in the frame the defect saw) and parameters.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import polars as pl

from contracts.frames import with_column

Record = dict[str, Any]


class Defect:
    kind: ClassVar[str]

    def apply(self, df: pl.DataFrame, rng: np.random.Generator) -> tuple[pl.DataFrame, Record]:
        raise NotImplementedError

    @staticmethod
    def undo(df: pl.DataFrame, record: Record) -> pl.DataFrame:
        raise NotImplementedError


def _pick(rng: np.random.Generator, n: int, rate: float, minimum: int = 1) -> np.ndarray:
    k = min(n, max(minimum, int(round(n * rate)))) if rate > 0 else 0
    return np.sort(rng.choice(n, size=k, replace=False)) if k else np.zeros(0, dtype=np.int64)


def _set_rows(df: pl.DataFrame, column: str, rows: Any, values: Any) -> pl.DataFrame:
    """`df` with `values` (a list or a series) written into `column` at the row positions `rows`.

    The values become a series of the column's own type, built strictly (a value that does not fit raises, as
    building the whole column from a list did) and scattered into a copy: a Python list of the whole column
    cost a hundred times more than the rows a defect touches.
    """
    dtype = df.schema[column]
    rows = np.asarray(rows, dtype=np.int64)[: len(values)]
    if not isinstance(values, pl.Series) or values.dtype != dtype:
        values = pl.Series(column, list(values), dtype=dtype)
    values = values[: len(rows)]
    if dtype == pl.Null:  # polars cannot scatter into an all-null column; nothing to write but nulls
        return with_column(df, pl.Series(column, [None] * df.height, dtype=dtype))
    series = df[column].clone()  # scatter writes in place: never into the caller's frame
    series.scatter(rows, values)
    return with_column(df, series)


def _values_at(series: pl.Series, rows: np.ndarray) -> list:
    """`series.gather(rows).to_list()`; read through numpy for a column of plain numbers without blanks,
    whose values numpy holds as polars does (a polars gather is a query: ~0.3 ms a call)."""
    if series.dtype in (pl.Int64, pl.Float64) and not series.null_count():
        return series.to_numpy()[rows].tolist()
    return _at(series, rows).to_list()


def _at(series: pl.Series, rows: np.ndarray) -> pl.Series:
    """`series.gather(rows)` for an integer numpy array of row positions: indexing by it gathers without the
    query `gather` runs (~0.1 ms against ~0.25 ms a call)."""
    return series[rows]


def to_ranges(rows: np.ndarray) -> list[list[int]]:
    """Sorted row positions as half-open [start, stop) runs: bulk defects touch long contiguous stretches."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(rows) != 1)
    starts = np.concatenate([[rows[0]], rows[breaks + 1]])
    stops = np.concatenate([rows[breaks] + 1, [rows[-1] + 1]])
    with _collector_paused():
        return np.stack([starts, stops], axis=1).tolist()  # Python ints, as the JSON record holds them


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while thousands of small lists of numbers are made (a panel's
    drifted rows, broken by blanks, make a few thousand ranges): each collection their allocations trigger
    walks the young objects to find no cycle (lists of numbers make none), ~1 of the 1.3 ms `tolist` took
    for 4k ranges. Left as it was found (a caller may have disabled it); the records are the same either way."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def from_ranges(ranges: list[list[int]]) -> np.ndarray:
    if not ranges:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in ranges])


RESEND_WITHIN_ROWS = 30  # a re-sent duplicate lands within the next 29 rows (a retry, not a replay days later)

SPELLINGS = (
    ("upper", lambda s: s.upper()),
    ("lower", lambda s: s.lower()),
    ("no_punctuation", lambda s: re.sub(r"[.,'&-]", "", s).replace("  ", " ")),
    ("and_for_ampersand", lambda s: s.replace(" and ", " & ") if " and " in s else s.replace("&", "and")),
    ("suffix_dropped", lambda s: re.sub(r",?\s+(Inc|LLC|Ltd|PLC|Group|and Sons|Co)\.?$", "", s)),
    ("extra_space", lambda s: s.replace(" ", "  ", 1)),
    ("transposed", lambda s: s[:2] + s[3] + s[2] + s[4:] if len(s) > 4 else s.upper()),
)


@dataclass(frozen=True)
class SpellingVariants(Defect):
    """A name spelled differently by another system (case, punctuation, suffix, typo): each chosen name is
    spelled one way wherever it appears in the file. The record maps every variant back to the original."""

    column: str
    rate: float
    kind: ClassVar[str] = "id_variants"

    def apply(self, df, rng):
        names = sorted(df[self.column].drop_nulls().unique().to_list())  # distinct first: a column has few
        taken = set(names)
        changes = []
        for i in _pick(rng, len(names), self.rate).tolist() if names else []:
            label, fn = SPELLINGS[int(rng.integers(len(SPELLINGS)))]
            original = names[i]
            shown = fn(original)
            if shown == original:
                shown = original.upper() if original != original.upper() else original.lower()
            if shown in taken:  # a variant must not collide with another name of the file
                continue
            taken.add(shown)
            changes.append([original, shown, label])
        mapping = {original: shown for original, shown, _ in changes}
        if names and df.schema[self.column] == pl.String:
            out = with_column(df, respelled_names(df[self.column], names, mapping))
        else:  # blanks only (nothing to look up), or not a text column
            out = df.with_columns(respelled(pl.col(self.column), mapping))
        return out, {"kind": self.kind, "column": self.column, "changes": changes}

    @staticmethod
    def undo(df, record):
        back = {shown: original for original, shown, _ in record["changes"]}
        return df.with_columns(pl.col(record["column"]).replace(back))


def respelled(column: pl.Expr, mapping: dict[str, str]) -> pl.Expr:
    """`column.replace(mapping)` for a text column: the names a mapping does not list kept as they are.
    `replace_strict` with the column itself as the default gives the same column (values, blanks, flags) at
    ~30% less CPU on an event log's 60k names (2.2 against 3.1 ms).
    """
    return column.replace_strict(mapping, default=column, return_dtype=pl.String)


def respelled_names(column: pl.Series, names: list[str], mapping: dict[str, str]) -> pl.Series:
    """`respelled` for a text column whose values, blanks aside, are all among the distinct `names`: each row
    finds its name's position through an Enum of the names and takes the name as respelled from a table of
    them (~1 against ~2.5 ms on an event log's 60k names: a column of a few dozen names repeated)."""
    respelled_table = pl.Series(column.name, [mapping.get(name, name) for name in names], dtype=pl.String)
    return respelled_table.gather(column.cast(pl.Enum(names)).to_physical())


@dataclass(frozen=True)
class MissingValues(Defect):
    """Values lost by a system (blank cells), at random rows."""

    column: str
    rate: float
    kind: ClassVar[str] = "missing"

    def apply(self, df, rng):
        rows = _pick(rng, df.height, self.rate)
        original = _values_at(df[self.column], rows)
        out = _set_rows(df, self.column, rows, [None] * len(rows))
        return out, {"kind": self.kind, "column": self.column, "rows": rows.tolist(), "values": original}

    @staticmethod
    def undo(df, record):
        return _set_rows(df, record["column"], record["rows"], record["values"])


@dataclass(frozen=True)
class Duplicates(Defect):
    """Rows re-sent by a system: exact copies inserted shortly after the original."""

    rate: float
    kind: ClassVar[str] = "duplicates"

    def apply(self, df, rng):
        sources = _pick(rng, df.height, self.rate)
        offsets = rng.integers(1, RESEND_WITHIN_ROWS, size=len(sources))
        position = np.concatenate(
            [np.arange(df.height, dtype=float), np.minimum(sources + offsets - 0.5, df.height - 0.5)]
        )
        origin = np.concatenate([np.arange(df.height), sources])
        order = np.argsort(position, kind="stable")
        taken = origin[order]
        inserted = np.flatnonzero(order >= df.height)
        record = {"kind": self.kind, "inserted_at": inserted.tolist(), "copies_of": taken[inserted].tolist()}
        return df[taken], record  # rows gathered by a numpy index (a list of ints is converted first)

    @staticmethod
    def undo(df, record):
        keep = np.ones(df.height, dtype=bool)
        keep[record["inserted_at"]] = False
        return df.filter(pl.Series(keep))


@dataclass(frozen=True)
class ReportingDelay(Defect):
    """Entries logged late: the recorded day is later than the true day by 1..max_days."""

    column: str
    rate: float
    max_days: int
    after_day: int = -1  # only entries dated after this day are delayed (a log's opening rows are not late)
    step: int = 1  # units of the column per day: 1 for day numbers, 86400 for timestamps in seconds
    # Days an entry may not be delayed from: a row posted across the day its system switched units would
    # carry old units into the new period, an error no analyst could tell from a real value.
    avoid: tuple[int, ...] = ()
    kind: ClassVar[str] = "delay"

    def apply(self, df, rng):
        day = df[self.column] // self.step
        allowed = (df[self.column] > self.after_day).fill_null(False) & ~day.is_in(list(self.avoid)).fill_null(False)
        eligible = np.flatnonzero(allowed.to_numpy())
        rows = np.sort(eligible[_pick(rng, len(eligible), self.rate)]) if len(eligible) else eligible
        days = rng.integers(1, self.max_days + 1, size=len(rows))
        values = _at(df[self.column], rows) + pl.Series(days * self.step)
        out = _set_rows(df, self.column, rows, values)
        return out, {
            "kind": self.kind,
            "column": self.column,
            "rows": rows.tolist(),
            "days": days.tolist(),
            "step": self.step,
        }

    @staticmethod
    def undo(df, record):
        shift = pl.Series(record["days"], dtype=pl.Int64) * record.get("step", 1)
        values = df[record["column"]].gather(record["rows"]) - shift
        return _set_rows(df, record["column"], record["rows"], values)


@dataclass(frozen=True)
class UnitDrift(Defect):
    """From a migration day on, a system reports a quantity in another unit (USD -> cents, kWh -> Wh)."""

    column: str
    day_column: str
    from_day: int
    factor: float
    unit_from: str
    unit_to: str
    decimals: int
    kind: ClassVar[str] = "unit_drift"

    def apply(self, df, rng):
        rows = np.flatnonzero(
            (df[self.day_column] >= self.from_day).to_numpy() & df[self.column].is_not_null().to_numpy()
        )
        scaled = (_at(df[self.column], rows) * self.factor).round(drift_decimals(self.decimals, self.factor))
        out = _set_rows(df, self.column, rows, scaled)
        return out, {
            "kind": self.kind,
            "column": self.column,
            "day_column": self.day_column,
            "from_day": self.from_day,
            "factor": self.factor,
            "unit_from": self.unit_from,
            "unit_to": self.unit_to,
            "decimals": self.decimals,
            "row_ranges": to_ranges(rows),
        }

    @staticmethod
    def undo(df, record):
        rows = from_ranges(record["row_ranges"])
        values = (df[record["column"]].gather(rows) / record["factor"]).round(record["decimals"])
        return _set_rows(df, record["column"], rows, values)


def drift_decimals(decimals: int, factor: float) -> int:
    """Decimals to keep after scaling so that dividing back and rounding restores the value exactly."""
    if factor >= 1:
        return max(decimals - int(np.floor(np.log10(factor))), 0)
    return decimals + int(np.ceil(-np.log10(factor)))


@dataclass(frozen=True)
class SchemaDrift(Defect):
    """From a release day on, a column is reported under a new name; the old column is left empty."""

    column: str
    new_column: str
    day_column: str
    from_day: int
    kind: ClassVar[str] = "schema_drift"

    def apply(self, df, rng):
        late = df[self.day_column] >= self.from_day
        rows = np.flatnonzero(late.to_numpy())
        out = df.with_columns(
            pl.when(late).then(None).otherwise(pl.col(self.column)).alias(self.column),
            pl.when(late).then(pl.col(self.column)).otherwise(None).alias(self.new_column),
        )
        return out, {
            "kind": self.kind,
            "column": self.column,
            "new_column": self.new_column,
            "day_column": self.day_column,
            "from_day": self.from_day,
            "row_ranges": to_ranges(rows),
        }

    @staticmethod
    def undo(df, record):
        late = np.zeros(df.height, dtype=bool)
        late[from_ranges(record["row_ranges"])] = True
        merged = pl.when(pl.Series(late)).then(pl.col(record["new_column"])).otherwise(pl.col(record["column"]))
        return df.with_columns(merged.alias(record["column"])).drop(record["new_column"])


DEFECTS: dict[str, type[Defect]] = {
    d.kind: d for d in (SpellingVariants, MissingValues, Duplicates, ReportingDelay, UnitDrift, SchemaDrift)
}


def undo_all(df: pl.DataFrame, records: list[Record]) -> pl.DataFrame:
    """Undo a file's defects in reverse order of application."""
    for record in reversed(records):
        df = DEFECTS[record["kind"]].undo(df, record)
    return df

"""Estimators: recover each phenomenon of the contract from a Dataset (built from X or from E).

For a child variable the auditor fits `y ~ 1 + features of every incoming edge`, one feature family per
mechanism kind; the nonlinear parameters (threshold location, half-saturation scale, lag, seasonal period)
are found by scanning, one edge at a time with the others held, twice over. Scans score a candidate by the
variance it explains beyond the other features (QR projection), on at most 20k rows; the final fit uses
every row. Definitions the contract fixes (which transform, the moderator's centre and scale) are read
from it; everything estimated is estimated from the data.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import polars as pl

from auditors.dataset import DENSE_IDS_SPAN, Dataset, rows_in_span
from auditors.estimators import EPS, ESTIMATORS, at_cells, carry_forward, projections
from contracts.calendar import date_factors, months, weekdays
from contracts.model import Contract, Edge, Phenomenon

SCAN_ROWS = 20_000  # scans score candidates on a random 20k-row subset; the final fit uses every row
SCAN_ROUNDS = 2  # each nonlinear parameter is re-scanned once the others have moved
MIN_SCAN_ROWS = 30  # below this many usable rows a scan keeps its starting value
ROLL_CHUNK = 16  # a rolling child's scan rolls this many candidates' features as one stack (memory bound)


@dataclass
class Rows:
    """The child's observations with every parent aligned to them (NaN where unobserved)."""

    y: np.ndarray
    day: np.ndarray
    unit_index: np.ndarray
    parents: dict[str, np.ndarray]
    panels: dict[str, np.ndarray]  # parent -> (units, periods) array, for lags
    capacity: np.ndarray
    open: np.ndarray | None = None  # (units, periods): days the unit was seen operating (panel children)
    # unit attribute -> its value per unit (parents[p] is by_unit[p][unit_index]): computed on units, not rows
    by_unit: dict[str, np.ndarray] = field(default_factory=dict)
    # each row's cell of a (units, periods) panel, flat (unit_index * periods + day), when every day is on
    # the timeline: a panel's values for the rows are then one flat gather instead of a two-index one
    cell: np.ndarray | None = None


@dataclass
class ChildFit:
    statistics: dict[str, float] = field(default_factory=dict)  # edge id -> statistic value
    directions: dict[str, float] = field(default_factory=dict)  # edge id -> sign of the fitted effect
    contributions: dict[str, np.ndarray] = field(default_factory=dict)  # parent -> fitted contribution per row
    day: np.ndarray | None = None


def _grain(contract: Contract, name: str) -> str:
    return next(v.grain for v in contract.variables if v.name == name)


class _Aligned:
    """What every child of one dataset shares when its rows are built: the units and the panel sorted once,
    the unit index, the open days, each parent's daily panel and each grain's rows (the auditor fits many
    children on the same dataset; sorting and reshaping once per child was most of building its rows)."""

    def __init__(self, ds: Dataset, contract: Contract):
        self.ds, self.contract = ds, contract
        self.units = ds.units.sort("unit_id")
        self.unit_ids = ds.panel["unit_id"].unique().sort().to_numpy()
        self.periods = contract.timeline.periods
        self.index = {int(u): i for i, u in enumerate(self.unit_ids)}
        self.panel_sorted = ds.panel if _in_key_order(ds.panel) else ds.panel.sort("unit_id", "day")
        self.unit_lookup = np.full(len(self.unit_ids), -1)
        for row, u in enumerate(self.units["unit_id"].to_list()):
            if u in self.index:
                self.unit_lookup[self.index[u]] = row
        self.open_days = None
        if "open" in self.panel_sorted.columns:
            self.open_days = (
                self.panel_sorted["open"].fill_null(0).to_numpy().reshape(len(self.unit_ids), self.periods).astype(bool)
            )
        self._bases: dict[str, tuple[pl.DataFrame, np.ndarray, np.ndarray]] = {}
        self._unit_values: dict[str, np.ndarray] = {}
        self._panels: dict[str, np.ndarray] = {}
        self._columns: dict[tuple[str, str], np.ndarray] = {}
        self._cells: dict[str, np.ndarray | None] = {}
        self._capacity: dict[str, np.ndarray] = {}
        self._raw: dict[str, np.ndarray] = {}

    def base(self, grain: str) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
        """A grain's rows (units, panel or events) with a known unit, each row's unit position and day."""
        if grain not in self._bases:
            base = {"unit": self.units, "panel": self.panel_sorted, "event": self.ds.events}[grain]
            if grain == "unit":
                base = base.filter(pl.col("unit_id").is_in(list(self.index)))
            uidx = _positions(self.unit_ids, base["unit_id"].to_numpy())
            keep = uidx >= 0
            if not keep.all():  # (every row kept: the frame itself)
                base, uidx = base.filter(pl.Series(keep)), uidx[keep]
            day = base["day"].to_numpy() if "day" in base.columns else np.zeros(base.height, dtype=np.int64)
            self._bases[grain] = (base, uidx, day)
        return self._bases[grain]

    def cells(self, grain: str) -> np.ndarray | None:
        """Each row's flat cell of a (units, periods) panel; None if a day lies off the timeline (then a
        two-index gather reads it, counting a negative day from the end)."""
        if grain not in self._cells:
            _, uidx, day = self.base(grain)
            on_timeline = len(day) == 0 or (day.min() >= 0 and day.max() < self.periods)
            self._cells[grain] = uidx * self.periods + day if on_timeline and day.dtype.kind in "iu" else None
        return self._cells[grain]

    def unit_values(self, column: str) -> np.ndarray:
        if column not in self._unit_values:
            values = self.units[column].to_numpy()
            out = np.full(len(self.unit_ids), np.nan, dtype=object if values.dtype == object else float)
            present = self.unit_lookup >= 0
            out[present] = values[self.unit_lookup[present]]
            self._unit_values[column] = out
        return self._unit_values[column]

    def capacity(self, grain: str) -> np.ndarray:
        """Each row's unit capacity as floats: the same for every child of a grain (read-only, as it is shared)."""
        if grain not in self._capacity:
            uidx = self.base(grain)[1]
            capacity = np.asarray(self.unit_values(self.ds.capacity)[uidx], dtype=float)
            capacity.flags.writeable = False
            self._capacity[grain] = capacity
        return self._capacity[grain]

    def raw(self, name: str) -> np.ndarray:
        """A column of the sorted panel as floats, as read (read-only: a parent's panel and a child's values
        are both made from it, and a variable is often both)."""
        if name not in self._raw:
            values = self.panel_sorted[name].cast(pl.Float64).to_numpy()
            values.flags.writeable = False
            self._raw[name] = values
        return self._raw[name]

    def panel(self, p: str, g: str) -> np.ndarray:
        """A parent's (units, periods) panel as an analyst imputes it."""
        if p not in self._panels:
            panel = self.raw(p).reshape(len(self.unit_ids), self.periods)
            if g == "event":  # days without events have no mean: an analyst imputes the overall mean
                panel = np.where(np.isnan(panel), np.nanmean(panel), panel)
            elif self.open_days is not None and self.contract.variable(p).observe == "rate":
                # A rate with no trials that day has no value: imputed on days the unit was open. A blank
                # measurement is left blank, and its rows out of the fit (a mean in its place would
                # attenuate its slope and bias every slope correlated with it).
                panel = np.where(np.isnan(panel) & self.open_days, np.nanmean(panel), panel)
            self._panels[p] = panel
        return self._panels[p]

    def column(self, grain: str, name: str) -> np.ndarray:
        """A column of a grain's rows as floats."""
        if (grain, name) not in self._columns:
            base = self.base(grain)[0]
            if base is self.panel_sorted:  # (the panel's rows, every one kept: its column as read)
                self._columns[grain, name] = self.raw(name)
            else:
                self._columns[grain, name] = base[name].cast(pl.Float64).to_numpy()
        return self._columns[grain, name]


def _aligned(ds: Dataset, contract: Contract) -> _Aligned:
    cached = ds.cache.get("aligned")
    if cached is None or cached.contract is not contract:
        cached = ds.cache["aligned"] = _Aligned(ds, contract)
    return cached


def build_rows(ds: Dataset, contract: Contract, child: str, parents: list[str]) -> Rows:
    shared = _aligned(ds, contract)
    grain = _grain(contract, child)
    base, uidx, day = shared.base(grain)
    panel_sorted = shared.panel_sorted
    aligned, panels, by_unit = {}, {}, {}
    cell = shared.cells(grain)
    for p in parents:
        g = _grain(contract, p)
        if g == "unit":
            by_unit[p] = shared.unit_values(p)
            aligned[p] = by_unit[p][uidx]
            continue
        if p in panel_sorted.columns:
            panels[p] = shared.panel(p, g)
            if g == "event" and grain == "panel":
                aligned[p] = at_cells(panels[p], uidx, day, cell)
                continue
        if g == "event" and grain == "event" and p in base.columns:
            aligned[p] = shared.column(grain, p).copy()
        elif p in panels:
            aligned[p] = at_cells(panels[p], uidx, day, cell)
        else:
            aligned[p] = np.full(base.height, np.nan)
    y = shared.column(grain, child).copy() if child in base.columns else np.full(base.height, np.nan)
    capacity = shared.capacity(grain)
    is_open = shared.open_days if grain == "panel" else None
    return Rows(
        y=y, day=day, unit_index=uidx, parents=aligned, panels=panels, capacity=capacity, open=is_open,
        by_unit=by_unit, cell=cell,
    )  # fmt: skip


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each id's position in sorted_ids, -1 where it is missing (or null)."""
    if _exact_as_float(sorted_ids) and _exact_as_float(ids):
        # Integers (no null: a null unit reads as NaN) that floats hold exactly: compared as integers, the
        # same order and the same matches as compared as floats, without converting them.
        if _in_short_span(sorted_ids, ids):  # each found at its offset in a table, not by a binary search
            found = rows_in_span(ids, np.ones(len(ids), dtype=bool), sorted_ids)
            if found is not None:  # None: an id repeats
                return found
        at = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
        return np.where((sorted_ids[at] == ids) if len(sorted_ids) else False, at, -1)
    ids = np.asarray(ids, dtype=float)  # a null unit reads as NaN
    at = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
    found = (len(sorted_ids) > 0) & np.isfinite(ids)
    found &= sorted_ids[at] == ids if len(sorted_ids) else False
    return np.where(found, at, -1)


def _in_short_span(sorted_ids: np.ndarray, ids: np.ndarray) -> bool:
    """Whether signed integer ids span few enough values (DENSE_IDS_SPAN per id) for a table of the span."""
    if sorted_ids.dtype.kind != "i" or ids.dtype.kind != "i" or len(sorted_ids) == 0:
        return False
    return int(sorted_ids[-1]) - int(sorted_ids[0]) < DENSE_IDS_SPAN * max(len(ids), len(sorted_ids))


def _in_key_order(panel: pl.DataFrame) -> bool:
    """Whether a panel's rows are already in strictly increasing (unit_id, day) order, keys not null: then
    sorting by them (a grid built in that order) leaves every row where it is."""
    unit, day = panel["unit_id"], panel["day"]
    if unit.null_count() or day.null_count() or not unit.dtype.is_integer() or not day.dtype.is_integer():
        return False
    unit, day = unit.to_numpy(), day.to_numpy()
    return bool(np.all((unit[1:] > unit[:-1]) | ((unit[1:] == unit[:-1]) & (day[1:] > day[:-1]))))


def _exact_as_float(values: np.ndarray) -> bool:
    """Whether an array is of integers that a float holds exactly (|v| <= 2**53)."""
    values = np.asarray(values)
    return values.dtype.kind in "iu" and (len(values) == 0 or max(-int(values.min()), int(values.max())) <= 1 << 53)


def roll(values: np.ndarray, window: int, is_open: np.ndarray) -> np.ndarray:
    """Trailing mean over the last `window` days of a (units, periods) array, over the days the unit was
    open (how a reporting system computes a rolling metric). A stack of such arrays (..., units, periods)
    is rolled array by array: each unit's days are summed in the same order, one after the other."""
    values = np.where(is_open, values, np.nan)
    present = np.isfinite(values)
    total = np.cumsum(np.where(present, values, 0.0), axis=-1)
    count = np.cumsum(present, axis=-1)
    total[..., window:] -= total[..., :-window].copy()
    count[..., window:] -= count[..., :-window].copy()
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def roll_reported(stack: np.ndarray, window: int, is_open: np.ndarray) -> np.ndarray:
    """`roll(stack, window, is_open)` of a (..., units, periods) stack finite on every day: its reported days
    are the open ones whatever the values, so each day's count of them is counted once for every array of
    the stack, and its sums are the same additions in the same order (each unit's days one after another).
    The running sums are made in `stack` itself (overwritten: a new array the caller hands over)."""
    stack[..., ~is_open] = 0.0  # (np.where(is_open, stack, 0.0), in place)
    running = np.cumsum(stack, axis=-1, out=stack)
    count = np.cumsum(is_open, axis=-1)
    count[..., window:] -= count[..., :-window].copy()
    # The window's sum is the running sum less the one `window` days before: subtracted into a new array
    # (the same subtractions as in place on a copy of the earlier sums).
    total = np.empty_like(running)
    total[..., :window] = running[..., :window]
    np.subtract(running[..., window:], running[..., :-window], out=total[..., window:])
    reported = count > 0
    np.divide(total, np.maximum(count, 1), out=total)
    if not reported.all():
        total[..., ~reported] = np.nan  # (where no day was reported: what `roll`'s np.where puts there)
    return total


class ChildModel:
    """The additive model of one child: each edge's features come from its kind's estimator, and the
    nonlinear parameters are found by scanning, one edge at a time with the others held, twice over."""

    def __init__(self, contract: Contract, child: str, rows: Rows):
        self.edges = sorted((e for e in contract.edges if e.child == child), key=lambda e: e.parent)
        self.rows = rows
        v = contract.variable(child)
        # Measurements piled up exactly at a natural bound (a share at 1.0) are censored: they say "at least",
        # not "equal", so the fit leaves them out rather than flattening every slope towards the bound.
        # Counts, rates, scales and sporadic measures sit on their bounds legitimately (zero complaints).
        self.uncensored = np.ones(len(rows.y), dtype=bool)
        for bound in (v.min, v.max) if v.observe in ("value", "duration") and v.role != "volume" else ():
            if bound is not None:
                self.uncensored &= ~_at_bound(rows.y, bound)
        self.window = v.window if v.observe == "rolling" and rows.open is not None else None
        self.sporadic = v.observe == "sporadic"
        self.nuisance = calendar_columns(contract, rows.day) if v.role == "volume" else np.zeros((len(rows.y), 0))
        self.theta: dict[str, float] = {}
        self.levels = {v.name: v.levels for v in contract.variables if v.dtype == "categorical"}
        self.roots = {v.name for v in contract.variables} - {e.child for e in contract.edges}
        # A scan asks for the other edges' features once per candidate and round: each is computed once.
        self._features: dict[tuple[str, float | None], np.ndarray] = {}
        self._carried: dict[str, np.ndarray] = {}
        self._x: dict[str, np.ndarray] = {}
        self._candidates: dict[str, np.ndarray] = {}  # quantiles of the parent: read once, scanned each round
        self._finite: dict[tuple[str, float | None], np.ndarray] = {}  # rows where a feature block is finite
        self._means: dict[str, float] = {}
        self._remembered: dict[tuple, tuple] = {}
        self.nuisance_finite = finite_in_every_column(self.nuisance)
        # The design's constant column, made once (each scan and the final fit read it; none writes it).
        self.constant = np.ones((len(rows.y), 1))
        self.constant.flags.writeable = False

    def panel_mean(self, parent: str) -> float:
        """The mean of a parent's daily panel over its reported cells (what a lag holds its gaps at)."""
        if parent not in self._means:
            # A panel with no reported cell has no mean (NaN): numpy would say so on stderr.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                self._means[parent] = np.nanmean(self.rows.panels[parent])
        return self._means[parent]

    def candidates(self, e: Edge) -> np.ndarray:
        if e.parent not in self._candidates:
            self._candidates[e.parent] = ESTIMATORS[e.kind].candidates(self, e)
        return self._candidates[e.parent]

    def remembered(self, key: tuple, inputs: tuple, compute: Callable[[], Any]) -> Any:
        """compute(), remembered under `key` while it is asked with the same input objects (a scan's rows and
        candidates): a curve's grouped and plain sums read the same distinct values and curves."""
        hit = self._remembered.get(key)
        if hit is None or any(a is not b for a, b in zip(hit[0], inputs, strict=True)):  # (a key, one arity)
            hit = self._remembered[key] = (inputs, compute())
        return hit[1]

    def is_root(self, name: str) -> bool:
        return name in self.roots

    def carried(self, parent: str) -> np.ndarray:
        """A root's daily panel with each unit's last report carried over its unreported days."""
        if parent not in self._carried:
            self._carried[parent] = carry_forward(self.rows.panels[parent])
        return self._carried[parent]

    def x(self, e: Edge) -> np.ndarray:
        values = self.rows.parents[e.parent]
        if e.kind == "categorical":
            return values
        if e.parent not in self._x:  # a unit attribute comes as objects: converted once, not once per candidate
            self._x[e.parent] = np.asarray(values, dtype=float)
        return self._x[e.parent]

    def features(self, e: Edge, theta: float | None = None) -> np.ndarray:
        theta = self.theta.get(e.parent) if theta is None else theta
        key = (e.parent, theta)
        if key not in self._features:
            self._features[key] = self._compute_features(e, theta)
        return self._features[key]

    def _compute_features(self, e: Edge, theta: float | None) -> np.ndarray:
        block = ESTIMATORS[e.kind].features(self, e, theta)
        if self.window is None:
            return block
        # A rolling metric averages its causes over the same window: so must its features.
        U, T = self.rows.open.shape
        rolled = [
            roll(block[:, k].reshape(U, T), self.window, self.rows.open).reshape(-1) for k in range(block.shape[1])
        ]
        return np.column_stack(rolled)

    def _roll_candidates(self, e: Edge, cands: np.ndarray) -> None:
        """`features(e, cand)` of a rolling child for every candidate not yet computed, the candidates' blocks
        rolled ROLL_CHUNK at a time as one stack (the same sums as block by block, without a Python loop of
        array operations per candidate and column), into the cache `features` reads."""
        estimator = ESTIMATORS[e.kind]
        U, T = self.rows.open.shape
        missing = [cand for cand in cands if (e.parent, cand) not in self._features]
        for start in range(0, len(missing), ROLL_CHUNK):
            chunk = missing[start : start + ROLL_CHUNK]
            raw = np.stack([estimator.features(self, e, cand) for cand in chunk])  # (candidates, rows, columns)
            width = raw.shape[2]
            rolled = roll(raw.transpose(0, 2, 1).reshape(len(chunk), width, U, T), self.window, self.rows.open)
            for cand, block in zip(chunk, rolled.reshape(len(chunk), width, U * T), strict=True):
                self._features[e.parent, cand] = np.ascontiguousarray(block.T)  # as np.column_stack lays it out

    def _scanned_rows(
        self, e: Edge, cands: np.ndarray, ok: np.ndarray
    ) -> tuple[np.ndarray, list[np.ndarray] | None, np.ndarray | None]:
        """The rows of `ok` a scan scores (where every candidate's feature is finite), with every candidate's
        block when they are computed on every row first, or their rolled columns as one stack."""
        # A one-column feature whose finite rows are known beforehand (a step or a curve: where its parent is;
        # a lag: everywhere, its gaps hold the mean) is computed on the scanned rows only, every candidate at
        # once; any other on every row, so that every candidate is scored on the same rows.
        estimator = ESTIMATORS[e.kind]
        finite = estimator.finite_rows(self, e, cands) if self.window is None else None
        if finite is not None:
            return ok & finite, None, None
        rolled = self._rolled_stack(e, cands) if self.window is not None else None
        if rolled is not None:  # (the rows where each row of the stack is finite: one reduction across them)
            return ok & np.logical_and.reduce(np.isfinite(rolled), axis=0), None, rolled
        if self.window is not None:
            self._roll_candidates(e, cands)
        blocks = [self.features(e, cand) for cand in cands]
        for cand in cands:
            ok &= self.finite(e, cand)
        return ok, blocks, None

    def _rolled_stack(self, e: Edge, cands: np.ndarray) -> np.ndarray | None:
        """`features(e, cand)[:, 0]` of a rolling child for every candidate, as the rows of one (candidates,
        rows) array, when its estimator gives their daily panels as one stack finite on every day and the rows
        are the panel's cells in order (as rolling a feature's reshaped column takes them): every candidate
        is then reported on the child's open days, and one rolling count serves them all (`roll_reported`).
        The blocks go into the cache `features` reads (rows of the stack: the same values). None otherwise."""

        def compute() -> np.ndarray | None:
            window, cell, n = self.window, self.rows.cell, len(self.rows.y)
            if not (isinstance(window, int) and window >= 1 and cell is not None and len(cell) == n == cell.size):
                return None
            if not np.array_equal(cell, np.arange(n)) or n != self.rows.open.size:
                return None
            stack = ESTIMATORS[e.kind].daily_stack(self, e, cands)
            if stack is None or stack.shape[0] != len(cands) or stack.shape[1:] != self.rows.open.shape:
                return None
            rolled = roll_reported(stack, window, self.rows.open).reshape(len(cands), n)
            rolled.flags.writeable = False
            return rolled

        rolled = self.remembered(("rolled", e.parent), (cands,), compute)
        for cand, column in zip(cands, rolled if rolled is not None else (), strict=False):
            self._features.setdefault((e.parent, cand), column[:, None])
        return rolled

    def finite(self, e: Edge, theta: float | None = None) -> np.ndarray:
        """The rows where an edge's feature block is finite in every column (kept with the block)."""
        theta = self.theta.get(e.parent) if theta is None else theta
        key = (e.parent, theta)
        if key not in self._finite:
            self._finite[key] = finite_in_every_column(self.features(e, theta))
        return self._finite[key]

    def _design(self, skip: Edge | None = None) -> list[np.ndarray]:
        edges = [self.features(e) for e in self.edges if e is not skip]
        return [self.constant, *edges, self.nuisance]

    def _covered(self, rows: np.ndarray, skip: Edge | None = None) -> np.ndarray:
        """`rows & np.isfinite(np.hstack(self._design(skip))).all(axis=1)`, block by block (a design's rows are
        finite where each of its blocks' are; the constant column always is)."""
        ok = rows & self.nuisance_finite
        for e in self.edges:
            if e is not skip:
                ok &= self.finite(e)
        return ok

    def fit(self, contributions: bool = True) -> ChildFit:
        """The fitted model; each parent's contribution per row too unless `contributions` is False (only an
        attribution reads them)."""
        scanned = [e for e in self.edges if ESTIMATORS[e.kind].scans]
        for e in scanned:
            estimator = ESTIMATORS[e.kind]
            self.theta[e.parent] = estimator.start(self.candidates(e))
        valid = np.isfinite(self.rows.y) & self.uncensored
        scanned_with: dict[str, tuple] = {}
        for _ in range(SCAN_ROUNDS):
            for e in scanned:
                # A scan depends on the other edges' parameters only: if none has moved since this edge was
                # last scanned (a child with one nonlinear edge), scanning again would find the same value.
                others = tuple(self.theta[o.parent] for o in scanned if o is not e)
                if scanned_with.get(e.parent) == others:
                    continue
                self.theta[e.parent] = self._scan(e, valid)
                scanned_with[e.parent] = others
        columns = self._design()
        covered = self._covered(np.isfinite(self.rows.y))
        ok = valid & covered
        # Contributions are evaluated on every row with a reported value, censored or not, as in generation.
        result = ChildFit(day=self.rows.day[covered])
        if ok.sum() < sum(c.shape[1] for c in columns) + 10:
            return result
        fitted = np.flatnonzero(ok)
        coef = np.linalg.lstsq(gathered(columns, fitted), self.rows.y[fitted], rcond=None)[0]
        start = 1
        covered_rows = np.flatnonzero(covered) if contributions else None
        for e, block in zip(self.edges, columns[1:-1], strict=True):
            b = coef[start : start + block.shape[1]]
            start += block.shape[1]
            estimator = ESTIMATORS[e.kind]
            if covered_rows is not None:  # a take of a row-major block is its masked rows, in the same layout
                rows = np.take(block, covered_rows, axis=0) if block.flags.c_contiguous else block[covered]
                result.contributions[e.parent] = rows @ b
            result.statistics[f"{e.parent}->{e.child}"] = estimator.statistic(self, e, b, self.theta.get(e.parent))
            if estimator.directed:
                result.directions[f"{e.parent}->{e.child}"] = float(np.sign(b[0]))
        return result

    def _scan(self, e: Edge, valid: np.ndarray) -> float:
        """The candidate whose features explain the most variance beyond the other edges' (QR projection)."""
        others = self._design(skip=e)
        estimator = ESTIMATORS[e.kind]
        cands = self.candidates(e)
        ok, blocks, rolled = self._scanned_rows(e, cands, self._covered(valid, skip=e))
        idx = np.flatnonzero(ok)
        # A lag's optimum is flat, and a sporadic measure's few large values sway a subset's: both need every row.
        if len(idx) > SCAN_ROWS and e.kind != "lag" and not self.sporadic:
            idx = idx[scan_subset(len(idx))]
        if len(idx) < MIN_SCAN_ROWS:
            return self.theta[e.parent]
        q, _ = np.linalg.qr(gathered(others, idx))
        y = self.rows.y[idx]
        ry = y - q @ (q.T @ y)
        if blocks is None or all(b.shape[1] == 1 for b in blocks):
            # One extra column per candidate: its explained variance is (f.ry)^2 / (f.f - |Q'f|^2), since ry is
            # already orthogonal to Q; one matrix product scores every candidate at once.
            if rolled is not None:  # the columns at the rows, laid out as np.column_stack lays out the blocks'
                fry, qf, ff = projections(np.ascontiguousarray(np.take(rolled, idx, axis=1).T), q, ry)
            elif blocks is None:
                # Sums over groups of rows decide when no other candidate comes within their error bound of
                # the best; otherwise the plain sums below do.
                grouped = estimator.grouped_sums(self, e, cands, idx, q, ry)
                best = decided_best(*grouped) if grouped is not None else None
                if best is not None:
                    return float(cands[best])
                fry, qf, ff = estimator.sums(self, e, cands, idx, q, ry)
            else:
                fry, qf, ff = projections(np.column_stack([b[idx, 0] for b in blocks]), q, ry)
            return float(cands[best_candidate(fry, qf, ff)])
        best, best_score = self.theta[e.parent], -np.inf
        for cand, block in zip(cands, blocks, strict=True):  # blocks is set here: a fast scan has one column
            f = np.take(block, idx, axis=0) if block.flags.c_contiguous else block[idx]  # (the same, faster)
            rf = f - q @ (q.T @ f)
            coef, *_ = np.linalg.lstsq(rf, ry, rcond=None)
            score = float(np.sum((rf @ coef) ** 2))
            if score > best_score:
                best, best_score = float(cand), score
        return best


def gathered(blocks: list[np.ndarray], rows: np.ndarray) -> np.ndarray:
    """`np.hstack(blocks)[rows]`, gathered block by block straight into a column-major matrix: LAPACK (lstsq,
    qr) copies a row-major operand into column-major order first, so it gets the same numbers either way,
    with one copy instead of three (a block's rows, the stack, LAPACK's own)."""
    out = np.empty((len(rows), sum(b.shape[1] for b in blocks)), order="F")
    low, high = _bounds(rows)
    start = 0
    for block in blocks:
        width = block.shape[1]
        if not 0 <= low <= high < block.shape[0]:  # (rows off the block, or none, or not positions: indexing)
            out[:, start : start + width] = block[rows]
        elif block.flags.f_contiguous:  # each column contiguous (one column always is): a 1-d take per column
            for k in range(width):
                np.take(block[:, k], rows, out=out[:, start + k], mode="clip")  # (all in range: nothing clipped)
        else:  # a take of rows is the rows indexing picks, gathered without its general machinery
            out[:, start : start + width] = np.take(block, rows, axis=0, mode="clip")
        start += width
    return out


def _bounds(rows: np.ndarray) -> tuple[int, int]:
    """The lowest and highest of integer positions; (0, -1) for none or for any other kind of index."""
    if rows.dtype.kind not in "iu" or len(rows) == 0:
        return 0, -1
    return int(rows.min()), int(rows.max())


def finite_in_every_column(block: np.ndarray) -> np.ndarray:
    """`np.isfinite(block).all(axis=1)` of a (rows, columns) block, column by column: the same rows, without a
    reduction along each (short) row."""
    ok = np.ones(block.shape[0], dtype=bool)
    for k in range(block.shape[1]):
        ok &= np.isfinite(block[:, k])
    return ok


def best_candidate(fry: np.ndarray, qf: np.ndarray, ff: np.ndarray) -> int:
    """The candidate whose column explains the most variance beyond Q: (f.ry)^2 / (f.f - |Q'f|^2), since ry
    is already orthogonal to Q (the first of equal scores; none if no column varies beyond Q)."""
    denom = ff - np.einsum("ij,ij->j", qf, qf)
    scores = np.where(denom > MIN_VARIANCE, fry**2 / np.maximum(denom, MIN_VARIANCE), -np.inf)
    return int(np.argmax(scores))


MIN_VARIANCE = 1e-12  # a column varying less than this beyond the other features is not scored


# size: the sums and their bounds, as `grouped_sums` gives them
def decided_best(
    fry: np.ndarray, qf: np.ndarray, ff: np.ndarray, fry_error: np.ndarray, qf_error: np.ndarray, ff_error: np.ndarray
) -> int | None:
    """`best_candidate` of sums that may each be off by their error bound (entry by entry, the same shapes),
    when no sums within those bounds could make it pick another candidate; None otherwise (a near-tie, or a
    column near the cut: the exact sums must decide)."""
    if not all(np.isfinite(a).all() for a in (fry, qf, ff, fry_error, qf_error, ff_error)):
        return None
    squares = np.einsum("ij,ij->j", qf, qf)
    denom = ff - squares
    # |Q'f|^2 moves by 2|qf| e + e^2 per entry; each side rounds its own k + 1 additions and its subtraction.
    denom_error = ff_error + np.sum(2.0 * np.abs(qf) * qf_error + qf_error**2, axis=0)
    denom_error += 4.0 * (qf.shape[0] + 2) * EPS * (np.abs(ff) + squares)
    if np.any(np.abs(denom - MIN_VARIANCE) <= denom_error):
        return None
    varies = denom > MIN_VARIANCE
    if not varies.any():
        return 0  # every score is -inf: argmax picks the first
    # Where a column varies, its denominator lies above MIN_VARIANCE + denom_error: each side's is positive.
    low_denom, high_denom = np.where(varies, denom - denom_error, 1.0), np.where(varies, denom + denom_error, 1.0)
    low = np.where(varies, np.maximum(np.abs(fry) - fry_error, 0.0) ** 2 / high_denom * (1.0 - 8.0 * EPS), -np.inf)
    high = np.where(varies, (np.abs(fry) + fry_error) ** 2 / low_denom * (1.0 + 8.0 * EPS), -np.inf)
    best = int(np.argmax(np.where(varies, fry**2 / np.where(varies, denom, 1.0), -np.inf)))
    rivals = np.delete(high, best)
    return best if len(rivals) == 0 or low[best] > rivals.max() else None


def _at_bound(y: np.ndarray, bound: float) -> np.ndarray:
    """np.isclose(y, bound, rtol=0, atol=1e-9): for a finite bound |y - bound| <= 1e-9 + 0 * |bound| exactly
    (a NaN or infinite y is never close), computed without isclose's generality."""
    bound = float(bound)
    if not np.isfinite(bound):
        return np.isclose(y, bound, rtol=0, atol=1e-9)
    return np.abs(np.asarray(y, dtype=float) - bound) <= 1e-9


@lru_cache(maxsize=64)
def _subset_positions(n: int, size: int) -> np.ndarray:
    chosen = np.random.default_rng(0).choice(n, size, replace=False)
    # np.sort of distinct positions in range(n): the positions marked, read off in order (one pass, no sort).
    marked = np.zeros(n, dtype=bool)
    marked[chosen] = True
    positions = np.flatnonzero(marked)
    positions.flags.writeable = False
    return positions


def scan_subset(n: int) -> np.ndarray:
    """The sorted positions of the SCAN_ROWS of n rows a scan scores: rng(0).choice picks positions in
    range(n) and takes them from the rows, so np.sort(choice(rows)) is rows[np.sort(choice(n))] for
    increasing rows; the draw depends on n only, and is made once per n."""
    return _subset_positions(n, SCAN_ROWS)


def calendar_columns(contract: Contract, day: np.ndarray) -> np.ndarray:
    """Weekday and month dummies and the dated events' factor: the calendar an analyst controls for when
    counting events (the holidays are public; their effect is estimated). Each column is made on the
    timeline's days and read off for the rows' days (`calendar_columns_plain`, the same values: a dummy
    is 0 or 1 and a factor is the same subtraction, whichever row it is made for), into a column-major
    matrix: the design is gathered from it column by column (its layout changes no number)."""
    c, start, periods = contract.calendar, contract.timeline.start, contract.timeline.periods
    day = np.asarray(day)
    if day.dtype.kind not in "iu" or (len(day) and (day.min() < 0 or day.max() >= periods)):
        return calendar_columns_plain(contract, day)  # a day off the timeline: indexed as the plain way does
    seen = np.zeros(periods, dtype=bool)
    seen[day] = True  # the days the rows fall on: their weekdays and months are the ones given a column
    weekday, month = weekdays(start, periods), months(start, periods)
    columns = [weekday == w for w in np.unique(weekday[seen])[1:]]
    columns += [month == m for m in np.unique(month[seen])[1:]]
    table = [np.asarray(col, dtype=float) for col in columns]
    dated = date_factors(c, start, periods) - 1.0
    if np.any(dated[seen] != 0):
        table.append(dated)
    out = np.empty((len(day), len(table)), order="F")
    for k, column in enumerate(table):
        np.take(column, day, out=out[:, k], mode="clip")  # (every day is on the timeline: nothing clipped)
    return out


def calendar_columns_plain(contract: Contract, day: np.ndarray) -> np.ndarray:
    """`calendar_columns` made row by row."""
    c, start, periods = contract.calendar, contract.timeline.start, contract.timeline.periods
    weekday = weekdays(start, periods)[day]
    month = months(start, periods)[day]
    columns = [(weekday == w).astype(float) for w in np.unique(weekday)[1:]]
    columns += [(month == m).astype(float) for m in np.unique(month)[1:]]
    dated = date_factors(c, start, periods)[day] - 1.0
    if np.any(dated != 0):
        columns.append(dated)
    return np.column_stack(columns) if columns else np.zeros((len(day), 0))


def fit_child(ds: Dataset, contract: Contract, child: str, contributions: bool = True) -> ChildFit:
    parents = sorted(
        {e.parent for e in contract.edges if e.child == child}
        | {e.params["moderator"] for e in contract.edges if e.child == child and e.kind == "interaction"}
    )
    rows = build_rows(ds, contract, child, parents)
    return ChildModel(contract, child, rows).fit(contributions)


def _period_frame(
    ds: Dataset, contract: Contract, variable: str | None, column: str | None
) -> tuple[pl.DataFrame, str]:
    if column is not None:
        return ds.events, column.split(".", 1)[1]
    assert variable is not None
    return (ds.events if _grain(contract, variable) == "event" else ds.panel), variable


def period_means(ds: Dataset, contract: Contract, variable: str | None, column: str | None) -> tuple[float, float]:
    half = contract.timeline.periods // 2
    frame, name = _period_frame(ds, contract, variable, column)
    values = frame.select(pl.col("day"), pl.col(name).cast(pl.Float64)).drop_nulls()
    h1 = values.filter(pl.col("day") < half)[name].mean()
    h2 = values.filter(pl.col("day") >= half)[name].mean()
    return float(h1) if h1 is not None else float("nan"), float(h2) if h2 is not None else float("nan")


def period_means_at_once(
    ds: Dataset, contract: Contract, phenomena: list[Phenomenon]
) -> dict[str, tuple[float, float]] | None:
    """`period_means` of each period change, in one select per frame: each half's mean is the mean of the
    same values in the same order (the column cast, its rows with a day and a value, of that half), taken
    by the same kernel. None if any fails (the caller then takes them one by one, and fails as they do)."""
    half = contract.timeline.periods // 2
    if len({ph.id for ph in phenomena}) != len(phenomena):
        return None
    by_frame: dict[int, tuple[pl.DataFrame, list[tuple[str, str]]]] = {}
    try:
        for ph in phenomena:
            frame, name = _period_frame(ds, contract, ph.variables[0] if ph.variables else None, ph.column)
            by_frame.setdefault(id(frame), (frame, []))[1].append((ph.id, name))
        found: dict[str, tuple[float, float]] = {}
        for frame, items in by_frame.values():
            exprs = []
            for k, (_, name) in enumerate(items):
                x = pl.col(name).cast(pl.Float64)
                known = pl.col("day").is_not_null() & x.is_not_null()
                exprs.append(x.filter(known & (pl.col("day") < half)).mean().alias(f"h1_{k}"))
                exprs.append(x.filter(known & (pl.col("day") >= half)).mean().alias(f"h2_{k}"))
            row = frame.select(exprs).row(0)
            for k, (pid, _) in enumerate(items):
                h1, h2 = row[2 * k], row[2 * k + 1]
                found[pid] = (
                    float(h1) if h1 is not None else float("nan"),
                    float(h2) if h2 is not None else float("nan"),
                )
    except Exception:  # noqa: BLE001 - one by one, each raises what it raises
        return None
    return found


@dataclass
class Recovery:
    """Each phenomenon's value as an analysis of one dataset found it (NaN: could not be computed), and the
    sign of each edge's fitted effect."""

    values: dict[str, float] = field(default_factory=dict)
    directions: dict[str, float] = field(default_factory=dict)


def recover_phenomena(ds: Dataset, contract: Contract, kinds: set[str] | None = None) -> Recovery:
    """Every phenomenon (of the given kinds) recovered from this dataset."""
    fits: dict[str, ChildFit] = {}
    wanted = [ph for ph in contract.phenomena if kinds is None or ph.kind in kinds]
    needed = {ph.edge.split("->")[1] for ph in wanted if ph.kind == "edge_effect" and ph.edge}
    attributed = {ph.variables[1] for ph in wanted if ph.kind == "attribution"}
    needed |= attributed
    for child in sorted(needed):
        try:
            fits[child] = fit_child(ds, contract, child, contributions=child in attributed)
        except (np.linalg.LinAlgError, ValueError, KeyError):
            fits[child] = ChildFit()
    found = Recovery()
    values = found.values
    half = contract.timeline.periods // 2
    periods = period_means_at_once(ds, contract, [ph for ph in wanted if ph.kind == "period_change"]) or {}
    for ph in wanted:
        if ph.kind == "edge_effect":
            child = ph.edge.split("->")[1] if ph.edge else ""
            values[ph.id] = fits.get(child, ChildFit()).statistics.get(ph.edge or "", float("nan"))
            direction = fits.get(child, ChildFit()).directions.get(ph.edge or "")
            if ph.edge and direction is not None and np.isfinite(direction):
                found.directions[ph.edge] = direction
        elif ph.kind == "period_change":
            h1, h2 = periods.get(ph.id) or period_means(
                ds, contract, ph.variables[0] if ph.variables else None, ph.column
            )
            values[ph.id] = (h2 - h1) / h1 if h1 else float("nan")
        elif ph.kind == "attribution":
            parent, focus = ph.variables
            fit = fits.get(focus, ChildFit())
            if not fit.contributions or fit.day is None:
                values[ph.id] = float("nan")
                continue
            first, second = fit.day < half, fit.day >= half
            # Only time-varying parents drive a change; a unit attribute moves a mean only through which
            # units report in each half.
            drivers = {p: c for p, c in fit.contributions.items() if _grain(contract, p) != "unit"}
            deltas = {p: float(c[second].mean() - c[first].mean()) for p, c in drivers.items()}
            total = sum(deltas.values())
            values[ph.id] = deltas.get(parent, float("nan")) / total if total else float("nan")
    return found

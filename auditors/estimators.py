"""The auditor's estimators, one per mechanism kind: feature columns, parameter scans and the statistic.

Independent of the generator (which keeps its own `Mechanism` classes in worldgen/mechanisms.py): a test
fails if a kind of `contracts.model.MECHANISM_KINDS` lacks either side. For a child, the model is
`y ~ 1 + features of every incoming edge`; an estimator with `scans = True` has a nonlinear parameter (a
step location, a curve scale, a lag, a period) found by scanning its `candidates`. Definitions the contract
fixes (which transform, the moderator's centre and scale, the curve's origin) are read from it; everything
else is estimated from the data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from contracts.model import Edge

if TYPE_CHECKING:
    from auditors.estimate import ChildModel


def at_cells(panel: np.ndarray, unit_index: np.ndarray, day: np.ndarray, cell: np.ndarray | None) -> np.ndarray:
    """`panel[unit_index, day]` of a (units, periods) panel: the same values read at the rows' flat cells
    (unit_index * periods + day) when they are known, one flat gather instead of a two-index one."""
    if cell is None:
        return panel[unit_index, day]
    return np.ascontiguousarray(panel).reshape(-1)[cell]


MAX_LAG = 30  # days scanned for a delayed response (the generator plants at most 21)
SEASONAL_PERIODS = (7, 14, 28, 30)  # cycles an analyst would try: weekly, fortnightly, four-weekly, monthly
THRESHOLD_QUANTILES = np.linspace(0.02, 0.98, 97)  # step locations are scanned between these parent quantiles
SATURATION_SCALES = np.linspace(0.1, 4.0, 79)  # curve scales scanned, in parent sd
GROUPED_SHARE = 0.25  # a curve's scan sums over its parent's distinct values when they are this few per row
EPS = float(np.finfo(float).eps)


def nan_quantiles(values: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """np.nanquantile(values, quantiles) of a 1-d float array, read off its sorted reported values: the same
    order statistics (np.nanquantile partitions at two hundred places, which costs several sorts), put
    through the same interpolation (`sorted_quantiles`). Zeros of both signs compare equal but are not the
    same bits, and either may be where a partition or a sort puts them: with both (or with no reported
    value, or another kind of array or of quantiles) np.nanquantile itself."""
    values, quantiles = np.asarray(values), np.asarray(quantiles)
    if values.ndim != 1 or values.dtype != np.float64 or quantiles.ndim != 1 or quantiles.dtype != np.float64:
        return np.nanquantile(values, quantiles)
    reported = values[~np.isnan(values)]
    zero = reported == 0
    if len(reported) == 0 or (zero.any() and 0 < np.signbit(reported[zero]).sum() < zero.sum()):
        return np.nanquantile(values, quantiles)
    if not (np.all(quantiles >= 0) and np.all(quantiles <= 1)):
        return np.nanquantile(values, quantiles)  # (it refuses them)
    return sorted_quantiles(np.sort(reported), quantiles)


ORDINAL_KEYS = 1 << 16  # `ordinal_keys` are 16-bit: numpy's stable sort of them is a one-pass radix sort


def ordinal_keys(values: np.ndarray) -> np.ndarray | None:
    """A uint16 key per value ordered exactly as the values are (equal values equal keys, a higher value a
    higher key), or None. The key is rint((v - low) * scale) with the span spread over the 2**16 keys: each
    step of that is correctly rounded, so a higher value never gets a lower key; a key shared by two different
    values would break the order, and is looked for (each key's one value written to a table and read back).
    Levels on a grid (whole numbers, decimals) get keys of their own; spread-out values seldom do (None).
    None too for NaN or infinity, a constant, or zeros of both signs (equal, but not the same bits)."""
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype != np.float64 or len(values) < 2:
        return None
    low, high = values.min(), values.max()  # (NaN if any is: refused below)
    if not (np.isfinite(low) and np.isfinite(high)) or not high > low:
        return None
    span = float(high) - float(low)  # (Python floats: an overflow is inf, not a warning)
    scale = (ORDINAL_KEYS - 1) / span if 0 < span < np.inf else np.inf
    if not np.isfinite(scale):  # a span past the largest float, or so small that its scale is
        return None
    if low <= 0 <= high:
        zero = values == 0
        if zero.any() and 0 < np.signbit(values[zero]).sum() < zero.sum():
            return None
    table = np.empty(ORDINAL_KEYS)
    # The first rows first: spread-out values share keys among a thousand rows already (about 8 pairs of
    # 1024 uniform ones), so most are refused at a small part of the cost of keying them all.
    for part in (values[:ORDINAL_PROBE], values) if len(values) > 2 * ORDINAL_PROBE else (values,):
        keys = _keys(part, low, scale)
        table[keys] = part
        if not np.array_equal(table[keys], part):  # two different values on one key
            return None
    return keys


ORDINAL_PROBE = 1024  # rows `ordinal_keys` tries first


def _keys(values: np.ndarray, low: float, scale: float) -> np.ndarray:
    spread = np.subtract(values, low)
    np.multiply(spread, scale, out=spread)
    np.rint(spread, out=spread)
    np.minimum(spread, ORDINAL_KEYS - 1, out=spread)  # (a product rounded past the last key: still monotone)
    return spread.astype(np.uint16)


def sorted_quantiles(ordered: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """np.quantile(ordered, quantiles) (its default 'linear' method) of a sorted 1-d float array without NaN,
    in numpy's own steps (numpy/lib/_function_base_impl.py: _quantile, _get_indexes, _lerp): the virtual
    index (n - 1) q, its floor and the next position (both the last where it is at or past the end), and
    the interpolation between the values there, from the nearer end. Sorted, the values at those positions
    are the ones numpy's partition puts there."""
    virtual = (len(ordered) - 1) * quantiles
    previous = np.floor(virtual)
    following = previous + 1
    past_end = virtual >= len(ordered) - 1
    previous[past_end], following[past_end] = -1, -1
    below = virtual < 0  # (none: the quantiles are in [0, 1])
    previous[below], following[below] = 0, 0
    previous, following = previous.astype(np.intp), following.astype(np.intp)
    low, high = ordered[previous], ordered[following]
    gamma = virtual - previous
    step = high - low
    result = np.add(low, step * gamma)
    np.subtract(high, step * (1 - gamma), out=result, where=gamma >= 0.5)
    return result


def stable_order(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") of a 1-d float array, from numpy's default (unstable, much faster)
    sort: that puts equal values together in some order, and a stable sort is the one permutation that
    orders them by position. Without ties it is that permutation already; with ties, each run of equal
    values keyed by its rank, then by position, is sorted by keys that are all distinct (so any sort gives
    the one order). A NaN equals nothing, not even a NaN: with one, the stable sort itself."""
    values = np.asarray(values)
    if values.ndim != 1 or values.dtype != np.float64 or len(values) < 2:
        return np.argsort(values, kind="stable")
    keys = ordinal_keys(values)
    if keys is not None:  # values on a grid: the stable (radix) sort of their 16-bit keys, in one pass
        return np.argsort(keys, kind="stable")
    order = np.argsort(values)
    ordered = values[order]
    if np.isnan(ordered[-1]):  # (NaNs sort last)
        return np.argsort(values, kind="stable")
    ties = ordered[1:] == ordered[:-1]
    if not ties.any():
        return order
    n = len(values)
    if n > np.iinfo(np.int64).max // n:  # (rank * n + position must fit)
        return np.argsort(values, kind="stable")
    rank = np.zeros(n, dtype=np.int64)
    np.cumsum(~ties, out=rank[1:])
    key = np.empty(n, dtype=np.int64)
    key[order] = rank * n + order
    return np.argsort(key)


def carry_forward(panel: np.ndarray) -> np.ndarray:
    """Each unit's last reported value carried forward over the days it was not reported."""
    columns = np.arange(panel.shape[1])
    last_reported = np.maximum.accumulate(np.where(np.isnan(panel), 0, columns), axis=1)
    return np.take_along_axis(panel, last_reported, axis=1)


class Estimator:
    kind: ClassVar[str]
    scans: ClassVar[bool] = False  # a nonlinear parameter found by scanning
    directed: ClassVar[bool] = True  # the sign of the first coefficient is the direction of the effect

    def features(self, model: ChildModel, e: Edge, theta: float | None) -> np.ndarray:
        raise NotImplementedError

    def candidates(self, model: ChildModel, e: Edge) -> np.ndarray:
        return np.array([])

    def start(self, candidates: np.ndarray) -> float:
        """Where a scan starts: the middle of its candidates."""
        return float(candidates[len(candidates) // 2])

    def statistic(self, model: ChildModel, e: Edge, b: np.ndarray, theta: float | None) -> float:
        return float(b[0])

    def finite_rows(self, model: ChildModel, e: Edge, candidates: np.ndarray) -> np.ndarray | None:
        """The rows where every candidate's one-column feature is finite, when known without computing them
        (then a scan computes the candidates on the rows it scores only, with `columns`); None otherwise."""
        return None

    def columns(self, model: ChildModel, e: Edge, candidates: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Column k is features(model, e, candidates[k])[rows, 0], computed on those rows only."""
        raise NotImplementedError

    def daily_stack(self, model: ChildModel, e: Edge, candidates: np.ndarray) -> np.ndarray | None:
        """Every candidate's one-column feature before it is read off for the rows, as one (candidates, units,
        periods) stack of daily panels, when each is finite on every day (a rolling child's scan then rolls
        them at once with one count of reported days, in place: a new array); None when there is no such stack."""
        return None

    # size: a scan's inputs (the rows, the other features' orthonormal basis, the residual) are all needed
    def sums(self, model: ChildModel, e: Edge, candidates: np.ndarray, rows: np.ndarray, q: np.ndarray, ry: np.ndarray):
        """What a scan scores each candidate's column F on `rows` by: (F'ry, Q'F, F'F)."""
        return projections(self.columns(model, e, candidates, rows), q, ry)

    # size: the same inputs as `sums`
    def grouped_sums(self, model: ChildModel, e: Edge, candidates: np.ndarray, rows: np.ndarray, q, ry):
        """`sums` from sums over groups of rows, with bounds on how far each may be from `sums`' own, entry
        by entry: (F'ry, Q'F, F'F, their bounds in the same shapes); None when there is no such way."""
        return None


def projections(F: np.ndarray, q: np.ndarray, ry: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F'ry, Q'F, F'F) of every column of F at once."""
    return F.T @ ry, q.T @ F, np.einsum("ij,ij->j", F, F)


class Monotone(Estimator):
    kind = "monotone"

    def features(self, model, e, theta):
        x = model.x(e)
        if e.params["transform"] != "log":
            return x[:, None]
        if x.dtype != np.float64:
            return np.log1p(np.maximum(x, 0))[:, None]
        out = np.maximum(x, 0)  # np.log1p(np.maximum(x, 0)), its log taken in place: one array, not two
        return np.log1p(out, out=out)[:, None]


class Threshold(Estimator):
    kind = "threshold"
    scans = True

    def features(self, model, e, theta):
        x = model.x(e)  # a blank cause is unknown, not below the step: its row leaves the fit
        return np.where(np.isnan(x), np.nan, x > theta)[:, None]

    def finite_rows(self, model, e, candidates):  # a comparison is 0 or 1 wherever the parent is reported
        return ~np.isnan(model.x(e))

    def columns(self, model, e, candidates, rows):
        return (model.x(e)[rows][:, None] > candidates[None, :]).astype(float)

    def sums(self, model, e, candidates, rows, q, ry):
        # A step's column is 1 on the rows whose parent lies above the candidate, so its products with ry and
        # Q are sums over those rows: one cumulative sum over the rows sorted by the parent, read at each
        # candidate, gives them all (no rows x candidates matrix). Equal columns give equal sums, as before.
        x = model.x(e)[rows]
        order = stable_order(x)
        above = np.searchsorted(x[order], candidates, side="right")  # the first sorted row above each candidate
        n, columns = len(x), (ry, *q.T)
        # top[j, m]: the sum of column j over the m highest sorted rows, added from the top down (0 for none).
        # A running sum adds one row at a time whichever way the rows are laid out: summed column by column,
        # each contiguous, it is the same numbers as the (rows, columns) stack's, several times faster.
        top = np.zeros((len(columns), n + 1))
        descending = order[::-1]
        for j, column in enumerate(columns):
            np.cumsum(column[descending], out=top[j, 1:])
        at = np.ascontiguousarray(top[:, n - above].T)  # (candidates, 1 + k), as the stack's rows were read
        return at[:, 0], at[:, 1:].T, (n - above).astype(float)

    def candidates(self, model, e):  # midpoints between observed levels: a step between two levels sits halfway
        levels = np.unique(nan_quantiles(model.x(e), THRESHOLD_QUANTILES))
        return (levels[1:] + levels[:-1]) / 2 if len(levels) > 1 else levels

    def statistic(self, model, e, b, theta):
        return float(theta)


class Saturation(Estimator):
    kind = "saturation"
    scans = True

    def features(self, model, e, theta):
        x, origin = model.x(e), e.params["origin"]
        if not (x.dtype == np.float64 and type(origin) in (int, float) and type(theta) in (float, np.float64)):
            return -np.expm1(-np.maximum(x - origin, 0) / theta)[:, None]
        # The same operations in the same order, each in place in one new array instead of six (a feature is
        # made for every row, at each scale a scan holds it at).
        out = np.subtract(x, origin)
        np.maximum(out, 0, out=out)
        np.negative(out, out=out)
        np.divide(out, theta, out=out)
        np.expm1(out, out=out)
        return np.negative(out, out=out)[:, None]

    def finite_rows(self, model, e, candidates):
        # With a finite origin and finite positive scales the curve is finite wherever x is not NaN (x = +inf
        # gives 1, -inf gives 0); anything else is left to the full computation.
        origin = e.params["origin"]
        if not (np.isfinite(origin) and len(candidates) and np.all(np.isfinite(candidates) & (candidates > 0))):
            return None
        return ~np.isnan(model.x(e))

    def columns(self, model, e, candidates, rows):  # the same operations as `features`, one column per scale
        table, at = self.table(model, e, candidates, rows)
        return np.take(table, at, axis=0)  # table[at]: the same rows in the same layout, several times faster

    def table(self, model, e, candidates, rows) -> tuple[np.ndarray, np.ndarray]:
        """(each distinct value's curve at every scale, each row's distinct value): `columns` is table[at].
        Computed once per distinct value and spread to the rows: a count (jobs a day) has a few dozen."""
        values, at = self.distinct(model, e, rows)
        return model.remembered(("curves", e.parent), (rows, candidates), lambda: self.curves(values, candidates)), at

    def distinct(self, model, e, rows) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct values the curve is taken of, each row's): the rows of `table`."""

        def compute():
            below = -np.maximum(model.x(e)[rows] - e.params["origin"], 0)
            values, at = np.unique(below, return_inverse=True)
            return values, at.reshape(-1)

        return model.remembered(("distinct", e.parent), (rows,), compute)

    @staticmethod
    def curves(values: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """-np.expm1(values[:, None] / candidates[None, :]): the same operations element by element, made in
        one array instead of three (a table of 20k values by 79 scales: the temporaries cost more than the math)."""
        values, candidates = np.asarray(values), np.asarray(candidates)
        if values.dtype != np.float64 or candidates.dtype != np.float64:
            return -np.expm1(values[:, None] / candidates[None, :])
        out = np.divide(values[:, None], candidates[None, :])
        np.expm1(out, out=out)
        return np.negative(out, out=out)

    def grouped_sums(self, model, e, candidates, rows, q, ry):
        # A row's column is its distinct value's: each product is a sum over the distinct values of that
        # value's curve times the rows' sum (or count), a few dozen terms instead of a (rows, scales) matrix.
        # Both ways add the same n terms F_i r_i in their own orders, so each is within gamma = 4 n eps times
        # sum |F_i r_i| of the exact sum, and of each other within twice that; those sums of magnitudes are
        # taken by the groups too (of F_i^2, the sum itself: its terms are not negative).
        values, at = self.distinct(model, e, rows)
        n = len(at)
        if len(values) > GROUPED_SHARE * n:  # decided before the curves are taken: the plain sums take them
            return None
        table = model.remembered(("curves", e.parent), (rows, candidates), lambda: self.curves(values, candidates))
        if not np.isfinite(table).all():
            return None
        groups = len(table)
        counts = np.bincount(at, minlength=groups).astype(float)
        by_group = np.zeros((groups, 2 + 2 * q.shape[1]))  # per group: sum r, sum |r|, sums q_j, sums |q_j|
        for j, column in enumerate((ry, *q.T)):
            by_group[:, 2 * j] = np.bincount(at, weights=column, minlength=groups)
            by_group[:, 2 * j + 1] = np.bincount(at, weights=np.abs(column), minlength=groups)
        sums = table.T @ by_group[:, 0::2]  # (scales, 1 + k): F'ry, then Q'F transposed
        magnitudes = np.abs(table).T @ by_group[:, 1::2]
        ff = counts @ (table * table)
        margin = 2.0 * 4.0 * n * EPS
        return sums[:, 0], sums[:, 1:].T, ff, margin * magnitudes[:, 0], margin * magnitudes[:, 1:].T, margin * ff

    def candidates(self, model, e):
        return (np.nanstd(model.x(e)) or 1.0) * SATURATION_SCALES

    def statistic(self, model, e, b, theta):
        return float(e.params["origin"] + theta * np.log(2))


class Lag(Estimator):
    kind = "lag"
    scans = True

    def features(self, model, e, theta):
        rows = model.rows
        lag = int(theta)
        panel = rows.panels.get(e.parent)
        if panel is None:
            return np.full((len(rows.y), 1), np.nan)
        # Before the first `lag` days, and on days the cause was not reported (closed days), it is unknown:
        # a series that exists every day (weather, a rate, a lever) carries its last value over; activity
        # that did not happen is held at its mean, as the generation treats it.
        mean = model.panel_mean(e.parent)
        known = model.carried(e.parent) if model.is_root(e.parent) else panel
        lagged = np.full_like(panel, mean)
        lagged[:, lag:] = known[:, : panel.shape[1] - lag] if lag else known
        lagged = np.where(np.isnan(lagged), mean, lagged)
        return at_cells(lagged, rows.unit_index, rows.day, rows.cell)[:, None]

    def finite_rows(self, model, e, candidates):  # a lagged value is the cause's or its mean: finite if the mean is
        panel = model.rows.panels.get(e.parent)
        # (a lag longer than the timeline is left to `features`, which refuses it)
        if (
            panel is None
            or not np.isfinite(model.panel_mean(e.parent))
            or np.max(candidates, initial=0) > panel.shape[1]
        ):
            return None
        return np.ones(len(model.rows.y), dtype=bool)

    def columns(self, model, e, candidates, rows):  # what `features` reads, for every lag at once
        rows_, panel = model.rows, model.rows.panels[e.parent]
        lags = candidates.astype(np.int64)
        # A row's value at lag L is `L` places before its own day in its unit's run of the padded panel, one
        # flat gather per lag (the same values, no arithmetic). The gather is laid out (lags, rows) and
        # transposed, the memory order the matrix products that score the columns have always read (a
        # product's rounding can depend on the order it reads its operand in).
        longest = int(lags.max(initial=0))
        padded = self.padded(model, e, longest)
        # A day before the timeline reads from its end, as indexing the lagged panel by it does.
        day = rows_.day[rows] % panel.shape[1]
        start = rows_.unit_index[rows] * padded.shape[1] + day  # each row's day, `longest` places after it
        flat = padded.reshape(-1)
        if not _offsets_in_range(start, lags, len(flat) - longest):  # a cell off the panel: indexing judges it
            return flat[start[None, :] + longest - lags[:, None]].T
        out = np.empty((len(lags), len(start)))
        for k, lag in enumerate(lags):  # one gather per lag with the same row offsets, from the lag's own start
            np.take(flat[longest - lag :], start, out=out[k], mode="clip")  # (every offset is in range: no clip)
        return out.T

    @staticmethod
    def padded(model, e, longest: int) -> np.ndarray:
        """Each unit's series as `features` reads it (a root's carried forward), its gaps at the mean, after
        `longest` days of the mean (a day before the timeline is unknown): lag L of day t is at t + longest - L."""
        panel, mean = model.rows.panels[e.parent], model.panel_mean(e.parent)
        known = model.carried(e.parent) if model.is_root(e.parent) else panel
        padded = np.full((panel.shape[0], panel.shape[1] + longest), mean)
        padded[:, longest:] = np.where(np.isnan(known), mean, known)
        return padded

    def daily_stack(self, model, e, candidates):
        # Lag L's panel is the padded one from day longest - L on: a window of it, no arithmetic. Lags are
        # whole days (`features` truncates them as astype does), none negative or beyond the timeline.
        panel = model.rows.panels.get(e.parent)
        if panel is None or not (len(candidates) and np.isfinite(candidates).all()):
            return None
        lags = candidates.astype(np.int64)
        if lags.min() < 0 or lags.max() > panel.shape[1]:
            return None
        longest = int(lags.max())
        padded = self.padded(model, e, longest)
        if not np.isfinite(padded).all():  # (an infinite report is not a reported value to a rolling mean)
            return None
        days = np.lib.stride_tricks.sliding_window_view(padded, panel.shape[1], axis=1)  # (units, longest + 1, T)
        return days.transpose(1, 0, 2)[longest - lags]  # (an index array: a new array, not a view)

    def candidates(self, model, e):
        return np.arange(0, MAX_LAG + 1, dtype=float)

    def start(self, candidates):
        return 0.0

    def statistic(self, model, e, b, theta):
        return float(theta)


def _offsets_in_range(start: np.ndarray, lags: np.ndarray, bound: int) -> bool:
    """Whether every row's offset lies in [0, bound) and no lag is negative: then a lag L's values, read at the
    offsets from L places before `longest` (`longest` >= L), are all on the padded panel."""
    if start.dtype.kind not in "iu" or lags.min(initial=0) < 0:
        return False
    return len(start) == 0 or (int(start.min()) >= 0 and int(start.max()) < bound)


class Interaction(Estimator):
    kind = "interaction"

    def features(self, model, e, theta):
        p = e.params
        z = (np.asarray(model.rows.parents[p["moderator"]], dtype=float) - p["moderator_center"]) / p["moderator_scale"]
        return ((model.x(e) - p["center"]) * z)[:, None]


class Seasonal(Estimator):
    kind = "seasonal"
    scans = True

    def features(self, model, e, theta):
        xc = model.x(e) - e.params["center"]
        day = model.rows.day
        if not _days_of_a_table(day, xc):
            w = 2 * np.pi * day / theta
            return np.column_stack([xc, xc * np.sin(w), xc * np.cos(w)])
        # The wave taken once per day of the timeline and read off for the rows: sin and cos of the same
        # numbers (2 pi day / theta of the day's own value), not once per row. Laid out as column_stack does.
        w = 2 * np.pi * np.arange(int(day.max()) + 1) / theta
        out = np.empty((len(xc), 3))
        out[:, 0] = xc
        np.multiply(xc, np.sin(w)[day], out=out[:, 1])
        np.multiply(xc, np.cos(w)[day], out=out[:, 2])
        return out

    def candidates(self, model, e):
        return np.array(SEASONAL_PERIODS, dtype=float)

    def statistic(self, model, e, b, theta):
        return float(np.hypot(b[1], b[2]) / abs(b[0])) if b[0] else float("nan")


def _days_of_a_table(day: np.ndarray, values: np.ndarray) -> bool:
    """Whether a row's day indexes a table of the days 0 .. max (integers, none negative, no more days than
    rows) and the values are one float per row: then a per-day table read off by day is the per-row value."""
    day = np.asarray(day)
    if day.ndim != 1 or day.dtype.kind not in "iu" or not 0 < len(day) == len(values) or values.dtype != np.float64:
        return False
    return values.ndim == 1 and int(day.min()) >= 0 and int(day.max()) < len(day)


class Categorical(Estimator):
    kind = "categorical"
    directed = False

    def features(self, model, e, theta):
        levels = model.levels[e.parent]
        by_unit = model.rows.by_unit.get(e.parent)
        if by_unit is not None:  # a unit attribute: each unit's dummies, read off for its rows (the same values)
            # (a take of rows is what indexing by them picks, in the same layout, without its general machinery)
            return np.take(self.dummies(by_unit, levels), model.rows.unit_index, axis=0)
        return self.dummies(model.x(e), levels)

    @staticmethod
    def dummies(codes: np.ndarray, levels: list) -> np.ndarray:
        # A blank (or unreadable) level is unknown, not the first level: its row leaves the fit. Each level's
        # rows found once, and the unknown ones as those of none (what np.isin does for objects, level by level).
        at = [codes == lvl for lvl in levels]
        unknown = ~np.logical_or.reduce(at) if at else np.ones(len(codes), dtype=bool)
        return np.column_stack([np.where(unknown, np.nan, is_level) for is_level in at[1:]])

    def statistic(self, model, e, b, theta):
        effects = np.concatenate([[0.0], b])
        return float(effects.max() - effects.min())


class Ratio(Estimator):
    kind = "ratio"

    def features(self, model, e, theta):
        return (model.x(e) / model.rows.capacity)[:, None]


ESTIMATORS: dict[str, Estimator] = {
    est.kind: est
    for est in (Monotone(), Threshold(), Saturation(), Lag(), Interaction(), Seasonal(), Categorical(), Ratio())
}

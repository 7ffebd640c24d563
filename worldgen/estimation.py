"""The generator's view of how precisely the data carry each effect: fits on the true contributions.

Used only when sealing a contract (worldgen/phenomena.py). For a child, `fit_child` regresses its reported
values, on the rows an analyst can see, on its parents' true contributions (rolled like the child for a
rolling metric; level dummies for a categorical parent; the calendar for the volume). The coefficients say
how much of each planted effect the reported scale carries, their covariance how precisely. A step
location, a curve's bend or a lag is profiled: every candidate value is scored by how well it fits, and the
tolerance covers every candidate the data cannot reject (99.9%), around the planted value.
The auditor never uses this: it estimates from the files alone, with its own estimators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np

from contracts.calendar import date_factors, months, weekdays
from contracts.model import Contract, Edge
from worldgen.canonical import CanonicalState, table_of
from worldgen.mechanisms import MECHANISMS, Mechanism, saturation_curve, shift_periods
from worldgen.observation import roll

PROFILE_ROWS = 40_000  # profiles score candidates on at most this many rows (a fixed random subset)
PROFILE_CHI2 = 10.83  # chi-square(1) at 99.9%: candidates the data cannot reject
PROFILE_SAFETY = 2.0  # the observed files are noisier than X (blanks, rounding, imputed joins)
MAX_LAG = 30  # lags profiled, days (the auditor scans the same range)
THRESHOLD_QUANTILES = np.linspace(0.01, 0.99, 99)
SATURATION_SCALES = np.linspace(0.1, 4.0, 79)  # curve scales profiled, in parent sd
MIN_ROWS = 30
PROFILED = ("threshold", "saturation", "lag")  # kinds whose location is profiled over candidates


@dataclass
class Fit:
    """One child regressed on its parents' true contributions, on the rows an analyst sees."""

    child: str
    rows: np.ndarray  # flat positions in the child's grid (events, or units x days)
    y: np.ndarray
    day: np.ndarray
    X: np.ndarray
    owner: list[str]  # per column: "" for nuisance (intercept, calendar), else the parent it belongs to
    coef: np.ndarray
    cov: np.ndarray
    rolled: bool
    # What sealing asks of a fit more than once (a fit's arrays are never changed after it is made): the
    # halves' change of means by half day, the uncensored normal equations, the co-location refits by edge.
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def columns(self, parent: str) -> list[int]:
        return [j for j, o in enumerate(self.owner) if o == parent]

    def residual(self) -> np.ndarray:
        """`y - X @ coef` on every row (read-only), made once: each profiled edge's partial residual adds its
        own columns' part back to it."""
        if "residual" not in self.memo:
            residual = self.y - self.X @ self.coef
            residual.flags.writeable = False
            self.memo["residual"] = residual
        return self.memo["residual"]

    def realised(self, e: Edge, mechanism: Mechanism) -> tuple[float, float]:
        """The effect the reported data carry (planted x coefficient) and its standard error."""
        cols = self.columns(e.parent)
        if e.kind == "categorical":
            shifts = np.concatenate([[0.0], self.coef[cols]])
            worst = max(float(self.cov[j, j]) for j in cols)
            return float(shifts.max() - shifts.min()), float(2 * np.sqrt(max(worst, 0.0)))
        _, planted, _ = mechanism.statistic(e.params)
        j = cols[0]
        size = abs(mechanism.effect_size(e.params) or planted)
        return float(planted * self.coef[j]), float(np.sqrt(max(self.cov[j, j], 0.0)) * size)

    def deltas(self, half: int, drivers: set[str]) -> dict[str, float]:
        """Each driver's fitted contribution to the H1 -> H2 change (empty if a half has no rows).

        Drivers are the time-varying parents: a unit attribute moves a child's mean only through which
        units happen to report in each half, a few missing rows' worth of noise, so it is no driver."""
        parents = sorted({o for o in self.owner if o} & drivers)
        late, early, g = self._halves(half, parents)
        if g is None:
            return {}
        return {p: float(g[self.columns(p)] @ self.coef[self.columns(p)]) for p in parents}

    def half_rows(self, half: int) -> tuple[np.ndarray, np.ndarray]:
        """The positions of the late rows (day >= half) and of the early ones, in row order."""
        key = ("half rows", half)
        if key not in self.memo:
            self.memo[key] = np.flatnonzero(self.day >= half), np.flatnonzero(self.day < half)
        return self.memo[key]

    def _halves(self, half: int, parents: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """The late and early rows (positions), and the change of mean between them of the columns of
        `parents` (None if a half is empty). Only those columns are averaged, each as numpy averages a column
        of the rows gathered whole (`_row_order_mean`); the other columns' changes, never read, are NaN."""
        columns = [j for p in parents for j in self.columns(p)]
        key = ("halves", half, tuple(columns))
        if key not in self.memo:
            late, early = self.half_rows(half)
            if not late.size or not early.size:
                self.memo[key] = late, early, None
            else:
                change = np.full(self.X.shape[1], np.nan)
                for j in columns:
                    x = self.X[:, j]
                    change[j] = _row_order_mean(x, late) - _row_order_mean(x, early)
                self.memo[key] = late, early, change
        return self.memo[key]

    def normal_equations(self, v) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(kept rows, X, y, X'X, X'y) on the rows the fit uses: measurements clipped at a bound left out."""
        if "normal" not in self.memo:
            keep = _uncensored(v, self.y)
            X, y = self.X[keep], self.y[keep]
            self.memo["normal"] = keep, X, y, X.T @ X, X.T @ y
        return self.memo["normal"]

    def shares(self, half: int, drivers: set[str], rows_lost: float) -> tuple[dict[str, float], dict[str, float]]:
        """Each driver's contribution to the change, and the standard error of its share: of the coefficients,
        and of which rows an analyst is left with when blanks drop a share `rows_lost` of them at random."""
        deltas = self.deltas(half, drivers)
        total = sum(deltas.values())
        if abs(total) < 1e-12:
            return deltas, {}
        late, early, g = self._halves(half, list(deltas))
        contribution = {p: self.X[:, self.columns(p)] @ self.coef[self.columns(p)] for p in deltas}
        together = sum(contribution.values())
        errors = {}
        for p in deltas:
            grad = np.zeros_like(g)
            mine = self.columns(p)
            grad[mine] += g[mine] / total
            for q in deltas:  # d(D_p / T)/d(b_q) = (1[p=q] g_q T - D_p g_q) / T^2
                grad[self.columns(q)] -= deltas[p] * g[self.columns(q)] / total**2
            # Dropping a random share f of the rows moves D_p / T by the change in the half means of
            # z = c_p - (D_p / T) sum_q c_q, with variance f / (1 - f) var(z) / n per half.
            z = contribution[p] - deltas[p] / total * together
            dropped = rows_lost / (1 - rows_lost) * (z.take(late).var() / len(late) + z.take(early).var() / len(early))
            errors[p] = float(np.sqrt(max(grad @ self.cov @ grad, 0.0) + dropped / total**2))
        return deltas, errors


def _row_order_mean(column: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The mean of `column` at `rows`, as `X.take(rows, axis=0).mean(axis=0)` has it for a column of a 2-d
    `X` of two or more columns (a fit's always holds the intercept beside its drivers; numpy sums a single
    column pairwise): numpy adds a 2-d array's rows one after another, so each column's sum is in row order, as a running
    sum has it (a 1-d array's own sum would go pairwise, other bits). One column's sum costs a fraction of
    every column's, and the take of one column a fraction of the rows' whole."""
    return np.cumsum(column.take(rows))[-1] / len(rows)


def co_location_gap(contract: Contract, state: CanonicalState, fit: Fit, e: Edge, others: dict[str, float]) -> float:
    """How far a slope's coefficient moves when a co-parent's step, bend or lag sits anywhere the data allow
    (`others`: edge id -> the tolerance of its location, inf where the data cannot locate it): a correlated
    co-parent placed elsewhere takes or gives back part of the slope. In units of the planted statistic."""
    cols = fit.columns(e.parent)
    if len(cols) != 1:
        return 0.0
    j = cols[0]
    _, planted, _ = MECHANISMS[e.kind].statistic(e.params)
    gap = 0.0
    for other in contract.edges:
        edge = f"{other.parent}->{other.child}"
        x = state.inputs.get(edge)
        if other.child != e.child or other.kind not in PROFILED or edge not in others or x is None:
            continue
        if len(fit.columns(other.parent)) != 1:
            continue
        for coef in _relocated_fits(contract, state, fit, other, x, others[edge]):
            if not np.isfinite(coef[j]):  # a candidate the other columns explain: no slope to compare
                continue
            gap = max(gap, abs(planted * (coef[j] - fit.coef[j])))
    return gap


def _relocated_fits(
    contract: Contract, state: CanonicalState, fit: Fit, other: Edge, x: np.ndarray, tolerance: float
) -> list[np.ndarray]:
    """The fit's coefficients refitted with `other`'s column swapped for each candidate location within
    `tolerance` of the planted one (whose feature varies and whose normal equations are not singular), in
    candidate order. They do not depend on which slope asks, so a fit keeps them for its other slopes."""
    key = ("relocated", f"{other.parent}->{other.child}", tolerance)
    if key in fit.memo:
        return fit.memo[key]
    keep, X, y, A, b = fit.normal_equations(contract.variable(fit.child))
    (k,) = fit.columns(other.parent)
    candidates, statistic, feature = _candidates_on_all_rows(contract, state, fit, other, x)
    inside = [t for t in candidates if abs(statistic(t) - _planted_location(other)) <= tolerance]
    out: list[np.ndarray] = []
    if inside:
        # Usually no row is clipped; else only the kept rows are built (no copy of a (rows, candidates) array).
        F = _feature_matrix(feature, np.asarray(inside, dtype=float), None if keep.all() else keep)
        XtF, FtF, Fty = X.T @ F, np.einsum("ij,ij->j", F, F), F.T @ y
        varies = FtF - F.sum(axis=0) ** 2 / max(len(y), 1) > 1e-12 * max(len(y), 1)
        out = _swapped_solutions(A, b, k, (XtF, FtF, Fty), np.flatnonzero(varies))
    fit.memo[key] = out
    return out


FeatureSums = tuple[np.ndarray, np.ndarray, np.ndarray]  # X'F, the diagonal of F'F, F'y of candidate features F


def _swapped_solutions(
    A: np.ndarray, b: np.ndarray, k: int, sums: FeatureSums, candidates: np.ndarray
) -> list[np.ndarray]:
    """The solutions of the normal equations A x = b with column k swapped for each candidate m's feature
    (X'F[:, m], F'F[m], F'y[m] of `sums`), in candidate order, leaving out those whose equations are singular. All
    candidates go to LAPACK in one stacked call (the same solve per matrix as one by one) unless one is
    singular, which fails the stacked call: then one by one (`_swapped_solutions_plain`)."""
    if not len(candidates):
        return []
    XtF, FtF, Fty = sums
    systems = np.repeat(A[None, :, :], len(candidates), axis=0)
    rhs = np.repeat(b[None, :], len(candidates), axis=0)
    features = XtF[:, candidates].T
    systems[:, k, :], systems[:, :, k], rhs[:, k] = features, features, Fty[candidates]
    systems[:, k, k] = FtF[candidates]
    try:
        return list(np.linalg.solve(systems, rhs[:, :, None])[:, :, 0])
    except np.linalg.LinAlgError:
        return _swapped_solutions_plain(A, b, k, sums, candidates)


def _swapped_solutions_plain(
    A: np.ndarray, b: np.ndarray, k: int, sums: FeatureSums, candidates: np.ndarray
) -> list[np.ndarray]:
    """`_swapped_solutions` one candidate at a time."""
    XtF, FtF, Fty = sums
    out = []
    for m in candidates:
        A_m, b_m = A.copy(), b.copy()
        A_m[k, :], A_m[:, k], b_m[k] = XtF[:, m], XtF[:, m], Fty[m]
        A_m[k, k] = FtF[m]
        try:
            out.append(np.linalg.solve(A_m, b_m))
        except np.linalg.LinAlgError:
            continue
    return out


def located_share_gaps(
    contract: Contract, state: CanonicalState, fit: Fit, e: Edge, tolerance: float, drivers: set[str]
) -> dict[str, float]:
    """How far each driver's share moves when a step, bend or lag sits anywhere the data allow (within the
    edge's tolerance of the planted value) and its slope is refitted there: an analyst's share is only as
    good as the location it rests on."""
    half = contract.timeline.periods // 2
    deltas = fit.deltas(half, drivers)
    x = state.inputs.get(f"{e.parent}->{e.child}")
    total = sum(deltas.values())
    if e.parent not in deltas or x is None or abs(total) < 1e-12 or len(fit.columns(e.parent)) != 1:
        return {}
    (j,) = fit.columns(e.parent)
    partial = fit.residual() + fit.X[:, j] * fit.coef[j]
    candidates, statistic, feature = _candidates_on_all_rows(contract, state, fit, e, x)
    planted = _planted_location(e)
    # Hoisted out of the loop over candidates: the same arrays each time, and takes at the halves' positions
    # (the same values as boolean gathers, ~3x faster on the pinned kernels).
    centred = partial - partial.mean()
    late, early = fit.half_rows(half)
    gaps = dict.fromkeys(deltas, 0.0)
    allowed = [theta for theta in candidates if abs(statistic(theta) - planted) <= tolerance]
    # Every allowed candidate's feature at once when the feature can (the same values as one by one), a row
    # per candidate: each is copied out whole (a fresh array, as one by one) instead of gathered by stride.
    F = feature.by_candidate(np.asarray(allowed, dtype=float)) if allowed and isinstance(feature, _Columns) else None
    for i, theta in enumerate(allowed):
        f = feature(theta) if F is None else F[i].copy()
        spread = f - f.mean()
        norm = float(spread @ spread)
        if norm < 1e-12:
            continue
        moved = dict(deltas)
        moved[e.parent] = float(spread @ centred) / norm * float(f.take(late).mean() - f.take(early).mean())
        moved_total = sum(moved.values())
        if abs(moved_total) < 1e-12:
            return dict.fromkeys(deltas, math.inf)
        for p in deltas:
            gaps[p] = max(gaps[p], abs(moved[p] / moved_total - deltas[p] / total))
    return gaps


def visible_panel(contract: Contract, state: CanonicalState, e: Edge, x: np.ndarray) -> np.ndarray:
    """A cause's (units, periods) panel as the files hold it: no file has a row for a day its unit did not
    report, so a series that exists every day (a root) reads the unit's last report, and activity (made by
    other causes, or events) its mean over the reported days (as an analyst, and the auditor, fill them)."""
    U, T = x.shape
    reported = state.column("panel", "open").reshape(U, T).astype(bool)
    if reported.all():
        return x
    made = any(edge.child == e.parent for edge in contract.edges)
    if made or contract.variable(e.parent).grain == "event":  # activity (and a day without events) reads its mean
        return np.where(reported, x, np.nanmean(np.where(reported, x, np.nan)))
    last = np.maximum.accumulate(np.where(reported, np.arange(T), -1), axis=1)
    return np.where(last >= 0, np.take_along_axis(x, np.maximum(last, 0), axis=1), e.params["center"])


def _visible_lag(contract: Contract, state: CanonicalState, e: Edge) -> np.ndarray | None:
    """A lagged cause's contribution at the child's grain as an analyst can rebuild it from the files (the
    truth reads the cause on days no file shows), or None when every day was reported."""
    x = state.inputs.get(f"{e.parent}->{e.child}")
    if x is None:
        return None
    seen = visible_panel(contract, state, e, x)
    if seen is x:
        return None
    center = e.params["center"]
    grid = e.params["beta"] * (shift_periods(seen, int(e.params["lag"]), center) - center)
    if contract.variable(e.child).grain == "event":
        return grid[state.column("events", "unit_id") - 1, state.column("events", "day")]
    return grid.reshape(-1)


def _rows(contract: Contract, state: CanonicalState, child: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, reported values, day) of the rows an analyst sees for `child`."""
    v = contract.variable(child)
    y = state.column(table_of(v), child).astype(float)
    if v.grain == "event":
        seen = np.isfinite(y)
        if v.observe == "scale":
            seen &= state.column("events", f"responded_{child}").astype(bool)
        day = state.column("events", "day")
    else:
        seen = np.isfinite(y) & state.column("panel", "open").astype(bool)
        day = state.column("panel", "day")
    rows = np.flatnonzero(seen)
    return rows, y[rows], day[rows]


def _as_reported(contract: Contract, state: CanonicalState, child: str, values: np.ndarray) -> np.ndarray:
    """A contribution as the child's rows carry it: rolled over open days for a rolling metric."""
    v = contract.variable(child)
    if v.observe != "rolling":
        return values.reshape(-1)
    U, T = contract.entity("unit").count, contract.timeline.periods
    is_open = state.column("panel", "open").reshape(U, T).astype(bool)
    return roll(values.reshape(U, T), v.window or 1, is_open).reshape(-1)


def fit_child(contract: Contract, state: CanonicalState, child: str) -> Fit | None:
    rows, y, day = _rows(contract, state, child)
    contributions = state.contributions.get(child, {})
    edges = {e.parent: e for e in contract.edges if e.child == child}
    kinds = {parent: e.kind for parent, e in edges.items()}
    columns, owner = [np.ones(len(rows))], [""]
    for parent in sorted(contributions):
        if kinds[parent] == "categorical":
            # One dummy per level, told apart before any rolling: a rolled constant is constant only up to
            # rounding, and every rounding would become a level of its own.
            raw = contributions[parent].reshape(-1)
            for value in np.unique(raw[np.isfinite(raw)])[1:]:
                columns.append(_as_reported(contract, state, child, (raw == value).astype(float))[rows])
                owner.append(parent)
        else:
            # A lagged cause enters as the files let it be rebuilt: the data carry no more than that.
            visible = _visible_lag(contract, state, edges[parent]) if kinds[parent] == "lag" else None
            values = contributions[parent] if visible is None else visible
            columns.append(_as_reported(contract, state, child, values)[rows])
            owner.append(parent)
    v = contract.variable(child)
    if v.role == "volume":  # the calendar moves the volume too: a nuisance, controlled for as an analyst would
        for column in _calendar_dummies(contract, day):
            columns.append(column)
            owner.append("")
    X = np.column_stack(columns)
    ok = np.isfinite(columns[0])  # column by column: the same mask as np.isfinite(X).all(axis=1), faster
    for column in columns[1:]:
        ok &= np.isfinite(column)
    if ok.sum() <= X.shape[1] + MIN_ROWS:
        return None
    if not ok.all():  # usually every row is complete: then no copies
        rows, y, day, X = rows[ok], y[ok], day[ok], X[ok]
    # Measurements clipped at a bound say "at least", not "equal": the fit leaves them out (so does the
    # auditor), while shares still count every reported value.
    fitted = _uncensored(v, y)
    Xf, yf = (X, y) if fitted.all() else (X[fitted], y[fitted])
    coef, *_ = np.linalg.lstsq(Xf, yf, rcond=None)
    residual = yf - Xf @ coef
    sigma2 = float(np.sum(residual**2)) / (int(fitted.sum()) - X.shape[1])
    # Two buffers, as ever: numpy takes X'X of one buffer as syrk. The second is a plain copy of the fitted
    # rows (the same array as X[fitted], without gathering through the mask).
    cov = sigma2 * np.linalg.pinv(Xf.T @ Xf.copy())
    fit = Fit(child, rows, y, day, X, owner, coef, cov, v.observe == "rolling")
    if Xf is X:  # no row left out: the residual on every row, `Fit.residual`, is this one
        residual.flags.writeable = False
        fit.memo["residual"] = residual
    return fit


def _uncensored(v, y: np.ndarray) -> np.ndarray:
    keep = np.ones(len(y), dtype=bool)
    if v.observe in ("value", "duration") and v.role != "volume":
        for bound in (v.min, v.max):
            if bound is not None:
                keep &= ~_at_bound(y, bound)
    return keep


def _at_bound(y: np.ndarray, bound: float) -> np.ndarray:
    """np.isclose(y, bound, rtol=0, atol=1e-9): for a finite bound |y - bound| <= 1e-9 + 0 * |bound| exactly
    (a NaN or infinite y is never close), computed without isclose's generality (as the auditor does)."""
    bound = float(bound)
    if not np.isfinite(bound):
        return np.isclose(y, bound, rtol=0, atol=1e-9)
    return np.abs(np.asarray(y, dtype=float) - bound) <= 1e-9


def _calendar_dummies(contract: Contract, day: np.ndarray) -> list[np.ndarray]:
    """Weekday and month dummies and the dated events' factor, as the auditor controls for the calendar."""
    start, periods = contract.timeline.start, contract.timeline.periods
    weekday, month = weekdays(start, periods)[day], months(start, periods)[day]
    columns = [(weekday == w).astype(float) for w in np.unique(weekday)[1:]]
    columns += [(month == m).astype(float) for m in np.unique(month)[1:]]
    dated = date_factors(contract.calendar, start, periods)[day] - 1.0
    return columns + ([dated] if np.any(dated != 0) else [])


def profile_tolerance(contract: Contract, state: CanonicalState, fit: Fit, e: Edge) -> float | None:
    """How far from the planted value the data let a step location, curve bend, lag or seasonal swing lie."""
    if e.kind == "seasonal":
        return _seasonal_tolerance(contract, state, fit, e)
    edge = f"{e.parent}->{e.child}"
    x = state.inputs.get(edge)
    if x is None:
        return None
    cols = fit.columns(e.parent)
    partial = fit.residual() + fit.X[:, cols] @ fit.coef[cols]
    pick = _subset(len(fit.rows))
    if len(pick) == len(fit.rows):  # every row: the candidates the co-location and share gaps use too
        candidates, statistic, feature = _candidates_on_all_rows(contract, state, fit, e, x)
    else:
        candidates, statistic, feature = _candidates(contract, state, fit, e, x, pick)
    planted = _planted_location(e)
    r = partial[pick] - partial[pick].mean()
    inside = _profile_inside(feature, candidates, r)
    stats = np.array([statistic(theta) for theta in candidates])
    resolution = float(np.median(np.diff(np.sort(np.unique(stats))))) if len(np.unique(stats)) > 1 else 0.0
    spread = float(np.max(np.abs(stats[inside] - planted)))
    return PROFILE_SAFETY * (spread + resolution)


def _profile_inside(feature, candidates: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Which candidates the data cannot reject: those whose fit of the partial residual `r` (centred) is
    within the chi-square bound of the best. A step's or a curve's profile is first scored from sums over
    the intervals between candidates or the distinct parent values, without the (rows, candidates) matrix,
    and kept when no candidate sits within that arithmetic's error bound of the cut; otherwise (and for
    other features) the plain computation decides, so the answer is always the plain one."""
    grouped = _grouped_sse(feature, candidates, r)
    if grouped is not None:
        inside = _decided(*grouped, len(r))
        if inside is not None:
            return inside
    return _plain_inside(feature, candidates, r)


def _plain_inside(feature, candidates: np.ndarray, r: np.ndarray) -> np.ndarray:
    F = _feature_matrix(feature, candidates)
    F -= F.mean(axis=0)
    norms = np.einsum("ij,ij->j", F, F)
    explained = np.where(norms > 1e-12, (F.T @ r) ** 2 / np.maximum(norms, 1e-12), 0.0)
    sse = float(r @ r) - explained
    sigma2 = sse.min() / max(len(r) - 2, 1)
    return sse - sse.min() <= PROFILE_CHI2 * sigma2


EPS = float(np.finfo(float).eps)


def _grouped_sse(feature, candidates: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(each candidate's sse, a bound on how far it and the plain computation's can differ) for a step or a
    curve on the rows' own parent values, from sums by interval between candidates or by distinct value; None
    for other features or when a value is not finite. Both computations add at most n terms of |r_i| x
    |centred feature| <= |r_i| (the features lie in [0, 1]), each in its own order (any order of n terms is
    within (n - 1) eps sum|terms| of the exact sum): each sum is within 2 n eps sum|r| of the exact one."""
    n = len(r)
    if n < 3 or not isinstance(feature, _Step | _Curve) or not np.isfinite(feature.seen).all():
        return None
    thetas = np.asarray(candidates, dtype=float)
    total = float(np.sum(r))
    if isinstance(feature, _Step):
        fr_above, counts_above = _step_sums(feature.seen, thetas, r)
        above = counts_above.astype(float)
        mean = above / n
        fr = fr_above - mean * total
        norms = above * (n - above) / n
    else:
        if not (thetas > 0).all():
            return None
        values, inverse = feature.values
        inverse = inverse.reshape(-1)
        curve = np.divide(np.negative(np.maximum(np.subtract(values, feature.origin), 0.0))[:, None], thetas[None, :])
        np.exp(curve, out=curve)  # 1 - exp(.), twice as fast as -expm1(.) and within a few eps of it (below)
        np.subtract(1.0, curve, out=curve)
        counts = np.bincount(inverse, minlength=len(curve)).astype(float)
        sums = np.bincount(inverse, weights=r, minlength=len(curve))
        curve -= (counts @ curve / n)[None, :]
        fr = sums @ curve
        norms = counts @ (curve * curve)
    if not (np.isfinite(fr).all() and np.isfinite(norms).all()):
        return None
    if np.any((norms > 1e-14) & (norms < 1e-10)):  # too near the plain code's cut for a column that varies
        return None
    gamma = 4.0 * n * EPS
    absolute = float(np.sum(np.abs(r)))
    rounding = 0.0 if isinstance(feature, _Step) else 8.0 * EPS  # how far a curve's value may be from the plain's
    error_fr = 2.0 * gamma * absolute + gamma * abs(total) + rounding * absolute
    varies = norms > 1e-12
    safe = np.where(varies, norms, 1.0)
    explained = np.where(varies, fr**2 / safe, 0.0)
    error_norm = 2.0 * gamma * norms + n * gamma**2 + 2.0 * rounding * np.sqrt(n * norms) + n * rounding**2
    error = np.where(
        varies,
        (2.0 * np.abs(fr) * error_fr + error_fr**2) / safe + explained * 2.0 * error_norm / safe,
        0.0,
    )
    rr = float(r @ r)
    return rr - explained, 4.0 * error + 4.0 * EPS * (rr + explained)


def _step_sums(seen: np.ndarray, thetas: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate location theta: the sum of `r` over the rows whose `seen` exceeds it, and how many
    they are. Each row falls in the bucket of the candidates below its value (a binary search among the few
    candidates, not a sort of the rows); a candidate's rows are the buckets above it (suffix sums)."""
    order = np.argsort(thetas, kind="stable")
    bucket = np.searchsorted(thetas[order], seen, side="left")  # how many candidates lie below the row's value
    buckets = len(thetas) + 1
    sums = np.cumsum(np.bincount(bucket, weights=r, minlength=buckets)[::-1])[::-1]
    counts = np.cumsum(np.bincount(bucket, minlength=buckets)[::-1])[::-1]
    fr_above, counts_above = np.empty(len(thetas)), np.empty(len(thetas), dtype=np.int64)
    fr_above[order], counts_above[order] = sums[1:], counts[1:]  # rows above the k-th smallest: buckets > k
    return fr_above, counts_above


def _decided(sse: np.ndarray, error: np.ndarray, n: int) -> np.ndarray | None:
    """The candidates inside the profile's bound, when each candidate's sse is within `error` of the plain
    computation's and every candidate is surely inside or surely outside; else None (the plain one decides)."""
    k = PROFILE_CHI2 / max(n - 2, 1)
    low, high = float((sse - error).min()), float((sse + error).min())  # where the plain minimum can lie
    inside = sse + error < (1.0 + k) * low
    outside = sse - error > (1.0 + k) * high
    if not np.all(inside | outside):
        return None
    return inside


def _planted_location(e: Edge) -> float:
    """The planted value of a located edge's statistic: step location, half-saturation point or lag."""
    if e.kind == "saturation":
        return e.params["origin"] + e.params["kappa"] * np.log(2)
    return {"threshold": e.params.get("tau"), "lag": e.params.get("lag")}[e.kind]


def _feature_matrix(feature, candidates: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Every candidate's feature as a column of one (rows, candidates) array in C order, as column_stack
    builds it (the profile's sums then run in the same order), all at once when the feature can. `rows` (a
    mask or positions of the feature's rows, None: all) gives the same array as `[rows]` of the whole one,
    built on those rows only when the feature can."""
    if isinstance(feature, _Columns):
        return feature.columns(candidates, rows)
    F = np.column_stack([feature(theta) for theta in candidates])
    return F if rows is None else F[rows]


class _Columns:
    """A feature of the picked rows for one candidate (`feature(theta)`) that can also build the columns
    of many candidates at once (`columns(thetas)`), with the same values bit for bit."""

    def __call__(self, theta: float) -> np.ndarray:
        raise NotImplementedError

    def columns(self, thetas: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The candidates' columns, on `rows` of the feature's rows only (a mask or positions; None: all)."""
        raise NotImplementedError

    def by_candidate(self, thetas: np.ndarray) -> np.ndarray:
        """`columns(thetas)` transposed, in C order: each candidate's feature one contiguous row, read with no
        strided gather (the same values)."""
        return np.ascontiguousarray(self.columns(thetas).T)


@dataclass(frozen=True)
class _Step(_Columns):
    """A step's feature: whether the parent exceeds the candidate location."""

    seen: np.ndarray

    def __call__(self, theta: float) -> np.ndarray:
        return (self.seen > theta).astype(float)

    def columns(self, thetas: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        seen = self.seen if rows is None else self.seen[rows]
        return (seen[:, None] > thetas[None, :]).astype(float)

    def by_candidate(self, thetas: np.ndarray) -> np.ndarray:
        return (self.seen[None, :] > thetas[:, None]).astype(float)


@dataclass(frozen=True)
class _Curve(_Columns):
    """A saturation curve's feature, `saturation_curve(seen, 1, theta, origin)`, computed on the distinct
    parent values only (a daily parent repeats on every event of its day) with the same operations in the
    same order, then spread back to the rows."""

    seen: np.ndarray
    origin: float

    def __call__(self, theta: float) -> np.ndarray:
        return saturation_curve(self.seen, 1.0, theta, self.origin)

    def columns(self, thetas: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        curve, inverse = self.distinct(thetas)
        if rows is not None:
            inverse = inverse[rows]
        return np.take(curve, inverse, axis=0)  # curve[inverse], the same array, gathered faster

    @cached_property
    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct parent values and each row's, sorted once for every use of the feature."""
        return np.unique(self.seen, return_inverse=True)

    def by_candidate(self, thetas: np.ndarray) -> np.ndarray:
        curve, inverse = self.distinct(thetas, candidate_rows=True)
        return np.take(curve, inverse, axis=1)

    def distinct(self, thetas: np.ndarray, candidate_rows: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(the curve of each distinct parent value (rows) for each candidate (columns), each row's value);
        `candidate_rows`: transposed (a row per candidate), the same values."""
        values, inverse = self.values
        drop = np.negative(np.maximum(np.subtract(values, self.origin), 0.0))
        thetas = np.asarray(thetas, dtype=float)
        curve = (
            np.divide(drop[None, :], thetas[:, None]) if candidate_rows else np.divide(drop[:, None], thetas[None, :])
        )
        np.expm1(curve, out=curve)
        np.negative(curve, out=curve)  # times an amplitude of 1: the same bits
        return curve, inverse.reshape(-1)


@dataclass(frozen=True)
class _Lagged(_Columns):
    """A lag's feature: the visible (units, periods) panel `theta` periods earlier, at the picked rows' unit
    and day, `fill` before the first period; the values of `shift_periods(panel, int(theta), fill)` at those
    rows, gathered from the panel directly instead of shifting the whole panel for every candidate."""

    panel: np.ndarray
    fill: float
    unit: np.ndarray
    day: np.ndarray

    def __call__(self, theta: float) -> np.ndarray:
        source = self.day.astype(np.int64) - int(theta)
        valid = source >= 0
        flat = np.asarray(self.panel, dtype=float).reshape(-1)
        return np.where(
            valid, flat[self.unit.astype(np.int64) * self.panel.shape[1] + np.where(valid, source, 0)], self.fill
        )

    def columns(self, thetas: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        lags = np.array([int(theta) for theta in thetas], dtype=np.int64)
        if len(lags) == 0 or lags.min() < 0:
            raise ValueError("lags are candidates 0, 1, ..., MAX_LAG")
        width = int(lags.max()) + 1
        U, T = self.panel.shape
        # Time reversed and padded with the fill: reversed[u, T - 1 - d + lag] is panel[u, d - lag], or the
        # fill when d < lag, so each row's lags 0..width-1 are one contiguous window of it.
        reversed_ = np.full((U, T + width - 1), self.fill)
        reversed_[:, :T] = self.panel[:, ::-1]
        windows = np.lib.stride_tricks.sliding_window_view(reversed_, width, axis=1)
        unit, day = (self.unit, self.day) if rows is None else (self.unit[rows], self.day[rows])
        picked = windows[unit, T - 1 - day]
        return picked if np.array_equal(lags, np.arange(width)) else np.ascontiguousarray(picked[:, lags])


@lru_cache(maxsize=8)
def _subset(n: int) -> np.ndarray:
    """The sorted positions of the PROFILE_ROWS of n rows a profile scores (read-only; every row when n is
    small): `np.sort(rng(0).choice(n, PROFILE_ROWS, replace=False))`. The draw's distinct positions are
    marked in a mask and read off in order: the same array without the sort, which costs 4x the draw. Made
    once per n (the profiled edges of a child share it)."""
    if n <= PROFILE_ROWS:
        picked = np.arange(n)
    else:
        drawn = np.random.default_rng(0).choice(n, PROFILE_ROWS, replace=False)
        chosen = np.zeros(n, dtype=bool)
        chosen[drawn] = True
        picked = np.flatnonzero(chosen)
    picked.flags.writeable = False
    return picked


def _candidates_on_all_rows(contract: Contract, state: CanonicalState, fit: Fit, e: Edge, x: np.ndarray):
    """`_candidates` on every row of the fit, made once per edge (the profile, the co-location and the share
    gaps all ask; the features are pure functions of the candidate)."""
    key = ("candidates", f"{e.parent}->{e.child}")
    if key not in fit.memo:
        fit.memo[key] = _candidates(contract, state, fit, e, x, np.arange(len(fit.rows)))
    return fit.memo[key]


def _candidates(contract: Contract, state: CanonicalState, fit: Fit, e: Edge, x: np.ndarray, pick: np.ndarray):
    """(candidate values, statistic of a candidate, feature on the picked rows of the fit for a candidate)."""
    p = e.params
    positions = fit.rows[pick]
    if fit.rolled:  # a rolling metric: build each candidate on the whole grid, roll it, then pick the rows

        def on_rows(values: np.ndarray) -> np.ndarray:
            return _as_reported(contract, state, e.child, values)[positions]

        seen = x
    else:
        seen = x.reshape(-1)[positions] if e.kind != "lag" else x

        def on_rows(values: np.ndarray) -> np.ndarray:
            return values.reshape(-1)

    if e.kind == "lag":
        event_child = contract.variable(e.child).grain == "event"
        units, days = state.column("events", "unit_id") - 1, state.column("events", "day")

        visible = visible_panel(contract, state, e, x)
        lags = np.arange(0, MAX_LAG + 1, dtype=float)
        if event_child:
            return lags, float, _Lagged(visible, float(p["center"]), units[positions], days[positions])
        if not fit.rolled:
            T = visible.shape[1]
            return lags, float, _Lagged(visible, float(p["center"]), positions // T, positions % T)

        def lagged(theta: float) -> np.ndarray:
            return on_rows(shift_periods(visible, int(theta), p["center"]))

        return lags, float, lagged
    if e.kind == "threshold":
        levels = np.unique(_nanquantile(seen.reshape(-1), THRESHOLD_QUANTILES))
        grid = (levels[1:] + levels[:-1]) / 2 if len(levels) > 1 else levels
        if not fit.rolled:
            return grid, float, _Step(seen.reshape(-1))
        return grid, float, lambda theta: on_rows((seen > theta).astype(float))
    if e.kind != "saturation":  # a new located mechanism needs its own candidates here (and in the auditor)
        raise NotImplementedError(f"no profile for mechanism kind {e.kind!r}")
    scales = p["parent_sd"] * SATURATION_SCALES
    if fit.rolled:
        curve = lambda theta: on_rows(saturation_curve(seen, 1.0, theta, p["origin"]))  # noqa: E731
    else:
        curve = _Curve(seen.reshape(-1), float(p["origin"]))
    return scales, lambda theta: p["origin"] + theta * np.log(2), curve


def _nanquantile(values: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`np.nanquantile(values, q)` of a 1-d array, from its values sorted once: a quantile is a function of
    the order statistics alone, which numpy finds by partitioning around each of the 2 x 99 positions, ~3x
    the cost of one sort (after which those partitions are quick). Blanks, sorted last, are left out as
    `np.nanquantile` leaves them out; an empty array or one of blanks only goes to numpy. The same values; only
    a zero's sign may differ where -0.0 and 0.0 meet at a quantile (the sort and numpy's partitions may order
    them differently), which the candidates' users cannot tell apart: they compare and subtract them."""
    ordered = np.sort(values)
    blanks = int(np.count_nonzero(np.isnan(ordered))) if len(ordered) and np.isnan(ordered[-1]) else 0
    if blanks == len(ordered):
        return np.nanquantile(values, q)
    return np.quantile(ordered[: len(ordered) - blanks], q)


def _seasonal_tolerance(contract: Contract, state: CanonicalState, fit: Fit, e: Edge) -> float:
    """Three standard errors of the swing hypot(b1, b2) / |b0| of y ~ (x - c)(b0 + b1 sin + b2 cos)."""
    cols = fit.columns(e.parent)
    partial = fit.residual() + fit.X[:, cols] @ fit.coef[cols]
    raw = state.contributions[e.child][e.parent].reshape(-1)[fit.rows]
    p = e.params
    cycle = 1 + p["amplitude"] * np.sin(2 * np.pi * fit.day / p["period"] + p["phase"])
    xc = np.where(np.abs(cycle) > 1e-9, raw / (p["beta"] * cycle), 0.0)  # (x - centre), recovered exactly
    w = 2 * np.pi * fit.day / p["period"]
    X = np.column_stack([np.ones_like(xc), xc, xc * np.sin(w), xc * np.cos(w)])
    b, *_ = np.linalg.lstsq(X, partial, rcond=None)
    sigma2 = float(np.sum((partial - X @ b) ** 2)) / max(len(partial) - 4, 1)
    cov = sigma2 * np.linalg.pinv(X.T @ X)[1:, 1:]
    b0, b1, b2 = b[1:]
    amp = np.hypot(b1, b2)
    if abs(b0) < 1e-12 or amp < 1e-12:
        return float("inf")
    grad = np.array([-amp / (b0 * abs(b0)), b1 / (amp * abs(b0)), b2 / (amp * abs(b0))])
    se = float(np.sqrt(max(grad @ cov @ grad, 0.0)))
    return 3.0 * se + abs(amp / abs(b0) - p["amplitude"])

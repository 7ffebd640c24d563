"""Estimators: recover each phenomenon of the contract from a Dataset (built from X or from E).

For a child variable the auditor fits `y ~ 1 + features of every incoming edge`, one feature family per
mechanism kind; the nonlinear parameters (threshold location, half-saturation scale, lag, seasonal period)
are found by scanning, one edge at a time with the others held, twice over. Scans score a candidate by the
variance it explains beyond the other features (QR projection), on at most 20k rows; the final fit uses
every row. Definitions the contract fixes (which transform, the moderator's centre and scale) are read
from it; everything estimated is estimated from the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from auditors.dataset import Dataset
from contracts.model import Contract, Edge

MAX_LAG = 30
SEASONAL_PERIODS = (7, 14, 28, 30)
SCAN_ROWS = 20_000


@dataclass
class Rows:
    """The child's observations with every parent aligned to them (NaN where unobserved)."""

    y: np.ndarray
    day: np.ndarray
    unit_index: np.ndarray
    parents: dict[str, np.ndarray]
    panels: dict[str, np.ndarray]  # parent -> (units, periods) array, for lags
    capacity: np.ndarray


@dataclass
class ChildFit:
    statistics: dict[str, float] = field(default_factory=dict)  # edge id -> statistic value
    directions: dict[str, float] = field(default_factory=dict)  # edge id -> sign of the fitted effect
    contributions: dict[str, np.ndarray] = field(default_factory=dict)  # parent -> fitted contribution per row
    day: np.ndarray | None = None


def _grain(contract: Contract, name: str) -> str:
    return next(v.grain for v in contract.variables if v.name == name)


def build_rows(ds: Dataset, contract: Contract, child: str, parents: list[str]) -> Rows:
    units = ds.units.sort("unit_id")
    unit_ids = ds.panel["unit_id"].unique().sort().to_numpy()
    periods = contract.timeline.periods
    index = {int(u): i for i, u in enumerate(unit_ids)}
    grain = _grain(contract, child)
    base = {"unit": units, "panel": ds.panel.sort("unit_id", "day"), "event": ds.events}[grain]
    if grain == "unit":
        base = base.filter(pl.col("unit_id").is_in(list(index)))
    uidx = np.array([index.get(int(u), -1) for u in base["unit_id"].to_list()])
    keep = uidx >= 0
    base, uidx = base.filter(pl.Series(keep)), uidx[keep]
    day = base["day"].to_numpy() if "day" in base.columns else np.zeros(base.height, dtype=np.int64)

    unit_lookup = np.full(len(unit_ids), -1)
    for row, u in enumerate(units["unit_id"].to_list()):
        if u in index:
            unit_lookup[index[u]] = row

    def unit_values(column: str) -> np.ndarray:
        values = units[column].to_numpy()
        out = np.full(len(unit_ids), np.nan, dtype=object if values.dtype == object else float)
        present = unit_lookup >= 0
        out[present] = values[unit_lookup[present]]
        return out

    panel_sorted = ds.panel.sort("unit_id", "day")
    aligned, panels = {}, {}
    for p in parents:
        g = _grain(contract, p)
        if g == "unit":
            aligned[p] = unit_values(p)[uidx]
            continue
        if p in panel_sorted.columns:
            panel = panel_sorted[p].cast(pl.Float64).to_numpy().reshape(len(unit_ids), periods)
            if g == "event":  # days without events have no mean: an analyst imputes the overall mean
                panel = np.where(np.isnan(panel), np.nanmean(panel), panel)
            panels[p] = panel
            if g == "event" and grain == "panel":
                aligned[p] = panel[uidx, day]
                continue
        if g == "event" and grain == "event" and p in base.columns:
            aligned[p] = base[p].cast(pl.Float64).to_numpy()
        elif p in panels:
            aligned[p] = panels[p][uidx, day]
        else:
            aligned[p] = np.full(base.height, np.nan)
    y = base[child].cast(pl.Float64).to_numpy() if child in base.columns else np.full(base.height, np.nan)
    capacity = np.asarray(unit_values(ds.capacity)[uidx], dtype=float)
    return Rows(y=y, day=day, unit_index=uidx, parents=aligned, panels=panels, capacity=capacity)


class ChildModel:
    """The additive model of one child: feature builders per edge and the parameter scans."""

    def __init__(self, contract: Contract, child: str, rows: Rows):
        self.edges = sorted((e for e in contract.edges if e.child == child), key=lambda e: e.parent)
        self.rows = rows
        v = next(v for v in contract.variables if v.name == child)
        # Values piled up exactly at a natural bound (a share at 1.0) are censored: they say "at least",
        # not "equal", so the fit leaves them out rather than flattening every slope towards the bound.
        self.uncensored = np.ones(len(rows.y), dtype=bool)
        for bound in (v.min, v.max):
            if bound is not None and v.role != "volume":
                self.uncensored &= ~np.isclose(rows.y, bound, rtol=0, atol=1e-9)
        self.theta: dict[str, float] = {}
        self.levels = {v.name: v.levels for v in contract.variables if v.dtype == "categorical"}

    def x(self, e: Edge) -> np.ndarray:
        return (
            np.asarray(self.rows.parents[e.parent], dtype=float)
            if e.kind != "categorical"
            else self.rows.parents[e.parent]
        )

    def features(self, e: Edge, theta: float | None = None) -> np.ndarray:
        p, rows = e.params, self.rows
        theta = self.theta.get(e.parent) if theta is None else theta
        match e.kind:
            case "monotone":
                x = self.x(e)
                return (np.log1p(np.maximum(x, 0)) if p["transform"] == "log" else x)[:, None]
            case "threshold":
                return (self.x(e) > theta).astype(float)[:, None]
            case "saturation":
                return -np.expm1(-np.maximum(self.x(e) - p["origin"], 0) / theta)[:, None]
            case "lag":
                lag = int(theta)
                panel = rows.panels.get(e.parent)
                if panel is None:
                    return np.full((len(rows.y), 1), np.nan)
                # Before the first `lag` days the cause is unobserved: hold it at its mean, as the generation does.
                lagged = np.full_like(panel, np.nanmean(panel))
                lagged[:, lag:] = panel[:, : panel.shape[1] - lag] if lag else panel
                return lagged[rows.unit_index, rows.day][:, None]
            case "interaction":
                z = (np.asarray(rows.parents[p["moderator"]], dtype=float) - p["moderator_center"]) / p[
                    "moderator_scale"
                ]
                return ((self.x(e) - p["center"]) * z)[:, None]
            case "seasonal":
                xc = self.x(e) - p["center"]
                w = 2 * np.pi * rows.day / theta
                return np.column_stack([xc, xc * np.sin(w), xc * np.cos(w)])
            case "categorical":
                codes = self.x(e)
                return np.column_stack([(codes == lvl).astype(float) for lvl in self.levels[e.parent][1:]])
            case "ratio":
                return (self.x(e) / rows.capacity)[:, None]
        raise KeyError(e.kind)

    def candidates(self, e: Edge) -> np.ndarray:
        x = self.x(e) if e.kind in ("threshold", "saturation") else None
        match e.kind:
            case "threshold":  # midpoints between observed levels: a step between two levels sits halfway
                levels = np.unique(np.nanquantile(x, np.linspace(0.02, 0.98, 97)))
                return (levels[1:] + levels[:-1]) / 2 if len(levels) > 1 else levels
            case "saturation":
                return (np.nanstd(x) or 1.0) * np.linspace(0.1, 4.0, 79)
            case "lag":
                return np.arange(0, MAX_LAG + 1, dtype=float)
            case "seasonal":
                return np.array(SEASONAL_PERIODS, dtype=float)
        return np.array([])

    def _design(self, skip: Edge | None = None) -> list[np.ndarray]:
        return [np.ones((len(self.rows.y), 1))] + [self.features(e) for e in self.edges if e is not skip]

    def fit(self) -> ChildFit:
        nonlinear = [e for e in self.edges if e.kind in ("threshold", "saturation", "lag", "seasonal")]
        for e in nonlinear:  # start from the middle of each scan
            cands = self.candidates(e)
            self.theta[e.parent] = float(cands[len(cands) // 2]) if e.kind != "lag" else 0.0
        valid = np.isfinite(self.rows.y) & self.uncensored
        for _ in range(2):
            for e in nonlinear:
                self.theta[e.parent] = self._scan(e, valid)
        columns = self._design()
        X = np.hstack(columns)
        covered = np.isfinite(X).all(axis=1)
        ok = valid & covered
        # Contributions are evaluated on every row the parents cover, censored or not, as in generation.
        result = ChildFit(day=self.rows.day[covered])
        if ok.sum() < X.shape[1] + 10:
            return result
        coef = np.linalg.lstsq(X[ok], self.rows.y[ok], rcond=None)[0]
        start = 1
        for e, block in zip(self.edges, columns[1:], strict=True):
            b = coef[start : start + block.shape[1]]
            start += block.shape[1]
            result.contributions[e.parent] = block[covered] @ b
            result.statistics[f"{e.parent}->{e.child}"] = self._statistic(e, b)
            if e.kind != "categorical":
                result.directions[f"{e.parent}->{e.child}"] = float(np.sign(b[0]))
        return result

    def _scan(self, e: Edge, valid: np.ndarray) -> float:
        others = np.hstack(self._design(skip=e))
        cands = self.candidates(e)
        blocks = [self.features(e, cand) for cand in cands]
        ok = valid & np.isfinite(others).all(axis=1)
        for block in blocks:  # score every candidate on the same rows (a lag moves where the gaps are)
            ok &= np.isfinite(block).all(axis=1)
        idx = np.flatnonzero(ok)
        if len(idx) > SCAN_ROWS and e.kind != "lag":  # a lag's optimum is flat: it needs every row
            idx = np.sort(np.random.default_rng(0).choice(idx, SCAN_ROWS, replace=False))
        if len(idx) < 30:
            return self.theta[e.parent]
        q, _ = np.linalg.qr(others[idx])
        y = self.rows.y[idx]
        ry = y - q @ (q.T @ y)
        if all(b.shape[1] == 1 for b in blocks):
            # One extra column per candidate: its explained variance is (f.ry)^2 / (f.f - |Q'f|^2), since ry is
            # already orthogonal to Q; one matrix product scores every candidate at once.
            F = np.column_stack([b[idx, 0] for b in blocks])
            denom = np.einsum("ij,ij->j", F, F) - np.einsum("ij,ij->j", q.T @ F, q.T @ F)
            scores = np.where(denom > 1e-12, (F.T @ ry) ** 2 / np.maximum(denom, 1e-12), -np.inf)
            return float(cands[int(np.argmax(scores))])
        best, best_score = self.theta[e.parent], -np.inf
        for cand, block in zip(cands, blocks, strict=True):
            f = block[idx]
            rf = f - q @ (q.T @ f)
            coef, *_ = np.linalg.lstsq(rf, ry, rcond=None)
            score = float(np.sum((rf @ coef) ** 2))
            if score > best_score:
                best, best_score = float(cand), score
        return best

    def _statistic(self, e: Edge, b: np.ndarray) -> float:
        match e.kind:
            case "threshold":
                return self.theta[e.parent]
            case "saturation":
                return e.params["origin"] + self.theta[e.parent] * np.log(2)
            case "lag":
                return self.theta[e.parent]
            case "seasonal":
                return float(np.hypot(b[1], b[2]) / abs(b[0])) if b[0] else float("nan")
            case "categorical":
                effects = np.concatenate([[0.0], b])
                return float(effects.max() - effects.min())
        return float(b[0])


def fit_child(ds: Dataset, contract: Contract, child: str) -> ChildFit:
    parents = sorted(
        {e.parent for e in contract.edges if e.child == child}
        | {e.params["moderator"] for e in contract.edges if e.child == child and e.kind == "interaction"}
    )
    rows = build_rows(ds, contract, child, parents)
    return ChildModel(contract, child, rows).fit()


def period_means(ds: Dataset, contract: Contract, variable: str | None, column: str | None) -> tuple[float, float]:
    half = contract.timeline.periods // 2
    if column is not None:
        frame, name = ds.events, column.split(".", 1)[1]
    else:
        assert variable is not None
        frame = ds.events if _grain(contract, variable) == "event" else ds.panel
        name = variable
    values = frame.select(pl.col("day"), pl.col(name).cast(pl.Float64)).drop_nulls()
    h1 = values.filter(pl.col("day") < half)[name].mean()
    h2 = values.filter(pl.col("day") >= half)[name].mean()
    return float(h1) if h1 is not None else float("nan"), float(h2) if h2 is not None else float("nan")


def recover_phenomena(ds: Dataset, contract: Contract, kinds: set[str] | None = None) -> dict[str, float]:
    """Every phenomenon's value (of the given kinds) from this dataset; NaN when it cannot be computed."""
    fits: dict[str, ChildFit] = {}
    wanted = [ph for ph in contract.phenomena if kinds is None or ph.kind in kinds]
    needed = {ph.edge.split("->")[1] for ph in wanted if ph.kind == "edge_effect" and ph.edge}
    needed |= {ph.variables[1] for ph in wanted if ph.kind == "attribution"}
    for child in sorted(needed):
        try:
            fits[child] = fit_child(ds, contract, child)
        except (np.linalg.LinAlgError, ValueError, KeyError):
            fits[child] = ChildFit()
    values: dict[str, float] = {}
    half = contract.timeline.periods // 2
    for ph in wanted:
        if ph.kind == "edge_effect":
            child = ph.edge.split("->")[1] if ph.edge else ""
            values[ph.id] = fits.get(child, ChildFit()).statistics.get(ph.edge or "", float("nan"))
            values[f"direction:{ph.edge}"] = fits.get(child, ChildFit()).directions.get(ph.edge or "", float("nan"))
        elif ph.kind == "period_change":
            h1, h2 = period_means(ds, contract, ph.variables[0] if ph.variables else None, ph.column)
            values[ph.id] = (h2 - h1) / h1 if h1 else float("nan")
        elif ph.kind == "attribution":
            parent, focus = ph.variables
            fit = fits.get(focus, ChildFit())
            if not fit.contributions or fit.day is None:
                values[ph.id] = float("nan")
                continue
            first, second = fit.day < half, fit.day >= half
            deltas = {p: float(c[second].mean() - c[first].mean()) for p, c in fit.contributions.items()}
            total = sum(deltas.values())
            values[ph.id] = deltas.get(parent, float("nan")) / total if total else float("nan")
    return values

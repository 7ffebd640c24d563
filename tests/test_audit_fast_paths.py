"""The auditor's fast paths give what its plain code gives, bit for bit, on random inputs: the unit x day grid
computed on its cells and by joins, event means scattered by cell and joined, factor matching of many steps
at once and one at a time, and the estimators' shared or vectorised work and the plain computation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors import estimate
from auditors.dataset import (
    FACTOR_MATCH,
    FACTORS_BY_UNIT,
    Dataset,
    _dated,
    _known_factor,
    _with_detail,
    _with_event_means,
    first_per_unit_day,
    group_means,
    join_on_grid,
    joined_grid,
    known_factors,
    open_grid,
    row_of,
    sorted_unique,
)
from auditors.estimate import (
    ChildFit,
    ChildModel,
    Rows,
    _at_bound,
    period_means,
    period_means_at_once,
    roll,
    scan_subset,
)
from auditors.estimators import ESTIMATORS, Categorical, projections
from contracts.model import Edge, Phenomenon


def _keys(rng: np.random.Generator, n: int, units: np.ndarray, periods: int, nulls: bool) -> dict:
    unit = rng.choice(np.concatenate([units, [999_999, -3]]), n)  # some units outside the grid
    day = rng.integers(-2, periods + 2, n)  # some days outside it
    unit_s, day_s = pl.Series("unit_id", unit, dtype=pl.Int64), pl.Series("day", day, dtype=pl.Int64)
    if nulls:
        unit_s = unit_s.scatter(rng.choice(n, n // 10, replace=False), None)
        day_s = day_s.scatter(rng.choice(n, n // 10, replace=False), None)
    return {"unit_id": unit_s, "day": day_s}


@pytest.mark.parametrize("seed", range(6))
def test_the_grid_on_its_cells_is_the_grid_by_joins(seed):
    rng = np.random.default_rng(seed)
    periods = int(rng.integers(1, 40))
    master = np.sort(rng.choice(5000, int(rng.integers(1, 12)), replace=False)).astype(np.int64)
    master *= 10**6 if seed % 3 == 2 else 1  # ids too far apart for a table: searched
    units = pl.DataFrame({"unit_id": rng.permutation(master)}, schema={"unit_id": pl.Int64})
    events = pl.DataFrame(_keys(rng, int(rng.integers(0, 400)), master, periods, nulls=seed % 2 == 0))
    daily = [
        pl.DataFrame({**_keys(rng, int(rng.integers(0, 200)), master, periods, nulls=True), "x": 1.0})
        for _ in range(int(rng.integers(0, 3)))
    ]
    got = open_grid(units, events, daily, periods, "volume")
    assert got is not None
    want = joined_grid(units, events, daily, periods, "volume")
    assert got.schema == want.schema
    assert got.equals(want)


@pytest.mark.parametrize("spread", [1, 1000, 10**9])
def test_sorted_unique_is_np_unique(spread):
    ids = np.random.default_rng(spread).integers(-50, 5000, 3000) * spread
    assert np.array_equal(sorted_unique(ids), np.unique(ids)) and sorted_unique(ids).dtype == ids.dtype
    assert np.array_equal(sorted_unique(ids[:0]), np.unique(ids[:0]))
    floats = np.where(ids % 3 == 0, np.nan, ids / 7)  # not integers (a day column with blanks): np.unique
    assert np.array_equal(sorted_unique(floats), np.unique(floats), equal_nan=True)


def test_the_grid_leaves_keys_that_are_not_int64_to_the_joins():
    units = pl.DataFrame({"unit_id": [1, 2]}, schema={"unit_id": pl.Int64})
    events = pl.DataFrame({"unit_id": [1, 2], "day": [0, 1]}, schema={"unit_id": pl.Int32, "day": pl.Int64})
    assert open_grid(units, events, [], 3, "volume") is None


@pytest.mark.parametrize("seed", range(6))
def test_event_means_by_cell_are_the_joined_group_means(seed):
    rng = np.random.default_rng(100 + seed)
    periods, units = int(rng.integers(1, 30)), np.sort(rng.choice(900, int(rng.integers(1, 8)), replace=False))
    panel = pl.DataFrame(
        {"unit_id": np.repeat(units, periods), "day": np.tile(np.arange(periods), len(units)), "open": 1},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "open": pl.Int8},
    )
    n = int(rng.integers(0, 500))
    x = rng.standard_normal(n) * 10 ** rng.uniform(-3, 6, n)
    x[rng.random(n) < 0.2] = np.nan
    x[rng.random(n) < 0.02] = np.inf
    events = pl.DataFrame(
        {**_keys(rng, n, units, periods, nulls=seed % 2 == 1), "x": x, "k": rng.integers(0, 5, n)}
    ).with_columns(pl.col("x").fill_nan(None) if seed % 3 == 0 else pl.col("x"))
    got = _with_event_means(panel, events, ["x", "k"])
    want = panel.join(group_means(events, ["x", "k"]), on=["unit_id", "day"], how="left")
    assert got.schema == want.schema
    assert got.equals(want)
    shuffled = panel.sample(fraction=1.0, shuffle=True, seed=seed)  # not the grid in order: the join
    assert _with_event_means(shuffled, events, ["x"]).equals(
        shuffled.join(group_means(events, ["x"]), on=["unit_id", "day"], how="left")
    )


@pytest.mark.parametrize("factors", [factors for _, factors in FACTORS_BY_UNIT])
def test_factors_matched_at_once_are_those_matched_one_by_one(factors):
    rng = np.random.default_rng(len(factors))
    logs = np.log(np.array([f for known in factors for f in (known, 1 / known)]))
    steps = np.concatenate(
        [
            rng.normal(0, 3, 400),
            rng.choice(logs, 400) + rng.normal(0, 0.2, 400),  # near a factor: matched or not by the margins
            rng.choice(logs, 50),
            (logs[:, None] + logs[None, :]).ravel() / 2,  # halfway: ties between two factors
            [np.nan, np.inf, -np.inf, 0.0],
        ]
    )
    noise = np.abs(rng.normal(0, 0.3, len(steps)))
    noise[::7] = np.nan
    noise[::11] = FACTOR_MATCH
    got = known_factors(steps, noise, factors)
    for step, spread, match in zip(steps, noise, got, strict=True):
        want = _known_factor(float(step), max(FACTOR_MATCH, spread), factors)
        assert (want is None and np.isnan(match)) or match == want


# --- the child model: block-wise finiteness and gathers, unit-level dummies, the scan subset ---------------


class PlainModel(ChildModel):
    """The child model as written before its fast paths: the whole design matrix tested for finite rows and
    indexed, the scan subset drawn from the rows, dummies computed on every row, isclose for bounds."""

    def __init__(self, contract, child, rows):
        super().__init__(contract, child, rows)
        v = contract.variable(child)
        self.uncensored = np.ones(len(rows.y), dtype=bool)
        for bound in (v.min, v.max) if v.observe in ("value", "duration") and v.role != "volume" else ():
            if bound is not None:
                self.uncensored &= ~np.isclose(rows.y, bound, rtol=0, atol=1e-9)

    def _compute_features(self, e, theta):
        if e.kind == "categorical":  # every row's level compared, not every unit's
            block = Categorical.dummies(self.x(e), self.levels[e.parent])
            if self.window is None:
                return block
            U, T = self.rows.open.shape
            cols = [
                roll(block[:, k].reshape(U, T), self.window, self.rows.open).reshape(-1) for k in range(block.shape[1])
            ]
            return np.column_stack(cols)
        return super()._compute_features(e, theta)

    def fit(self):
        scanned = [e for e in self.edges if ESTIMATORS[e.kind].scans]
        for e in scanned:
            self.theta[e.parent] = ESTIMATORS[e.kind].start(self.candidates(e))
        valid = np.isfinite(self.rows.y) & self.uncensored
        scanned_with = {}
        for _ in range(estimate.SCAN_ROUNDS):
            for e in scanned:
                others = tuple(self.theta[o.parent] for o in scanned if o is not e)
                if scanned_with.get(e.parent) == others:
                    continue
                self.theta[e.parent] = self._scan(e, valid)
                scanned_with[e.parent] = others
        columns = self._design()
        X = np.hstack(columns)
        covered = np.isfinite(X).all(axis=1) & np.isfinite(self.rows.y)
        ok = valid & covered
        result = ChildFit(day=self.rows.day[covered])
        if ok.sum() < X.shape[1] + 10:
            return result
        coef = np.linalg.lstsq(X[ok], self.rows.y[ok], rcond=None)[0]
        start = 1
        for e, block in zip(self.edges, columns[1:-1], strict=True):
            b = coef[start : start + block.shape[1]]
            start += block.shape[1]
            result.contributions[e.parent] = block[covered] @ b
            result.statistics[f"{e.parent}->{e.child}"] = ESTIMATORS[e.kind].statistic(
                self, e, b, self.theta.get(e.parent)
            )
        return result

    def _scan(self, e, valid):
        others = np.hstack(self._design(skip=e))
        estimator = ESTIMATORS[e.kind]
        cands = self.candidates(e)
        ok = valid & np.isfinite(others).all(axis=1)
        finite = estimator.finite_rows(self, e, cands) if self.window is None else None
        blocks = None
        if finite is not None:
            ok &= finite
        else:
            blocks = [self.features(e, cand) for cand in cands]
            for block in blocks:
                ok &= np.isfinite(block).all(axis=1)
        idx = np.flatnonzero(ok)
        if len(idx) > estimate.SCAN_ROWS and e.kind != "lag" and not self.sporadic:
            idx = np.sort(np.random.default_rng(0).choice(idx, estimate.SCAN_ROWS, replace=False))
        if len(idx) < estimate.MIN_SCAN_ROWS:
            return self.theta[e.parent]
        q, _ = np.linalg.qr(others[idx])
        ry = self.rows.y[idx] - q @ (q.T @ self.rows.y[idx])
        if blocks is None or all(b.shape[1] == 1 for b in blocks):
            if blocks is None:
                fry, qf, ff = estimator.sums(self, e, cands, idx, q, ry)
            else:
                fry, qf, ff = projections(np.column_stack([b[idx, 0] for b in blocks]), q, ry)
            denom = ff - np.einsum("ij,ij->j", qf, qf)
            scores = np.where(denom > 1e-12, fry**2 / np.maximum(denom, 1e-12), -np.inf)
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


def _random_child(seed: int, rolling: bool):
    """A child of a threshold, a saturation, a lag, a seasonal, a categorical unit attribute and a monotone
    cause, with blanks in the causes and the child and values piled at the child's bound."""
    from tests.test_estimators import LEVELS, _contract, _variable

    rng = np.random.default_rng(seed)
    U, T = 30, 240
    unit_index, day = np.repeat(np.arange(U), T), np.tile(np.arange(T), U)
    panel = rng.normal(5.0, 1.0, (U, 1)) + rng.normal(0.0, 1.5, (U, T))
    panel[rng.random((U, T)) < 0.05] = np.nan
    by_unit = np.array([*LEVELS, None], dtype=object)[rng.integers(len(LEVELS) + 1, size=U)]
    parents = {
        "a": np.where(rng.random(U * T) < 0.03, np.nan, rng.normal(0, 2, U * T)),
        "b": np.abs(rng.normal(3, 2, U * T)),
        "c": by_unit[unit_index],
        "l": panel.reshape(-1),
        "m": rng.normal(0, 1, U * T),
        "s": rng.normal(5, 1, U * T),
    }
    y = (
        (parents["a"] > 0.7) * 2.0 - np.expm1(-parents["b"] / 1.5) + np.nan_to_num(parents["m"])
        + np.nan_to_num(np.roll(panel, 5, axis=1).reshape(-1)) * 0.5 + rng.normal(0, 0.5, U * T)
    )  # fmt: skip
    y = np.minimum(y, 3.0)  # a pile at the bound: censored rows
    y[rng.random(U * T) < 0.05] = np.nan
    is_open = rng.random((U, T)) < 0.9
    rows = Rows(
        y=y, day=day, unit_index=unit_index, parents=parents, panels={"l": panel},
        capacity=np.ones(U * T), open=is_open if rolling else None, by_unit={"c": by_unit},
    )  # fmt: skip
    lin = {"transform": "linear"}
    edges = [
        Edge(parent="a", child="y", kind="threshold", params={}, sign="+", note=""),
        Edge(parent="b", child="y", kind="saturation", params={"origin": 0.0}, sign="+", note=""),
        Edge(parent="c", child="y", kind="categorical", params={}, sign="+", note=""),
        Edge(parent="l", child="y", kind="lag", params={}, sign="+", note=""),
        Edge(parent="m", child="y", kind="monotone", params=lin, sign="+", note=""),
        Edge(parent="s", child="y", kind="seasonal", params={"center": 5.0}, sign="+", note=""),
    ]
    variables = [_variable(n) for n in ("a", "b", "l", "m", "s")]
    variables += [_variable("c", grain="unit", dtype="categorical", levels=LEVELS)]
    child = _variable("y").model_copy(update={"max": 3.0, "observe": "rolling" if rolling else "value", "window": 7})
    return _contract(edges, [*variables, child]), rows


@pytest.mark.parametrize("rolling", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_the_child_model_fits_what_the_plain_model_fits(seed, rolling, monkeypatch):
    monkeypatch.setattr(estimate, "SCAN_ROWS", 2000)  # the scans score a subset, as on a full-size world
    contract, rows = _random_child(seed, rolling)
    got = ChildModel(contract, "y", rows).fit()
    want = PlainModel(contract, "y", rows).fit()
    assert got.statistics and got.statistics.keys() == want.statistics.keys()
    for key, value in want.statistics.items():
        assert got.statistics[key] == value or (np.isnan(value) and np.isnan(got.statistics[key])), key
    for parent, contribution in want.contributions.items():
        assert np.array_equal(got.contributions[parent], contribution, equal_nan=True), parent
    assert np.array_equal(got.day, want.day)


@pytest.mark.parametrize("n", [estimate.SCAN_ROWS + 1, 25_000, 61_234])
def test_the_scan_subset_is_the_sorted_draw_from_the_rows(n):
    rows = np.sort(np.random.default_rng(n).choice(3 * n, n, replace=False))
    want = np.sort(np.random.default_rng(0).choice(rows, estimate.SCAN_ROWS, replace=False))
    assert np.array_equal(rows[scan_subset(n)], want)


def test_the_bound_test_is_isclose():
    rng = np.random.default_rng(7)
    y = np.concatenate([rng.normal(0, 1, 500), 1 + rng.normal(0, 1e-9, 500), [np.nan, np.inf, -np.inf, 1.0, 0.0]])
    for bound in (0, 1, 1.0, -2.5, 1e-9, np.inf, -np.inf):
        assert np.array_equal(_at_bound(y, bound), np.isclose(y, bound, rtol=0, atol=1e-9)), bound


# --- period changes: one select per frame -----------------------------------------------------------------


def _phenomenon(pid: str, variable: str | None = None, column: str | None = None) -> Phenomenon:
    return Phenomenon(
        id=pid, kind="period_change", statistic="relative_change", variables=[variable] if variable else [],
        column=column, tolerance=0.1, files=["f"], description="d",
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_period_means_at_once_are_those_taken_one_by_one(seed):
    from tests.test_estimators import T, _contract, _variable

    rng = np.random.default_rng(seed)

    def frame(n: int, chunks: int) -> pl.DataFrame:
        day = pl.Series("day", rng.integers(0, T, n), dtype=pl.Int64)
        x = rng.lognormal(rng.uniform(-3, 8), rng.uniform(0.1, 3), n)
        x[rng.random(n) < 0.01] = np.nan
        parts = {
            "day": day.scatter(rng.choice(n, n // 20, replace=False), None) if n else day,
            "x": pl.Series("x", x).scatter(rng.choice(n, n // 7, replace=False), None) if n else pl.Series("x", x),
            "k": pl.Series("k", rng.integers(0, 9, n), dtype=pl.Int64),
            "amt": pl.Series("amt", rng.normal(100, 30, n)),
        }
        whole = pl.DataFrame(parts)
        cuts = np.sort(rng.choice(n + 1, chunks - 1)) if chunks > 1 else []
        pieces = [whole.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        return pl.concat(pieces, rechunk=False)  # chunked as a frame built by joins and concatenations can be

    sizes = [0, 1, 7, 127, 128, 129, 1000, 33_333]
    panel = frame(int(rng.choice(sizes)), int(rng.integers(1, 4)))
    events = frame(int(rng.choice(sizes)), int(rng.integers(1, 4))).rename({"x": "e", "k": "j"})
    variables = [_variable("x"), _variable("k"), _variable("e", grain="event"), _variable("j", grain="event")]
    contract = _contract([], variables)
    ds = Dataset(pl.DataFrame({"unit_id": [1]}), panel, events, "cap")
    phenomena = [_phenomenon(f"p{v}", variable=v) for v in ("x", "k", "e", "j")]
    phenomena.append(_phenomenon("pamt", column="events.amt"))
    got = period_means_at_once(ds, contract, phenomena)
    assert got is not None
    for ph in phenomena:
        want = period_means(ds, contract, ph.variables[0] if ph.variables else None, ph.column)
        assert np.array_equal(got[ph.id], want, equal_nan=True), ph.id
    missing = _phenomenon("nope", column="events.nope")
    assert period_means_at_once(ds, contract, [*phenomena, missing]) is None


# --- daily files onto the grid: first row per unit-day, joins by cell ----------------------------------------


def _daily_frame(rng: np.random.Generator, n: int, units: np.ndarray, periods: int, nulls: bool) -> pl.DataFrame:
    keys = _keys(rng, n, units, periods, nulls)
    values = rng.normal(size=n)
    return pl.DataFrame(
        {**keys, "x": values, "label": rng.choice(["a", "b", None], n).tolist()},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "x": pl.Float64, "label": pl.String},
    )


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_first_per_unit_day_is_polars_unique(seed, nulls):
    rng = np.random.default_rng(seed)
    frame = _daily_frame(rng, 3000, np.arange(5, 40), 60, nulls)
    want = frame.unique(subset=["unit_id", "day"], keep="first", maintain_order=True)
    assert first_per_unit_day(frame).equals(want, null_equal=True)
    distinct = want.filter(pl.col("unit_id").is_not_null() & pl.col("day").is_not_null())
    assert first_per_unit_day(distinct).equals(distinct, null_equal=True)  # nothing repeated: the frame itself
    assert first_per_unit_day(frame.clear()).equals(frame.clear())


@pytest.mark.parametrize("nulls", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_a_daily_file_joined_on_the_grid_is_the_join(seed, nulls):
    rng = np.random.default_rng(seed)
    units, periods = np.array([3, 7, 8, 20, 41]), 50
    grid = pl.DataFrame(
        {"unit_id": np.repeat(units, periods), "day": np.tile(np.arange(periods), len(units)), "open": 1},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "open": pl.Int8},
    )
    frame = _daily_frame(rng, 400, units, periods, nulls).unique(subset=["unit_id", "day"], maintain_order=True)
    got = join_on_grid(grid, frame, (units, periods))
    assert got is not None
    assert got.equals(grid.join(frame, on=["unit_id", "day"], how="left", maintain_order="left"), null_equal=True)
    # A unit-day twice, a column the join would suffix, string keys or no grid: the join must run.
    inside = frame.filter(pl.col("unit_id").is_in(units.tolist()) & pl.col("day").is_between(0, periods - 1))
    assert join_on_grid(grid, pl.concat([frame, inside.head(1)]), (units, periods)) is None
    assert join_on_grid(grid, frame.rename({"x": "open"}), (units, periods)) is None
    assert join_on_grid(grid, frame.with_columns(pl.col("unit_id").cast(pl.String)), (units, periods)) is None
    assert join_on_grid(grid, frame, None) is None


@pytest.mark.parametrize("sorted_ids", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_event_detail_by_position_is_the_join(seed, sorted_ids):
    rng = np.random.default_rng(seed)
    ids = rng.choice(5000, 900, replace=False)
    events = pl.DataFrame(
        {"event_id": np.sort(ids), "day": rng.integers(0, 90, 900), "amount": rng.normal(size=900)},
        schema={"event_id": pl.Int64, "day": pl.Int64, "amount": pl.Float64},
    )
    events = events.with_columns(events["event_id"].scatter([3, 17], None))  # events without an id match nothing
    detail_ids = rng.choice(np.concatenate([ids, rng.choice(np.arange(5000, 6000), 100)]), 700, replace=False)
    detail = pl.DataFrame(
        {"event_id": np.sort(detail_ids) if sorted_ids else detail_ids, "score": rng.integers(1, 6, 700)},
        schema={"event_id": pl.Int64, "score": pl.Int64},
    )
    assert _with_detail(events, detail).equals(
        events.join(detail, on="event_id", how="left", maintain_order="left"), null_equal=True
    )
    assert _dated(detail, events.drop_nulls("event_id")).equals(
        detail.join(events.select("event_id", "day"), on="event_id", maintain_order="left"), null_equal=True
    )
    # An id twice or string ids: the join itself.
    assert row_of(events["event_id"], pl.concat([detail, detail.head(1)])["event_id"]) is None
    assert row_of(events["event_id"].cast(pl.String), detail["event_id"].cast(pl.String)) is None
    assert np.array_equal(row_of(events["event_id"], detail["event_id"].clear()), np.full(events.height, -1))


def test_unit_ids_whose_differences_wrap_around_are_not_a_grid():
    """Unit ids out of order must leave the panel to the joins, even where their differences wrap around."""
    from auditors.dataset import _as_grid

    a = int(0.7 * 2**63)
    units = [0, a, 2 * a - 2**64]  # each difference "positive" in int64, yet not increasing
    panel = pl.DataFrame({"unit_id": np.repeat(units, 3), "day": np.tile(np.arange(3), 3)})
    assert _as_grid(panel) is None
    assert _as_grid(panel.sort("unit_id", "day")) is not None

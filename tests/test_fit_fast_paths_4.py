"""The fit's gathers and running sums give the plain computation's numbers and layouts, bit for bit: a step's
running sums taken column by column and as one stack, a lag's columns taken lag by lag and by one two-index
gather (and the same error off the panel), and a design gathered by takes and by indexing (rows off a block
included)."""

from __future__ import annotations

import numpy as np
import pytest

from auditors.estimate import gathered
from auditors.estimators import ESTIMATORS
from tests.test_scan_fast_paths import _edge, _model, _scan_inputs


def _step_sums_stacked(model, e, candidates, rows, q, ry):
    """A step's (F'ry, Q'F, F'F) as the scan took them before: one running sum down the (rows, 1 + k) stack."""
    x = model.x(e)[rows]
    order = np.argsort(x, kind="stable")
    above = np.searchsorted(x[order], candidates, side="right")
    tail = np.cumsum(np.column_stack([ry, q])[order][::-1], axis=0)[::-1]
    tail = np.vstack([tail, np.zeros((1, tail.shape[1]))])
    at = tail[above]
    return at[:, 0], at[:, 1:].T, (len(x) - above).astype(float)


def _same(got, want) -> bool:
    return all(g.strides == w.strides and np.array_equal(g, w) for g, w in zip(got, want, strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_a_steps_running_sums_by_column_are_the_stacks(seed):
    model = _model(seed)
    e = _edge(model, "threshold")
    rng = np.random.default_rng(seed)
    x = model.x(e)
    if seed % 2:  # ties: a count-like parent, and infinities at both ends
        x[:] = np.round(x, 0)
        x[rng.random(len(x)) < 0.01] = np.inf
        x[rng.random(len(x)) < 0.01] = -np.inf
    finite = np.flatnonzero(~np.isnan(x))
    rows = np.sort(rng.choice(finite, min(len(finite), 4000), replace=False))
    _, q, ry = _scan_inputs(model, seed, len(rows), int(rng.integers(1, 6)))
    ry = ry * 10.0 ** rng.integers(-3, 4, len(ry))  # magnitudes far apart: any change of order shows
    cands = np.concatenate([model.candidates(e), [-1e9, 1e9, np.inf, -np.inf, x[rows[0]], x[rows[0]]]])
    got = ESTIMATORS["threshold"].sums(model, e, cands, rows, q, ry)
    assert _same(got, _step_sums_stacked(model, e, cands, rows, q, ry))


def _lag_columns_plain(model, e, candidates, rows):
    """A lag's columns as the scan took them before: one two-index gather of every lag and row."""
    rows_, panel = model.rows, model.rows.panels[e.parent]
    mean = model.panel_mean(e.parent)
    known = model.carried(e.parent) if model.is_root(e.parent) else panel
    lags = candidates.astype(np.int64)
    longest = int(lags.max(initial=0))
    padded = np.full((panel.shape[0], panel.shape[1] + longest), mean)
    padded[:, longest:] = np.where(np.isnan(known), mean, known)
    day = rows_.day[rows] % panel.shape[1]
    at = rows_.unit_index[rows] * padded.shape[1] + day + longest
    return padded.reshape(-1)[at[None, :] - lags[:, None]].T


LAG_SETS = [np.arange(31.0), np.array([3.0, 0.0, 7.0, 7.0]), np.array([-2.0, 4.0]), np.array([]), np.array([9.0])]


@pytest.mark.parametrize("lags", LAG_SETS)
@pytest.mark.parametrize("seed", range(3))
def test_a_lags_columns_taken_lag_by_lag_are_the_two_index_gather(seed, lags):
    model = _model(seed)
    e = _edge(model, "lag")
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(len(model.rows.y), 2500, replace=False))
    model.rows.day = model.rows.day.copy()
    model.rows.day[rows[:5]] -= model.rows.panels[e.parent].shape[1]  # days before the timeline read its end
    for at in (rows, rows[:0], rows[::-1], rows[rows < len(rows) // 2]):
        try:
            want = _lag_columns_plain(model, e, lags, at)
        except IndexError:  # a negative lag past the last day: both fail alike
            with pytest.raises(IndexError):
                ESTIMATORS["lag"].columns(model, e, lags, at)
            continue
        got = ESTIMATORS["lag"].columns(model, e, lags, at)
        assert got.strides == want.strides and np.array_equal(got, want)


def test_a_lag_read_off_the_panel_fails_as_the_two_index_gather_does():
    model = _model(0)
    e = _edge(model, "lag")
    rows = np.arange(100)
    model.rows.unit_index = model.rows.unit_index.copy()
    model.rows.unit_index[rows[-1]] = model.rows.panels[e.parent].shape[0]  # a unit past the panel's last
    for columns in (ESTIMATORS["lag"].columns, _lag_columns_plain):
        with pytest.raises(IndexError):
            columns(model, e, np.arange(31.0), rows)
    model.rows.unit_index[rows[-1]] = -1  # a negative position counts from the end, as indexing does
    got = ESTIMATORS["lag"].columns(model, e, np.arange(31.0), rows)
    assert np.array_equal(got, _lag_columns_plain(model, e, np.arange(31.0), rows))


@pytest.mark.parametrize("seed", range(6))
def test_a_design_gathered_at_any_rows_is_the_indexed_stack(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 3000))
    blocks = [np.ones((n, 1)), rng.normal(size=(n, 3)), np.asfortranarray(rng.normal(size=(n, 4)))]
    blocks += [rng.normal(size=(n, 6))[:, ::2], rng.normal(size=(n, 0)), rng.normal(size=(2 * n, 2))[::2]]
    cases = [
        rng.integers(0, n, 4 * n),  # unsorted, repeated
        rng.integers(0, n, n).astype(np.int32),
        np.array([0, n - 1, 0], dtype=np.uint16) if n < 65536 else np.array([0]),
        rng.integers(-n, n, n),  # negative positions count from the end
    ]
    for rows in cases:
        got = gathered(blocks, rows)
        assert got.flags.f_contiguous and np.array_equal(got, np.hstack(blocks)[rows])
    with pytest.raises(IndexError):
        gathered(blocks, np.array([0, n]))
    with pytest.raises(IndexError):
        gathered(blocks, np.array([-n - 1]))


def _dataset(seed: int):
    """A small dataset whose variables are children and parents at once, at the panel and event grains,
    with blanks, a unit missing from the panel and units in no order."""
    import polars as pl

    from auditors.dataset import Dataset
    from contracts.model import Edge
    from tests.test_estimators import T, _contract, _variable

    rng = np.random.default_rng(seed)
    U = 12
    ids = rng.permutation(np.arange(100, 100 + U))
    unit_id, day = np.repeat(np.sort(ids[:-1]), T), np.tile(np.arange(T), U - 1)
    blank = lambda v: pl.Series(v).scatter(np.flatnonzero(rng.random(len(v)) < 0.1), None)  # noqa: E731
    panel = pl.DataFrame(
        {"unit_id": unit_id, "day": day, "open": rng.random(len(day)) < 0.9}
        | {name: blank(rng.normal(5, 2, len(day))) for name in ("a", "b", "c")}
    )
    n = 3000
    events = pl.DataFrame(
        {"unit_id": rng.choice(ids, n), "day": rng.integers(0, T, n), "e": blank(rng.normal(1, 1, n))}
    )
    units = pl.DataFrame({"unit_id": ids, "cap": blank(rng.uniform(1, 9, U))})
    edge = lambda p, c, kind="monotone": Edge(  # noqa: E731
        parent=p, child=c, kind=kind, params={"transform": "linear"}, sign="+", note=""
    )
    edges = [edge("a", "b"), edge("b", "c"), edge("b", "e", "ratio"), edge("c", "e"), edge("a", "c", "ratio")]
    variables = [_variable(v) for v in ("a", "b", "c")] + [_variable("e", grain="event")]
    return Dataset(units, panel, events, "cap"), _contract(edges, variables)


@pytest.mark.parametrize("seed", range(4))
def test_rows_built_for_children_in_turn_are_rows_built_alone(seed):
    import polars as pl

    from auditors.dataset import Dataset
    from auditors.estimate import build_rows

    ds, contract = _dataset(seed)
    parents = {"b": ["a"], "c": ["a", "b"], "e": ["b", "c"]}
    order = list(np.random.default_rng(seed).permutation(["b", "c", "e", "c", "b"]))
    for child in order:  # one dataset, its tables shared between the children in whatever order they come
        got = build_rows(ds, contract, child, parents[child])
        alone = build_rows(Dataset(ds.units, ds.panel, ds.events, ds.capacity), contract, child, parents[child])
        for name in ("y", "day", "unit_index", "capacity"):
            assert np.array_equal(getattr(got, name), getattr(alone, name), equal_nan=True), (child, name)
        for p in parents[child]:
            assert np.array_equal(got.parents[p], alone.parents[p], equal_nan=True), (child, p)
            assert np.array_equal(got.panels[p], alone.panels[p], equal_nan=True), (child, p)
        if child != "e":  # a panel child's values and parents are its panel columns, in key order
            grid = ds.panel.sort("unit_id", "day")
            for name, values in [(child, got.y), *got.parents.items()]:
                assert np.array_equal(values, grid[name].cast(pl.Float64).to_numpy(), equal_nan=True), (child, name)
        got.y[:] = -1.0  # a child's values are its own: changing them changes no other child's rows or panels
    again = build_rows(ds, contract, "c", parents["c"])
    assert not np.any(again.y == -1.0) and not np.any(again.panels["b"] == -1.0)


@pytest.mark.parametrize("seed", range(3))
def test_a_curves_remembered_table_is_its_rows_own(seed):
    model = _model(seed, rounded=True)
    fresh = _model(seed, rounded=True)
    e = _edge(model, "saturation")
    saturation = ESTIMATORS["saturation"]
    cands = model.candidates(e)
    for n in (3000, 2000, 3000):  # other rows (another scan) or other candidates: computed anew, not reused
        rows, q, ry = _scan_inputs(model, seed + n, n, 2)
        for scales in (cands, cands[::2]):
            saturation.grouped_sums(model, e, scales, rows, q, ry)
            got = saturation.sums(model, e, scales, rows, q, ry)
            want = saturation.sums(fresh, e, scales, rows.copy(), q, ry)
            assert _same(got, want)


@pytest.mark.parametrize("seed", range(4))
def test_rows_finite_in_every_column_are_isfinites_all(seed):
    from auditors.estimate import finite_in_every_column

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 2000))
    block = rng.normal(size=(n, int(rng.integers(1, 20))))
    block[rng.random(block.shape) < 0.02] = np.nan
    block[rng.random(block.shape) < 0.02] = -np.inf
    for b in (block, np.asfortranarray(block), block[:, ::2], block[:, :1], block[:, :0], block[::3]):
        assert np.array_equal(finite_in_every_column(b), np.isfinite(b).all(axis=1))

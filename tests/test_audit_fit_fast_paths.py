"""The child fit's fast paths give what the plain computation gives, bit for bit, on varied inputs: the design
gathered into a column-major matrix and the stacked one (for lstsq and qr), the calendar made on the
timeline's days and row by row, a stack of panels rolled at once and one by one, and a rolling child's
candidates rolled as a stack and one at a time; and ids' positions found by offset and by binary search; a curve's
grouped sums declined before its curves are taken exactly when its table has too many rows; a panel read at
the rows' flat cells and at their (unit, day) pairs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from auditors import estimate
from auditors.estimate import ChildModel, _positions, calendar_columns, calendar_columns_plain, gathered, roll
from auditors.estimators import ESTIMATORS, GROUPED_SHARE, at_cells
from contracts.model import Calendar, DateEffect
from tests.test_audit_fast_paths import _random_child
from tests.test_estimators import T, _contract, _variable
from tests.test_scan_fast_paths import _edge, _model, _positions_as_floats, _scan_inputs


def _blocks(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    widths = [1, *rng.integers(1, 6, int(rng.integers(1, 5))), int(rng.integers(0, 18))]
    blocks = [np.ones((n, 1))] + [rng.normal(0, 10.0 ** rng.integers(-3, 4), (n, w)) for w in widths[1:]]
    blocks[1] = np.asfortranarray(blocks[1])  # blocks come in either memory order
    return blocks


@pytest.mark.parametrize("seed", range(8))
def test_the_gathered_design_is_the_stacked_one(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(40, 5000))
    blocks = _blocks(rng, n)
    rows = np.flatnonzero(rng.random(n) < rng.uniform(0.3, 1.0))
    y = rng.normal(size=n)[rows]
    plain = np.hstack([b[rows] for b in blocks])
    got = gathered(blocks, rows)
    assert got.flags.f_contiguous and np.array_equal(got, plain)
    # What LAPACK is given is the same numbers: the solutions and the bases are the same, bit for bit.
    assert np.array_equal(np.linalg.lstsq(got, y, rcond=None)[0], np.linalg.lstsq(plain, y, rcond=None)[0])
    q_got, r_got = np.linalg.qr(got)
    q_plain, r_plain = np.linalg.qr(plain)
    assert np.array_equal(q_got, q_plain) and np.array_equal(r_got, r_plain)
    assert q_got.strides == q_plain.strides  # the basis is laid out as before: the products read it alike


def test_a_gathered_design_of_no_rows_is_empty():
    blocks = _blocks(np.random.default_rng(0), 10)
    rows = np.zeros(0, dtype=np.int64)
    assert np.array_equal(gathered(blocks, rows), np.hstack(blocks)[rows])


def _calendar_contract(seed: int):
    rng = np.random.default_rng(seed)
    dates = [
        DateEffect(date=f"{m:02d}-{d:02d}", name=f"e{k}", factor=float(rng.uniform(0, 3)), days=int(rng.integers(1, 4)))
        for k, (m, d) in enumerate(zip(rng.integers(1, 13, 3), rng.integers(1, 29, 3), strict=True))
    ]
    contract = _contract([], [_variable("y")])
    return contract.model_copy(update={"calendar": Calendar(dates=dates if seed % 3 else [])})


@pytest.mark.parametrize("seed", range(9))
def test_the_calendar_made_on_days_is_the_calendar_made_on_rows(seed):
    contract = _calendar_contract(seed)
    rng = np.random.default_rng(seed)
    days = [
        rng.integers(0, T, int(rng.integers(1, 3000))),  # every weekday and month, in any order
        np.repeat(np.arange(T), 3),
        rng.choice(np.arange(0, T, 7), 50),  # one weekday only: no weekday column
        np.arange(30, 45),  # a fortnight in one month
        np.array([5]),
        np.zeros(0, dtype=np.int64),
        rng.integers(0, T, 100).astype(np.int32),
        np.array([-1, 0, 3, T - 1]),  # a day off the timeline: the plain way
    ]
    for day in days:
        got, want = calendar_columns(contract, day), calendar_columns_plain(contract, day)
        assert got.shape == want.shape and np.array_equal(got, want)
        # Column-major, as the design is gathered from it column by column (off the timeline: the plain way's).
        assert got.flags.f_contiguous if day.min(initial=0) >= 0 else got.strides == want.strides


def _roll_plain(values: np.ndarray, window: int, is_open: np.ndarray) -> np.ndarray:
    """The rolling mean of one (units, periods) array, as the auditor has always taken it."""
    values = np.where(is_open, values, np.nan)
    present = np.isfinite(values)
    total = np.cumsum(np.where(present, values, 0.0), axis=1)
    count = np.cumsum(present, axis=1)
    total[:, window:] -= total[:, :-window].copy()
    count[:, window:] -= count[:, :-window].copy()
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@pytest.mark.parametrize("window", [1, 3, 7, 28, 400])
@pytest.mark.parametrize("seed", range(3))
def test_a_stack_rolled_at_once_is_each_rolled_alone(seed, window):
    rng = np.random.default_rng(seed)
    U, periods = int(rng.integers(1, 20)), int(rng.integers(1, 300))
    stack = rng.normal(0, 10.0, (3, 2, U, periods))
    stack[rng.random(stack.shape) < 0.1] = np.nan
    stack[rng.random(stack.shape) < 0.01] = np.inf
    is_open = rng.random((U, periods)) < 0.8
    got = roll(stack, window, is_open)
    for k in np.ndindex(stack.shape[:2]):
        assert np.array_equal(got[k], _roll_plain(stack[k], window, is_open), equal_nan=True)
    assert np.array_equal(roll(stack[0, 0], window, is_open), _roll_plain(stack[0, 0], window, is_open), equal_nan=True)


@pytest.mark.parametrize("chunk", [1, 3, 16])
@pytest.mark.parametrize("seed", range(2))
def test_a_rolling_childs_candidates_rolled_as_a_stack_are_each_rolled_alone(seed, chunk, monkeypatch):
    monkeypatch.setattr(estimate, "ROLL_CHUNK", chunk)
    contract, rows = _random_child(seed, rolling=True)
    stacked = ChildModel(contract, "y", rows)
    plain = ChildModel(contract, "y", rows)
    for e in stacked.edges:
        if e.kind not in ("threshold", "saturation", "lag", "seasonal"):
            continue
        cands = stacked.candidates(e)
        plain.theta[e.parent] = stacked.theta[e.parent] = float(cands[len(cands) // 2])
        stacked.features(e)  # one candidate already computed: the others are rolled as a stack
        stacked._roll_candidates(e, cands)
        for cand in cands:
            got, want = stacked.features(e, cand), plain._compute_features(e, cand)
            assert got.shape == want.shape and got.flags.c_contiguous and want.flags.c_contiguous, (e.kind, cand)
            assert np.array_equal(got, want, equal_nan=True), (e.kind, cand)


def _searched(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Each id's position by a binary search (the integer way `_positions` takes for ids in a wide span)."""
    at = np.clip(np.searchsorted(sorted_ids, ids), 0, max(len(sorted_ids) - 1, 0))
    return np.where((sorted_ids[at] == ids) if len(sorted_ids) else False, at, -1)


@pytest.mark.parametrize("seed", range(10))
def test_positions_found_by_offset_are_those_found_by_search(seed):
    rng = np.random.default_rng(seed)
    base = int(rng.choice([0, -50, 10**6, 2**52]))
    known = np.sort(rng.choice(int(rng.integers(1, 400)), int(rng.integers(1, 60)), replace=True)) + base
    unique = np.unique(known)
    asked = rng.integers(base - 20, base + 420, int(rng.integers(0, 3000)))
    for sorted_ids in (unique, known, unique.astype(np.int32) if seed < 5 else unique):  # repeats: searched
        for ids in (asked, asked.astype(np.int32) if seed < 5 else asked, unique, np.zeros(0, dtype=np.int64)):
            got = _positions(sorted_ids, ids)
            assert got.dtype == np.intp and np.array_equal(got, _searched(sorted_ids, ids))
            assert np.array_equal(got, _positions_as_floats(sorted_ids, ids))


def test_positions_in_no_ids_and_of_unsigned_ids_are_those_found_by_search():
    ids = np.array([3, 5, 7], dtype=np.int64)
    assert np.array_equal(_positions(np.zeros(0, dtype=np.int64), ids), _searched(np.zeros(0, dtype=np.int64), ids))
    unsigned = np.array([1, 3, 9], dtype=np.uint64)
    assert np.array_equal(_positions(unsigned, ids), _searched(unsigned, ids))
    assert np.array_equal(_positions(ids, unsigned), _searched(ids, unsigned))


@pytest.mark.parametrize("rounded", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_a_curves_table_is_its_curves_of_its_distinct_values(seed, rounded):
    model = _model(seed, rounded=rounded)
    e = _edge(model, "saturation")
    saturation = ESTIMATORS["saturation"]
    rows, q, ry = _scan_inputs(model, seed, 3000, 2)
    cands = model.candidates(e)
    below = -np.maximum(model.x(e)[rows] - e.params["origin"], 0)
    values, at = np.unique(below, return_inverse=True)
    plain = -np.expm1(values[:, None] / cands[None, :])  # the table as the scan has always taken it
    table, rows_at = saturation.table(model, e, cands, rows)
    assert np.array_equal(table, plain) and np.array_equal(rows_at, at.reshape(-1))
    grouped = saturation.grouped_sums(model, e, cands, rows, q, ry)
    assert (grouped is None) == (len(plain) > GROUPED_SHARE * len(rows) or not np.isfinite(plain).all())


@pytest.mark.parametrize("seed", range(6))
def test_a_panel_read_at_flat_cells_is_read_at_unit_day_pairs(seed):
    rng = np.random.default_rng(seed)
    U, periods, n = int(rng.integers(1, 30)), int(rng.integers(1, 400)), int(rng.integers(0, 5000))
    panel = rng.normal(size=(U, periods))
    unit_index, day = rng.integers(0, U, n), rng.integers(0, periods, n)
    for values in (panel, np.asfortranarray(panel), panel[:, ::-1]):  # any memory order
        want = values[unit_index, day]
        assert np.array_equal(at_cells(values, unit_index, day, unit_index * periods + day), want)
        assert np.array_equal(at_cells(values, unit_index, day, None), want)


@pytest.mark.parametrize("rolling", [False, True])
@pytest.mark.parametrize("seed", range(2))
def test_a_lag_read_at_flat_cells_is_the_lag_read_at_unit_day_pairs(seed, rolling):
    contract, rows = _random_child(seed, rolling)
    periods = rows.panels["l"].shape[1]
    with_cells = dataclasses.replace(rows, cell=rows.unit_index * periods + rows.day)
    plain, flat = ChildModel(contract, "y", rows), ChildModel(contract, "y", with_cells)
    e = _edge(plain, "lag")
    for lag in plain.candidates(e):
        assert np.array_equal(flat.features(e, lag), plain.features(e, lag), equal_nan=True)
    got, want = flat.fit(), plain.fit()
    assert got.statistics == want.statistics and got.directions == want.directions

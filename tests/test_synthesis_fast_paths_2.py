"""The generator's fast paths of the fourth speed round against their plain computations, bit for bit:
Faker's weighted word picks from cumulative weights summed once; events' units and days repeated per cell
instead of divided out of the cell number; a rating's points below the top counted column by column; the
relocated fits' normal equations solved in one stacked call; the mean and sd of a float array without blanks
by numpy's plain mean and std; who signed up by each day looked up per day of the timeline; the packed sort's
row in the low bits; a panel gathered onto the events by flat cell."""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest
from faker import Faker

from personas import builtin_personas
from worldgen import skeleton
from worldgen.build import persona_for
from worldgen.contract import WorldSpec, build_contract
from worldgen.entities import _faker, _Pool, _seconds_of_day, place_events
from worldgen.estimation import _swapped_solutions, _swapped_solutions_plain
from worldgen.grid import Grid
from worldgen.observation import _points_below, nan_mean_sd
from worldgen.packs import get_pack
from worldgen.seeding import Streams
from worldgen.sorting import stable_order as _stable_order

# Every Faker method unit names use (`entities._unit_name`), and the plain word pickers under them.
NAME_METHODS = ("company", "city", "name", "city_suffix", "first_name", "last_name", "company_suffix")


@pytest.mark.parametrize("seed", [0, 1, 7, 2**31 - 1, 123_456_789])
def test_weighted_picks_give_stock_fakers_names(seed):
    fast, plain = _faker(), Faker("en_US")
    fast.seed_instance(seed)
    plain.seed_instance(seed)
    for k in range(300):
        method = NAME_METHODS[k % len(NAME_METHODS)]
        assert getattr(fast, method)() == getattr(plain, method)(), (seed, k, method)
    # Calls the fast path leaves to Faker (several picks, unique picks, no weighting, a plain sequence) go
    # on from the same state alike.
    weighted = OrderedDict([("a", 0.5), ("b", 0.2), ("c", 0.3)])
    for kwargs in ({"length": 5}, {"length": 2, "unique": True}, {"length": 1, "use_weighting": False}, {}):
        assert fast.random_elements(weighted, **kwargs) == plain.random_elements(weighted, **kwargs), kwargs
    assert fast.random_elements(("a", "b", "c"), length=1) == plain.random_elements(("a", "b", "c"), length=1)
    assert fast.random_element(weighted) == plain.random_element(weighted)
    assert fast.company() == plain.company()


def _draft(index: int):
    persona = persona_for(0, index, builtin_personas())
    pack, streams = get_pack(persona.domain), Streams(0, index)
    dag = skeleton.sample_skeleton(pack, streams.rng("skeleton"), persona.focus)
    return build_contract(WorldSpec(0, index, "small", persona), pack, dag, streams)


def _place_events_plain(counts, contract, grid, rng):
    """`entities.place_events` with each event's unit and day divided out of its cell number."""
    flat = counts.reshape(-1)
    cells = np.repeat(np.arange(flat.size, dtype=np.int64), flat)
    unit_idx, day = cells // grid.periods, cells % grid.periods
    time = day * 86400 + _seconds_of_day(contract, cells.size, rng)
    order = np.lexsort((np.arange(cells.size), time * grid.units + unit_idx))  # time, unit, then cell
    return unit_idx[order], day[order], time[order]


@pytest.mark.parametrize("index", [0, 3])
@pytest.mark.parametrize("units, periods, rate", [(1, 1, 3.0), (3, 7, 0.0), (5, 40, 2.5), (17, 365, 6.0)])
def test_event_units_and_days_repeated_per_cell_are_the_divided_ones(index, units, periods, rate):
    contract = _draft(index)
    counts = np.random.default_rng(units * periods).poisson(rate, (units, periods))
    fast = place_events(counts, contract, Grid(units, periods), np.random.default_rng(index))
    plain = _place_events_plain(counts, contract, Grid(units, periods), np.random.default_rng(index))
    for a, b in zip(fast, plain, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", range(20))
def test_points_below_counts_as_the_rows_by_points_comparison(seed):
    rng = np.random.default_rng(seed)
    n, points = int(rng.integers(0, 3000)), int(rng.integers(1, 11))
    cdf = np.cumsum(rng.random((n, points + 1)) ** 3, axis=1)
    u = rng.random(n) * cdf[:, -1]
    u[: n // 10] = cdf[: n // 10, int(rng.integers(points + 1))]  # draws on a boundary: not above it
    fast, plain = _points_below(u, np.ascontiguousarray(cdf.T)), (u[:, None] > cdf).sum(axis=1)
    assert fast.dtype == plain.dtype and fast.tobytes() == plain.tobytes()


def _normal_equations(rng: np.random.Generator, rows: int, p: int, m: int):
    X = rng.standard_normal((rows, p))
    X[:, 0] = 1.0
    F = (rng.standard_normal((rows, 1)) > rng.standard_normal(m)).astype(float)
    y = X @ rng.standard_normal(p) + rng.standard_normal(rows)
    return X.T @ X, X.T @ y, X.T @ F, np.einsum("ij,ij->j", F, F), F.T @ y


@pytest.mark.parametrize("seed", range(12))
def test_stacked_swapped_solutions_are_the_ones_solved_one_by_one(seed):
    rng = np.random.default_rng(seed)
    p, m = int(rng.integers(1, 25)), int(rng.integers(0, 40))
    A, b, XtF, FtF, Fty = _normal_equations(rng, 200, p, m)
    k = int(rng.integers(p))
    picked = np.sort(rng.choice(m, int(rng.integers(0, m + 1)), replace=False)) if m else np.arange(0)
    fast = _swapped_solutions(A, b, k, (XtF, FtF, Fty), picked)
    plain = _swapped_solutions_plain(A, b, k, (XtF, FtF, Fty), picked)
    assert len(fast) == len(plain)
    assert all(f.shape == q.shape == (p,) and f.tobytes() == q.tobytes() for f, q in zip(fast, plain, strict=True))


def test_a_singular_swap_is_left_out_as_one_by_one():
    rng = np.random.default_rng(5)
    A, b, XtF, FtF, Fty = _normal_equations(rng, 100, 4, 6)
    XtF[:, 2], FtF[2], Fty[2] = 0.0, 0.0, 0.0  # candidate 2's feature is all zeros: its equations are singular
    fast = _swapped_solutions(A, b, 1, (XtF, FtF, Fty), np.arange(6))
    plain = _swapped_solutions_plain(A, b, 1, (XtF, FtF, Fty), np.arange(6))
    assert len(fast) == len(plain) < 6
    assert all(f.tobytes() == q.tobytes() for f, q in zip(fast, plain, strict=True))


@pytest.mark.parametrize("seed", range(40))
def test_nan_mean_sd_is_numpys_nanmean_and_nanstd(seed):
    rng = np.random.default_rng(seed)
    shape = [(int(rng.integers(0, 300)),), (int(rng.integers(1, 60)), int(rng.integers(1, 400)))][seed % 2]
    values = rng.standard_normal(shape) * rng.uniform(0.01, 1e4) + rng.uniform(-1e5, 1e5)
    if seed % 4 == 3 and values.size:  # some blanks: the plain way
        values.reshape(-1)[rng.integers(values.size, size=3)] = np.nan
    if seed % 5 == 4:  # a strided view: the plain way
        values = values[..., ::2]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fast, plain = nan_mean_sd(values), (float(np.nanmean(values)), float(np.nanstd(values)))
    assert np.array(fast).tobytes() == np.array(plain).tobytes()


@pytest.mark.parametrize("seed", range(10))
def test_signed_up_by_day_is_the_searched_count(seed):
    rng = np.random.default_rng(seed)
    members = np.arange(int(rng.integers(1, 400)))
    signup = rng.integers(-200, 365, size=len(members))
    pool = _Pool(members, signup, rng.gamma(1.0, 1.0, len(members)))
    for days in (
        np.sort(rng.integers(0, 365, 5000)),
        rng.integers(0, 700, 300),  # beyond the table so far: it grows
        rng.integers(-50, 365, 300),  # before the timeline: searched
        np.array([], dtype=np.int64),
        rng.integers(0, 365, 100).astype(float),
    ):
        fast, plain = pool.signed_up_by(days), np.searchsorted(pool.signup, days, side="right")
        assert fast.dtype == plain.dtype and fast.tobytes() == plain.tobytes()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 255, 256, 257, 5000])
def test_rows_packed_in_the_low_bits_sort_as_a_stable_argsort(n):
    """Keys up to the largest that leaves room for the row's bits are packed (the top one among them),
    larger ones take the stable argsort; either way the order is lexsort's."""
    rng = np.random.default_rng(n)
    largest = (1 << (63 - int(n).bit_length())) - 1
    for top in (10, largest, largest + 1, 2**63 - 1):
        key = rng.integers(0, top, n, endpoint=True)
        key[rng.integers(n)] = top
        key[: n // 3] = key[n // 3 : 2 * (n // 3)]  # ties
        assert np.array_equal(_stable_order(key, n), np.lexsort((np.arange(n), key))), top


@pytest.mark.parametrize("seed", range(6))
def test_panel_values_gathered_by_event_cell_are_the_two_index_ones(seed):
    rng = np.random.default_rng(seed)
    U, T, n = int(rng.integers(1, 30)), int(rng.integers(1, 400)), int(rng.integers(0, 5000))
    grid = Grid(U, T)
    unit, day = rng.integers(0, U, n), rng.integers(0, T, n)
    grid.set_events(unit, day)
    for values in (rng.standard_normal((U, T)), rng.integers(0, 9, (U, T)), grid.time("panel")):
        fast, plain = grid.align(values, "panel", "event"), values[unit, day]
        assert fast.dtype == plain.dtype and fast.tobytes() == plain.tobytes()

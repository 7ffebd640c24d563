"""Differential tests (round 2): the cleaning's newer fast paths (auditors/dataset.py) against the plain polars
operations they stand for, on random and adversarial inputs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors import dataset
from auditors.dataset import (
    ADJACENT_GAP_DAYS,
    PositiveRows,
    _adjacent_steps,
    _adjacent_switch,
    _adjacent_switch_plain,
    _consensus_on_grid,
    _consensus_plain,
    _every_unit_switches,
    _renamed,
    _selected,
    _unit_levels_around,
    _unit_levels_plain,
    _window_step,
    repair_unit_drift,
)
from tests.test_cleaning_fast_paths import SWITCHES, _daily_panel


def _outcome(fn):
    """What a call gives: its frame, or its error's type and message (an audit reason quotes both)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is the outcome compared
        return (type(exc).__name__, str(exc))


def _same(got, want) -> bool:
    if isinstance(want, tuple) or isinstance(got, tuple):
        return got == want
    return got.schema == want.schema and got.equals(want, null_equal=True)


FRAME = pl.DataFrame(
    {"a": [1, None, 3], "b": ["x", "y", None], "c": [0.5, float("nan"), None], "d": [True, False, None]},
    schema={"a": pl.Int64, "b": pl.String, "c": pl.Float64, "d": pl.Boolean},
)


@pytest.mark.parametrize(
    "names",
    [["a", "b", "c", "d"], ["d", "a"], [], ["c"], ["a", "a"], ["a", "zz"], ["zz"], ["b", "c", "b"]],
)
@pytest.mark.parametrize("rows", [3, 0])
def test_selected_is_select(names, rows):
    """The columns in the order asked, the frame's rows (none, too), and select's own error for a name twice
    or one the frame lacks."""
    frame = FRAME.head(rows)
    assert _same(_outcome(lambda: _selected(frame, names)), _outcome(lambda: frame.select(names)))


@pytest.mark.parametrize(
    "mapping",
    [
        {"a": "unit_id", "b": "name"},
        {},
        {"a": "b"},  # onto a column that stays: a clash
        {"a": "x", "b": "x"},  # two onto one name
        {"a": "b", "b": "a"},  # a swap
        {"zz": "y"},  # a column the frame lacks
        {"a": "a"},
    ],
)
def test_renamed_is_rename(mapping):
    got = _outcome(lambda: _renamed(FRAME, mapping))
    assert _same(got, _outcome(lambda: FRAME.rename(mapping)))
    if not isinstance(got, tuple):
        assert FRAME.columns == ["a", "b", "c", "d"]  # the caller's frame keeps its names


@pytest.mark.parametrize("seed", range(5))
def test_selected_and_renamed_on_random_frames(seed):
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 8))
    frame = pl.DataFrame({f"c{i}": rng.normal(size=50) for i in range(width)})
    names = [f"c{i}" for i in rng.permutation(width)[: int(rng.integers(0, width + 1))]]
    assert _same(_selected(frame, names), frame.select(names))
    mapping = {name: f"n{int(rng.integers(0, 3 * width))}" for name in names}
    assert _same(_outcome(lambda: _renamed(frame, mapping)), _outcome(lambda: frame.rename(mapping)))


# --- a repair's tests of one column share its positive rows (PositiveRows) ----------------------------------


def _pairs(levels) -> list[tuple[float, float]]:
    """A unit's (before, after) levels, in a fixed order (the units' order is no matter), bits as they are."""
    return sorted(zip(levels[0].tolist(), levels[1].tolist(), strict=True))


@pytest.mark.parametrize("order", ["shuffled", "unit_day", "day_unit"])
@pytest.mark.parametrize("switch", [0, 2, 4, 5])
@pytest.mark.parametrize("seed", range(2))
def test_shared_positive_rows_give_the_plain_levels(seed, switch, order):
    """One PositiveRows serves every day and window of a column: each unit's medians are polars' to the bit,
    whatever the rows' order (already by unit and day, by day and unit, or shuffled)."""
    rng = np.random.default_rng(seed)
    frame = _daily_panel(rng, {**SWITCHES[switch], "round": bool(seed), "closed": 0.2})
    frame = {"unit_day": frame.sort("unit_id", "day"), "day_unit": frame.sort("day", "unit_id")}.get(order, frame)
    rows = PositiveRows(frame, "x")
    factors = (100.0,) if SWITCHES[switch]["factor"] in (100.0, 0.01) else (2.20462, 1000.0, 60.0)
    assert _adjacent_switch(frame, "x", factors, rows) == _adjacent_switch_plain(frame, "x", factors)
    for day in [-3, 0, 15, SWITCHES[switch]["day"], SWITCHES[switch]["days"] - 1, 10**5]:
        for window, logged in [(4, True), (14, False), (21, True), (28, False)]:
            got = _unit_levels_around(frame, "x", day, window, logged, rows=rows)
            assert _pairs(got) == _pairs(_unit_levels_plain(frame, "x", day, window, logged))
        assert _window_step(frame, "x", day, 7, rows) == _plainly(_window_step, frame, "x", day, 7)
        assert _every_unit_switches(frame, "x", day, 100.0, rows) == _plainly(
            _every_unit_switches, frame, "x", day, 100.0
        )


def _plainly(fn, *args):
    """`fn` with its levels taken by polars alone (`_unit_levels_plain`): the fast path declined everywhere."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dataset, "_unit_levels_around", lambda *a, **k: None)
        return fn(*args)


def test_positive_rows_of_another_frame_are_not_used():
    rng = np.random.default_rng(4)
    frame = _daily_panel(rng, {**SWITCHES[0], "round": False, "closed": 0.0})
    other = PositiveRows(frame.with_columns(pl.col("x") * 7.0), "x")
    want = _unit_levels_plain(frame, "x", 60, 14, True)
    assert _pairs(_unit_levels_around(frame, "x", 60, 14, True, rows=other)) == _pairs(want)


def test_wide_codes_and_days_take_the_general_sorts():
    """More than 2**15 units (the 16-bit side keys would wrap) and days spanning more than 2**16 (the 16-bit
    day keys would): the general sorts, the same levels and steps."""
    units = np.arange(40_000) * 3 + 11
    frame = pl.DataFrame(
        {
            "unit_id": np.repeat(units, 2),
            "day": np.tile([4, 5], len(units)) + np.repeat((np.arange(len(units)) % 3) * 40_000, 2),
            "x": np.exp(np.random.default_rng(0).normal(size=2 * len(units))),
        }
    )
    for day in (5, 40_005, 80_005):
        got = _unit_levels_around(frame, "x", day, 1, True)
        assert _pairs(got) == _pairs(_unit_levels_plain(frame, "x", day, 1, True))
    assert _adjacent_switch(frame, "x", (100.0,)) == _adjacent_switch_plain(frame, "x", (100.0,))


@pytest.mark.parametrize("closed", [0.0, 0.3])
@pytest.mark.parametrize("switch", range(len(SWITCHES)))
@pytest.mark.parametrize("seed", range(2))
def test_repair_on_arrays_is_the_repair_in_polars(seed, switch, closed):
    """A whole repair with Int64 keys (its tests on shared arrays) gives what it gives with Int32 unit codes
    (every test in polars), daily panel or not."""
    rng = np.random.default_rng(seed)
    frame = _daily_panel(rng, {**SWITCHES[switch], "round": bool(seed), "closed": closed})
    for daily in (True, False, None):
        fast = repair_unit_drift(frame, "x", "usd", daily)
        plain = repair_unit_drift(frame.with_columns(pl.col("unit_id").cast(pl.Int32)), "x", "usd", daily)
        assert fast.equals(plain.with_columns(pl.col("unit_id").cast(pl.Int64)))


def _plain_steps(frame: pl.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """`_adjacent_switch_plain`'s steps in polars, ordered by day and step."""
    steps = (
        frame.filter(pl.col(column) > 0)
        .sort("unit_id", "day")
        .select(
            "day",
            pl.col(column).cast(pl.Float64).log().diff().over("unit_id").alias("step"),
            (pl.col("day") - pl.col("day").shift(1).over("unit_id")).alias("gap"),
        )
        .filter(pl.col("step").is_not_null() & (pl.col("gap") <= ADJACENT_GAP_DAYS))
        .sort("day", "step")
    )
    return steps["day"].to_numpy(), steps["step"].to_numpy()


@pytest.mark.parametrize("spread", [1, 40_000])
@pytest.mark.parametrize("order", ["shuffled", "unit_day"])
@pytest.mark.parametrize("seed", range(3))
def test_adjacent_steps_are_the_plain_steps_in_order(seed, order, spread):
    """Each step and its day, bit for bit, ordered by day and then step (ties from rounded values), the days
    in a short span (16-bit keys) or spread over more than 2**16."""
    rng = np.random.default_rng(seed)
    frame = _daily_panel(rng, {**SWITCHES[seed], "round": True, "closed": 0.2})
    frame = frame.with_columns(pl.col("day") + (pl.col("unit_id") % 3) * spread)
    frame = frame.sort("unit_id", "day") if order == "unit_day" else frame
    day, step = _adjacent_steps(frame, "x", PositiveRows(frame, "x"))
    want_day, want_step = _plain_steps(frame, "x")
    assert np.array_equal(day, want_day)
    assert np.array_equal(step.view(np.int64), want_step.view(np.int64))


# --- a shared series' consensus on the grid's arrays (_consensus_on_grid) -----------------------------------


def _grid_panel(rng: np.random.Generator, units: np.ndarray, periods: int) -> pl.DataFrame:
    """A unit x day grid with `open` (0, 1, now and then 2 or blank) and two shared series with blanks, ties
    (rounded values) and negative values."""
    n = len(units) * periods
    level = np.tile(rng.normal(10, 5, periods), len(units))
    rate = np.where(rng.random(n) < 0.3, np.round(level, 0), level + rng.normal(0, 1, n)) + 0.0  # no -0.0
    open_ = np.where(rng.random(n) < 0.1, 2, (rng.random(n) < 0.8).astype(np.int64))
    return pl.DataFrame(
        {
            "unit_id": np.repeat(units, periods),
            "day": np.tile(np.arange(periods), len(units)),
            "open": pl.Series(open_.astype(np.int8)).scatter([1], None),
            "rate": np.where(rng.random(n) < 0.2, np.nan, rate),
            "index": np.where(rng.random(n) < 0.5, np.nan, np.round(rate * 3, 1) - 20) + 0.0,
        },
        schema_overrides={"open": pl.Int8},
    ).with_columns(pl.col("rate", "index").fill_nan(None))


def _master(rng: np.random.Generator, units: np.ndarray, regions: list) -> pl.DataFrame:
    """The units' master rows, some units missing, one twice (another region: the first row counts), a row
    without a code, a unit without a region."""
    listed = [int(u) for u in units if rng.random() < 0.9]
    codes = listed + [listed[0], None]
    region = [regions[int(rng.integers(len(regions)))] for _ in codes]
    region[1] = None
    return pl.DataFrame({"unit_id": codes, "region": region}, schema={"unit_id": pl.Int64, "region": None})


def _consensus_outcomes(panel: pl.DataFrame, master: pl.DataFrame, shared: list) -> tuple:
    on_grid = _outcome(lambda: _consensus_on_grid(panel, master, shared))
    return on_grid, _outcome(lambda: _consensus_plain(panel, master, shared))


@pytest.mark.parametrize("regions", [["north", "south", "east"], [3, 7], ["one"]])
@pytest.mark.parametrize("seed", range(4))
def test_consensus_on_grid_is_the_polars_window(seed, regions):
    rng = np.random.default_rng(seed)
    units = np.sort(rng.choice(np.arange(1, 500), int(rng.integers(1, 40)), replace=False))
    panel = _grid_panel(rng, units, int(rng.integers(1, 60)))
    master = _master(rng, units, regions)
    shared = [("rate", False), ("index", True)]
    on_grid, plain = _consensus_outcomes(panel, master, shared)
    assert on_grid is not None and _same(on_grid, plain)
    for name, _ in shared:  # to the bit
        assert np.array_equal(on_grid[name].to_numpy().view(np.int64), plain[name].to_numpy().view(np.int64))


@pytest.mark.parametrize(
    "change",
    [
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(float("nan"))), m),  # a NaN: polars orders it
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(-0.0)), m),  # a -0.0 beside 0.0s
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(0.0)), m),  # zeros alone are fine
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(float("inf"))), m),  # infinities: (inf + -inf) / 2
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(float("-inf"))), m),
        lambda p, m: (p.with_columns(pl.col("rate").fill_null(float("inf")).fill_nan(None)), m),
        lambda p, m: (  # both signs on the same days: a median between them is NaN to numpy
            p.with_columns(
                pl.when(pl.col("unit_id") % 2 == 0).then(float("inf")).otherwise(float("-inf")).alias("rate")
            ),
            m,
        ),
        lambda p, m: (p.sample(fraction=1.0, shuffle=True, seed=1), m),  # not the grid's order
        lambda p, m: (p.with_columns(pl.col("rate").cast(pl.Float32)), m),
        lambda p, m: (p.with_columns(pl.col("rate").round(0).cast(pl.Int64)), m),  # polars' integer median
        lambda p, m: (p.with_columns(pl.col("open").cast(pl.String)), m),
        lambda p, m: (p.drop("open"), m),
        lambda p, m: (p.with_columns(pl.lit("r").alias("region")), m),  # the join would suffix
        lambda p, m: (p, m.with_columns(pl.col("unit_id").cast(pl.Int32))),
        lambda p, m: (p, m.with_columns(pl.col("region").cast(pl.Categorical))),
        lambda p, m: (p, m.with_columns(pl.lit(None, dtype=pl.String).alias("region"))),  # no unit has one
        lambda p, m: (p, m.clear()),
        lambda p, m: (p.with_columns(pl.lit(None, dtype=pl.Float64).alias("rate")), m),  # nothing reported
    ],
)
def test_consensus_on_grid_edge_cases_agree(change):
    rng = np.random.default_rng(9)
    units = np.arange(5, 25)
    panel, master = change(_grid_panel(rng, units, 30), _master(rng, units, ["a", "b"]))
    on_grid, plain = _consensus_outcomes(panel, master, [("rate", False), ("index", True)])
    assert on_grid is None or _same(on_grid, plain)

"""Differential tests: the cleaning's fast paths (auditors/dataset.py) against the plain polars operations they
stand for, on random and adversarial inputs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.dataset import (
    MIN_UNITS_FOR_STEP,
    UNIT_STEP_SHARE,
    UNIT_WINDOW_DAYS,
    UNITS_SWITCHING,
    _adjacent_steps,
    _adjacent_switch,
    _adjacent_switch_plain,
    _around,
    _dated_rows,
    _every_unit_switches,
    _median_of,
    _sorted_medians,
    _unit_levels_around,
    _window_step,
    _with_detail,
    _with_event_means,
    is_daily_panel,
    join_on_grid,
    open_grid,
)


def _text_ids(rng: np.random.Generator, n: int) -> list[str]:
    return [f"{x:016x}-{y:04x}" for x, y in zip(rng.integers(0, 2**62, n), rng.integers(0, 2**16, n), strict=True)]


def _events_and_detail(rng: np.random.Generator, n_events: int, n_detail: int, dtype) -> tuple:
    """Events with distinct ids (one null among them) and a detail file naming some of them, some unknown ids
    and a null, in its own order; ids as text or as 64-bit integers."""
    pool = _text_ids(rng, n_events + n_detail) if dtype == pl.String else rng.choice(10**6, n_events + n_detail, False)
    pool = list(pool)
    event_ids = pool[:n_events]
    event_ids[int(rng.integers(n_events))] = None
    events = pl.DataFrame(
        {"event_id": event_ids, "day": rng.integers(0, 90, n_events), "amount": rng.normal(size=n_events)},
        schema={"event_id": dtype, "day": pl.Int64, "amount": pl.Float64},
    )
    known = rng.choice(n_events, min(n_detail, n_events), replace=False).tolist()
    detail_ids = [pool[i] for i in known] + pool[n_events : n_events + n_detail - len(known)]
    detail_ids = [detail_ids[i] for i in rng.permutation(len(detail_ids))]
    if detail_ids:
        detail_ids[0] = None
    detail = pl.DataFrame(
        {"event_id": detail_ids, "score": rng.normal(size=len(detail_ids))},
        schema={"event_id": dtype, "score": pl.Float64},
    )
    return events, detail


SIZES = [(50, 50), (300, 40), (40, 300), (2000, 1500), (1500, 2000), (1, 1), (30, 0)]


@pytest.mark.parametrize("null_event", [True, False])
@pytest.mark.parametrize("dtype", [pl.String, pl.Int64])
@pytest.mark.parametrize(("n_events", "n_detail"), SIZES)
@pytest.mark.parametrize("seed", range(3))
def test_dated_rows_is_the_join_and_names_each_rows_event(seed, n_events, n_detail, dtype, null_event):
    """The dated detail is the join keeping the detail's order, whether read by position (integer ids) or
    joined (text ids, a null id), and each row's event row holds the same id; the detail then joined back by
    those rows is the left join."""
    rng = np.random.default_rng(seed)
    events, detail = _events_and_detail(rng, n_events, n_detail, dtype)
    if not null_event:
        events = events.drop_nulls("event_id")
    dated, event_rows = _dated_rows(detail, events)
    assert dated.equals(detail.join(events.select("event_id", "day"), on="event_id", maintain_order="left"))
    assert event_rows is not None
    assert dated["event_id"].equals(events["event_id"].gather(event_rows))
    repaired = dated.drop("day").with_columns(pl.col("score") * 2)
    expected = events.join(repaired, on="event_id", how="left", maintain_order="left")
    assert _with_detail(events, repaired, event_rows).equals(expected)


def test_with_detail_joins_where_an_event_is_named_twice():
    """A detail id twice (a detail file not de-duplicated): its event is named twice, and the join repeats it."""
    events = pl.DataFrame({"event_id": ["a", "b", "c"], "day": [1, 2, 3]})
    detail = pl.DataFrame({"event_id": ["b", "a", "b"], "score": [1.0, 2.0, 3.0]})
    dated, event_rows = _dated_rows(detail, events)
    assert sorted(event_rows.tolist()) == [0, 1, 1]
    got = _with_detail(events, dated.drop("day"), event_rows)
    assert got.height == 4
    assert got.equals(events.join(dated.drop("day"), on="event_id", how="left"))


def test_dated_rows_keeps_a_clashing_column_as_the_join_does():
    rng = np.random.default_rng(3)
    events, detail = _events_and_detail(rng, 100, 80, pl.String)
    clashing = detail.with_columns(pl.lit(1).alias("__event_row"))
    dated, event_rows = _dated_rows(clashing, events)
    assert event_rows is None
    assert dated.equals(clashing.join(events.select("event_id", "day"), on="event_id", maintain_order="left"))
    with_day = detail.with_columns(pl.lit(5, dtype=pl.Int64).alias("day"))
    expected = with_day.join(events.select("event_id", "day"), on="event_id", maintain_order="left")
    assert _dated_rows(with_day, events)[0].equals(expected)


def _plain_is_daily_panel(frame: pl.DataFrame) -> bool:
    return "unit_id" in frame.columns and frame.select("unit_id", "day").is_duplicated().mean() < 0.05


@pytest.mark.parametrize("pairs", [0, 10, 24, 25, 26, 400])
@pytest.mark.parametrize("seed", range(3))
def test_is_daily_panel_counts_repeated_unit_days_as_is_duplicated(seed, pairs):
    """At the 5% threshold (24, 25, 26 unit-days twice in 1,000 rows: 48, 50, 52 repeated rows), with sparse
    unit codes, in random order."""
    rng = np.random.default_rng(seed)
    units = rng.choice(np.arange(1000, 9000), 8, replace=False)
    cells = pl.DataFrame(
        {"unit_id": np.repeat(units, 130), "day": np.tile(np.arange(5, 135), 8)},
        schema={"unit_id": pl.Int64, "day": pl.Int64},
    ).sample(1000 - pairs, seed=seed, shuffle=True)
    frame = pl.concat([cells, cells.sample(pairs, seed=seed + 1)]).sample(fraction=1.0, shuffle=True, seed=seed)
    assert frame.height == 1000
    assert is_daily_panel(frame) == _plain_is_daily_panel(frame) == (2 * pairs < 50)
    spread = frame.with_columns(pl.col("unit_id") * 2**40)  # codes spanning too much: the plain count
    assert is_daily_panel(spread) == _plain_is_daily_panel(spread)


@pytest.mark.parametrize(
    "frame",
    [
        pl.DataFrame({"unit_id": [1, 1, None], "day": [2, 2, 3]}, schema={"unit_id": pl.Int64, "day": pl.Int64}),
        pl.DataFrame({"unit_id": [1, 1, 2], "day": [2, None, None]}, schema={"unit_id": pl.Int64, "day": pl.Int64}),
        pl.DataFrame({"unit_id": ["a", "a"], "day": [1, 1]}, schema={"unit_id": pl.String, "day": pl.Int64}),
        pl.DataFrame({"unit_id": [-(2**62), 2**62, 5], "day": [0, 0, 0]}),
        pl.DataFrame({"unit_id": [3] * 19 + [4], "day": list(range(20))}),
        pl.DataFrame({"unit_id": [3] * 20, "day": [0] * 20}),
        pl.DataFrame({"day": [1, 1]}),
    ],
)
def test_is_daily_panel_edge_cases(frame):
    assert is_daily_panel(frame) == _plain_is_daily_panel(frame)


def _daily_panel(rng: np.random.Generator, switch: dict) -> pl.DataFrame:
    """A daily report of units' levels (log-normal noise around a seasonal level), with a unit switch (every
    unit, some of them, a small or large factor, up or down) on a day, days closed now and then, zeros, a
    rounded column (ties in the steps)."""
    units = rng.choice(np.arange(100, 5000), switch["units"], replace=False)
    days = np.arange(switch["days"])
    unit, day = np.repeat(units, len(days)), np.tile(days, len(units))
    level = np.exp(rng.normal(3, 1, len(units)))[np.searchsorted(np.sort(units), unit)]
    value = level * (1 + 0.3 * np.sin(day / 40)) * np.exp(rng.normal(0, switch["noise"], len(day)))
    moved = (day >= switch["day"]) & (rng.random(len(day)) < switch["share"] if switch["share"] < 1 else True)
    value = np.where(moved, value * switch["factor"], value)
    value = np.where(rng.random(len(day)) < switch["zeros"], 0.0, value)
    if switch["round"]:
        value = np.round(value, 1)
    open_ = rng.random(len(day)) > switch["closed"]
    return pl.DataFrame(
        {"unit_id": unit[open_], "day": day[open_], "x": value[open_]},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "x": pl.Float64},
    ).sample(fraction=1.0, shuffle=True, seed=int(rng.integers(1000)))


SWITCHES = [
    {"units": 30, "days": 120, "day": 60, "factor": 100.0, "share": 1, "noise": 0.1, "zeros": 0.0},
    {"units": 30, "days": 120, "day": 60, "factor": 1 / 100.0, "share": 1, "noise": 0.3, "zeros": 0.1},
    {"units": 12, "days": 90, "day": 40, "factor": 2.20462, "share": 1, "noise": 0.05, "zeros": 0.0},
    {"units": 12, "days": 90, "day": 40, "factor": 2.20462, "share": 1, "noise": 0.6, "zeros": 0.0},
    {"units": 25, "days": 100, "day": 50, "factor": 1000.0, "share": 0.5, "noise": 0.2, "zeros": 0.0},
    {"units": 25, "days": 100, "day": 9, "factor": 60.0, "share": 1, "noise": 0.2, "zeros": 0.3},
    {"units": 6, "days": 60, "day": 30, "factor": 100.0, "share": 1, "noise": 0.1, "zeros": 0.0},
    {"units": 20, "days": 80, "day": 200, "factor": 1.0, "share": 1, "noise": 0.4, "zeros": 0.0},
]


@pytest.mark.parametrize("closed", [0.0, 0.3])
@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("switch", range(len(SWITCHES)))
@pytest.mark.parametrize("seed", range(3))
def test_adjacent_switch_on_arrays_is_the_plain_path(seed, switch, rounded, closed):
    """The same day and factor (or none) as the polars path, on panels with and without switches."""
    rng = np.random.default_rng(seed)
    frame = _daily_panel(rng, {**SWITCHES[switch], "round": rounded, "closed": closed})
    factors = (100.0,) if SWITCHES[switch]["factor"] in (100.0, 0.01) else (2.20462, 1000.0, 60.0)
    assert _adjacent_steps(frame, "x") is not None
    assert _adjacent_switch(frame, "x", factors) == _adjacent_switch_plain(frame, "x", factors)


def test_adjacent_switch_finds_switches_in_these_panels():
    """The panels above do hold switches the search finds (so the comparison covers its whole sequence)."""
    found = 0
    for seed in range(3):
        frame = _daily_panel(np.random.default_rng(seed), {**SWITCHES[0], "round": False, "closed": 0.0})
        found += _adjacent_switch(frame, "x", (100.0,)) == (60, 100.0)
    assert found == 3


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f.with_columns(pl.col("x").cast(pl.Int64)),  # integer values: the same logs
        lambda f: pl.concat([f, f.head(3)]),  # a unit-day twice: polars' sort decides their order
        lambda f: f.with_columns(f["unit_id"].scatter([0, 5], None)),  # null units
        lambda f: f.with_columns(f["day"].scatter([1], None)),  # a null day
        lambda f: f.with_columns(f["x"].scatter([2, 7], None)),  # blank values
        lambda f: f.with_columns(f["x"].scatter([2], float("nan"))),  # NaN is above 0 in polars
        lambda f: f.with_columns(f["x"].scatter([4], float("inf"))),  # an infinite log
        lambda f: f.with_columns(pl.col("unit_id").cast(pl.Int32)),
        lambda f: f.with_columns(pl.col("day") + 2**45),  # days beyond any calendar
        lambda f: f.filter(pl.col("day") < 0),  # nothing reported
    ],
)
def test_adjacent_switch_edge_cases_agree(change):
    frame = change(_daily_panel(np.random.default_rng(1), {**SWITCHES[0], "round": False, "closed": 0.1}))
    assert _adjacent_switch(frame, "x", (100.0,)) == _adjacent_switch_plain(frame, "x", (100.0,))


@pytest.mark.parametrize("seed", range(20))
def test_sorted_medians_are_polars_medians(seed):
    """To the last bit, on runs of odd and even sizes, values with ties, mixed signs and magnitudes."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, 30)
    group = np.repeat(np.arange(len(sizes)), sizes)
    values = rng.normal(size=len(group)) * 10.0 ** rng.integers(-6, 6, len(group))
    values = np.where(rng.random(len(group)) < 0.2, np.round(values, 1), values) + 0.0  # -0.0 to 0.0 (no step is -0.0)
    order = np.lexsort((values, group))
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    got = _sorted_medians(values[order], starts, sizes)
    expected = pl.DataFrame({"g": group, "v": values}).group_by("g").agg(pl.col("v").median()).sort("g")["v"].to_numpy()
    assert np.array_equal(got.view(np.int64), expected.view(np.int64))
    assert _median_of(values) == pl.Series(values).median()


def _plain_window_step(frame: pl.DataFrame, column: str, day: int, window: int) -> tuple[float, float] | None:
    """auditors.dataset._window_step as it was, in polars."""
    near = _around(frame, day, window) & (pl.col(column) > 0)
    logged = pl.col(column).cast(pl.Float64).log()
    per_unit = (
        frame.filter(near)
        .group_by("unit_id")
        .agg(
            logged.filter(pl.col("day") >= day).median().alias("after"),
            logged.filter(pl.col("day") < day).median().alias("before"),
        )
        .drop_nulls()
    )
    steps = per_unit["after"].to_numpy() - per_unit["before"].to_numpy()
    if len(steps) < MIN_UNITS_FOR_STEP:
        return None
    median = float(np.median(steps))
    return median, 1.25 * 1.4826 * float(np.median(np.abs(steps - median))) / np.sqrt(len(steps))


def _plain_every_unit_switches(frame: pl.DataFrame, column: str, from_day: int, factor: float) -> bool:
    """auditors.dataset._every_unit_switches as it was, in polars."""
    window = frame.filter(_around(frame, from_day, UNIT_WINDOW_DAYS) & (pl.col(column) > 0))
    per_unit = (
        window.group_by("unit_id")
        .agg(
            pl.col(column).filter(pl.col("day") < from_day).median().alias("before"),
            pl.col(column).filter(pl.col("day") >= from_day).median().alias("after"),
        )
        .drop_nulls()
    )
    if per_unit.height == 0:
        return False
    ratio = np.log(per_unit["after"].to_numpy() / per_unit["before"].to_numpy())
    step = np.log(factor)
    moved = (np.sign(ratio) == np.sign(step)) & (np.abs(ratio) > UNIT_STEP_SHARE * abs(step))
    return float(np.mean(moved)) >= UNITS_SWITCHING


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize("switch", range(len(SWITCHES)))
@pytest.mark.parametrize("seed", range(2))
def test_window_step_and_every_unit_on_arrays_are_the_plain_path(seed, switch, rounded):
    """Bit for bit, at days across the year (the edges, a closure, the switch's day) and every window."""
    rng = np.random.default_rng(seed)
    frame = _daily_panel(rng, {**SWITCHES[switch], "round": rounded, "closed": 0.2})
    frame = frame.filter((pl.col("day") < 20) | (pl.col("day") > 30))  # a closure: windows reach across it
    factor = SWITCHES[switch]["factor"]
    for day in [-5, 0, 3, 20, 25, 31, SWITCHES[switch]["day"], SWITCHES[switch]["days"] - 2, 10**6]:
        assert _unit_levels_around(frame, "x", day, 7, logged=True) is not None
        for window in (2, 4, 7, 14, 21, 28):
            assert _window_step(frame, "x", day, window) == _plain_window_step(frame, "x", day, window)
        for f in (factor, 1 / 100.0, 2.20462):
            assert _every_unit_switches(frame, "x", day, f) == _plain_every_unit_switches(frame, "x", day, f)


def test_unit_levels_pair_each_units_sides():
    """Units with values on one side only are left out; each unit's before and after medians stay paired."""
    frame = pl.DataFrame(
        {
            "unit_id": [5, 5, 5, 5, 9, 9, 2, 2, 2, 7],
            "day": [1, 2, 3, 4, 1, 2, 3, 4, 5, 4],
            "x": [1.0, 3.0, 10.0, 30.0, 2.0, 4.0, 50.0, 70.0, 0.0, 8.0],
        }
    )
    before, after = _unit_levels_around(frame, "x", 3, 10, logged=False)
    assert sorted(zip(before.tolist(), after.tolist(), strict=True)) == [(1.0 + 1.0, 20.0)]


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f.with_columns(pl.col("x").cast(pl.Int64)),  # integer values: polars' own integer median
        lambda f: f.with_columns(f["unit_id"].scatter([0, 5], None)),  # null units: a group of their own
        lambda f: f.with_columns(f["day"].scatter([1], None)),  # a null day
        lambda f: f.with_columns(f["x"].scatter([2, 7], None)),  # blank values
        lambda f: f.with_columns(f["x"].scatter([2], float("nan"))),  # NaN is above 0 in polars
        lambda f: f.with_columns(f["x"].scatter([4], float("inf"))),
        lambda f: f.with_columns(pl.col("unit_id").cast(pl.Int32)),
        lambda f: f.filter(pl.col("day") < 0),  # nothing reported
        lambda f: f.with_columns(pl.col("x") * -1),  # no positive value
    ],
)
def test_window_step_and_every_unit_edge_cases_agree(change):
    frame = change(_daily_panel(np.random.default_rng(2), {**SWITCHES[0], "round": False, "closed": 0.1}))
    for day in (10, 60, 100):
        for window in (4, 14):
            assert _window_step(frame, "x", day, window) == _plain_window_step(frame, "x", day, window)
        assert _every_unit_switches(frame, "x", day, 100.0) == _plain_every_unit_switches(frame, "x", day, 100.0)


@pytest.mark.parametrize("seed", range(4))
def test_cells_found_once_give_the_same_panel(seed):
    """open_grid's cells of each frame, handed to the join and the event means, give what finding them again
    gives; cells of another grid (other units) are not used."""
    rng = np.random.default_rng(seed)
    units = pl.DataFrame({"unit_id": [3, 7, 8, 20, 41]}, schema={"unit_id": pl.Int64})
    periods = 40
    daily = pl.DataFrame(
        {
            "unit_id": rng.choice([3, 7, 8, 20, 41, 99], 150),
            "day": rng.integers(-2, 45, 150),
            "x": rng.normal(size=150),
        },
        schema={"unit_id": pl.Int64, "day": pl.Int64, "x": pl.Float64},
    ).unique(subset=["unit_id", "day"], maintain_order=True)
    events = pl.DataFrame(
        {"unit_id": rng.choice([3, 7, 8, 20, 41, 55], 300), "day": rng.integers(0, 42, 300), "y": rng.normal(size=300)},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "y": pl.Float64},
    )
    cells: list[np.ndarray] = []
    panel = open_grid(units, events, [daily], periods, "volume", cells)
    assert panel is not None and len(cells) == 2
    grid = (panel["unit_id"].to_numpy()[::periods], periods)
    assert join_on_grid(panel, daily, grid, cells[0]).equals(join_on_grid(panel, daily, grid))
    assert _with_event_means(panel, events, ["y"], (grid, cells[1])).equals(_with_event_means(panel, events, ["y"]))
    other = (np.array([3, 7, 8]), periods)  # another grid's cells: found again
    wrong = np.zeros(events.height, dtype=np.int64)
    assert _with_event_means(panel, events, ["y"], (other, wrong)).equals(_with_event_means(panel, events, ["y"]))


@pytest.mark.parametrize("seed", range(4))
def test_a_detail_is_dated_in_its_own_order_whatever_its_ids_type(seed):
    """A detail file dated by its events keeps its own row order whether its ids are integers (read by
    position) or text (a join): polars' inner join otherwise returns the larger side's order (the events'),
    which would feed the unit-switch repair the same values in another order, and so other float sums."""
    from auditors.dataset import _dated

    rng = np.random.default_rng(seed)
    n_events = 5_000
    events = pl.DataFrame({"event_id": np.arange(n_events, dtype=np.int64), "day": rng.integers(0, 365, n_events)})
    picked = rng.permutation(n_events)[:300]  # fewer detail rows than events, in an order of their own
    detail = pl.DataFrame({"event_id": picked.astype(np.int64), "amount": rng.normal(size=300)})
    by_position = _dated(detail, events)
    as_text = _dated(
        detail.with_columns(pl.format("E{}", "event_id").alias("event_id")),
        events.with_columns(pl.format("E{}", "event_id").alias("event_id")),
    )
    assert by_position["amount"].to_list() == detail["amount"].to_list()
    assert as_text["amount"].to_list() == by_position["amount"].to_list()
    assert as_text["day"].to_list() == by_position["day"].to_list()

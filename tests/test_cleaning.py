"""The auditor's cleaning as an analyst would do it: unit switches found and undone exactly, real changes
left alone, shared external series read as one number per region and day."""

from __future__ import annotations

import numpy as np
import polars as pl

from auditors.dataset import repair_unit_drift

UNITS, DAYS = 40, 365


def daily_panel(level: np.ndarray, seed: int = 0, noise: float = 0.05) -> pl.DataFrame:
    """UNITS x days panel: level[day] times a unit effect times lognormal noise, every day reported."""
    rng = np.random.default_rng(seed)
    unit_effect = rng.lognormal(0, 0.3, UNITS)[:, None]
    values = level[None, :] * unit_effect * rng.lognormal(0, noise, (UNITS, len(level)))
    return pl.DataFrame(
        {
            "unit_id": np.repeat(np.arange(UNITS), len(level)),
            "day": np.tile(np.arange(len(level)), UNITS),
            "cost": values.reshape(-1).round(2),
        }
    )


def switched(frame: pl.DataFrame, day: int, factor: float) -> pl.DataFrame:
    return frame.with_columns(pl.when(pl.col("day") >= day).then(pl.col("cost") * factor).otherwise("cost"))


def test_a_switch_to_cents_is_undone_exactly_even_when_the_level_drops_the_same_day():
    level = np.full(DAYS, 100.0)
    level[181:] *= 0.75  # a real 25% drop on the day the system moved to cents
    clean = daily_panel(level)
    fixed = repair_unit_drift(switched(clean, 181, 100.0), "cost", "EUR")
    assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-9)


def test_a_wet_spell_that_lifts_every_unit_for_days_is_not_a_unit_switch():
    level = np.full(DAYS, 100.0)
    level[200:206] *= 2.3  # rain across the region: every unit up by about the kg->lb factor, for six days
    frame = daily_panel(level)
    assert repair_unit_drift(frame, "cost", "kg").equals(frame)


def test_a_real_step_that_lasts_is_not_taken_for_pounds():
    level = np.full(DAYS, 100.0)
    level[150:] *= 1.5  # a price rise for everyone: sharp and lasting, but no conversion factor
    frame = daily_panel(level)
    assert repair_unit_drift(frame, "cost", "kg").equals(frame)


def test_a_switch_made_during_a_summer_break_is_found_across_the_break():
    rng = np.random.default_rng(3)
    days = np.concatenate([np.arange(0, 190), np.arange(240, DAYS)])  # closed for the summer
    n = 30_000
    day = np.sort(rng.choice(days, n))
    minutes = rng.lognormal(np.log(40), 0.5, n).round(2)
    events = pl.DataFrame({"unit_id": rng.integers(0, UNITS, n), "day": day, "cost": minutes})
    moved = events.with_columns(pl.when(pl.col("day") >= 222).then(pl.col("cost") * 60).otherwise("cost"))
    fixed = repair_unit_drift(moved, "cost", "minutes")
    assert np.allclose(fixed["cost"].to_numpy(), events["cost"].to_numpy(), rtol=1e-9)


def test_an_early_season_ramp_does_not_hide_the_real_switch():
    level = np.full(DAYS, 1600.0)
    level[:3] = 370.0  # a near-zero start: the first days' jump is as large as the kg->lb factor
    clean = daily_panel(level)
    fixed = repair_unit_drift(switched(clean, 176, 2.20462), "cost", "kg")
    assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-6)


def test_a_regional_series_is_read_as_the_units_consensus_per_region_and_day():
    from auditors.dataset import _shared_series_consensus
    from contracts.model import Variable
    from tests.test_estimators import _contract

    rate = Variable(
        name="rate", description="regional rate", grain="panel", dtype="float", unit="%", mean=5, sd=1, system="s", layer=0,
        scope="region",
    )  # fmt: skip
    rng = np.random.default_rng(0)
    region = np.array(["north", "south"])[np.arange(UNITS) % 2]
    truth = {"north": rng.normal(5, 1, DAYS), "south": rng.normal(8, 1, DAYS)}
    value = np.stack([truth[r] for r in region]).round(2)
    shown = value.copy()
    shown[rng.random(shown.shape) < 0.05] = np.nan  # blanks
    late = rng.random(shown.shape) < 0.03
    shown[late] = np.roll(value, 3, axis=1)[late]  # late postings: another day's value
    opened = rng.random(shown.shape) > 0.1
    panel = pl.DataFrame(
        {
            "unit_id": np.repeat(np.arange(UNITS), DAYS),
            "day": np.tile(np.arange(DAYS), UNITS),
            "open": opened.reshape(-1).astype(np.int8),
            "rate": np.where(opened, shown, np.nan).reshape(-1),
        }
    ).with_columns(pl.col("rate").fill_nan(None))
    master = pl.DataFrame({"unit_id": np.arange(UNITS), "region": region})
    got = _shared_series_consensus(_contract([], [rate]), panel, master)["rate"].to_numpy().reshape(UNITS, DAYS)
    assert np.allclose(got[opened], value[opened]) and np.isnan(got[~opened]).all()


def test_a_switch_split_over_two_reports_by_a_shared_bad_day_is_still_found():
    # A harvest halved everywhere by rain on the day after the switch: neither report-to-report step
    # shows the whole kg -> lb factor, the level either side of the switch does.
    level = np.full(DAYS, 1800.0)
    level[117] *= 0.6
    for day in (36, 90, 289):  # bigger one-day dips elsewhere, which name no factor and do not persist
        level[day] *= 0.45
    clean = daily_panel(level, noise=0.15)
    fixed = repair_unit_drift(switched(clean, 117, 2.20462), "cost", "kg")
    assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-6)


def test_a_sparse_measure_that_starts_low_shows_its_switch_not_its_first_week():
    """Claims trail the deliveries they are filed on, so the first days' few claims are small. That week
    differs from the rest by more than the switch to cents, in log terms, but on a sliver of the values:
    the switch is the split the evidence is surest of (transport-662 of the README's build)."""
    rng = np.random.default_rng(5)
    level = np.full(DAYS, 60.0)
    level[:10] = 3.0
    values = level[None, :] * rng.lognormal(0, 0.8, (UNITS, DAYS))
    values[rng.random((UNITS, DAYS)) > 0.22] = 0.0  # a claim on about one day in five
    clean = pl.DataFrame(
        {
            "unit_id": np.repeat(np.arange(UNITS), DAYS),
            "day": np.tile(np.arange(DAYS), UNITS),
            "cost": values.reshape(-1).round(2),
        }
    )
    fixed = repair_unit_drift(switched(clean, 109, 100.0), "cost", "USD/day")
    assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-9)


def test_a_load_ramping_up_over_its_first_weeks_is_not_taken_for_pounds():
    """A load building up 2.2x over one to three weeks (environment-531, -794 of the README's build): three
    weeks either side of its steepest split look like a step by the kg -> lb factor, but the units do not
    move by half of it between the two reports either side, as a switch's would even when a bad day blurs it."""
    for start, days, seed in ((25, 6, 0), (60, 7, 1), (150, 8, 2), (25, 10, 0), (25, 10, 1), (20, 15, 1), (15, 20, 0)):
        level = np.full(DAYS, 205.0)
        level[:start] = 93.0
        level[start : start + days] = np.geomspace(93.0, 205.0, days)
        frame = daily_panel(level, seed=seed, noise=0.1)
        assert repair_unit_drift(frame, "cost", "kg BOD/ML/day").equals(frame), (start, days, seed)


def volatile_load(seed: int) -> pl.DataFrame:
    """Sites answering a volatile shared driver, each with its own elasticity (0.3 to 1.7): the driver's log
    walks with a few lasting jumps, one of them on day 99 by the kg -> lb factor at the median site
    (environment-854, -972 of the README's build)."""
    rng = np.random.default_rng(seed)
    driver = np.cumsum(rng.normal(0, 0.02, DAYS))
    for day, jump in ((60, -1.2), (99, np.log(2.20462)), (170, 1.6), (240, -2.0), (300, 1.3)):
        driver[day:] += jump
    elasticity = np.linspace(0.3, 1.7, UNITS)[rng.permutation(UNITS)]
    site = rng.lognormal(np.log(200), 0.3, UNITS)
    values = site[:, None] * np.exp(elasticity[:, None] * driver[None, :]) * rng.lognormal(0, 0.05, (UNITS, DAYS))
    return pl.DataFrame(
        {
            "unit_id": np.repeat(np.arange(UNITS), DAYS),
            "day": np.tile(np.arange(DAYS), UNITS),
            "cost": values.reshape(-1).round(2),
        }
    )


def test_a_volatile_load_stepping_by_the_pounds_factor_through_a_shared_cause_is_left_alone():
    """Every site moves about 2.2x on one day and stays there, as a switch to pounds would make it. But a
    conversion multiplies every site by the same factor, and here each site moves by its own amount: the
    units' steps that day scatter far more than on an ordinary day."""
    for seed in range(4):
        frame = volatile_load(seed)
        assert repair_unit_drift(frame, "cost", "kg BOD/ML/day").equals(frame), seed


def test_a_switch_to_pounds_in_a_volatile_load_is_still_undone():
    for seed in range(4):
        clean = volatile_load(seed)
        fixed = repair_unit_drift(switched(clean, 210, 2.20462), "cost", "kg BOD/ML/day")
        assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-6), seed


def test_a_switch_to_pounds_inside_a_steep_climb_is_undone():
    """A harvest climbing half a log unit over a month, falling a little on the very day the system moved to
    pounds (agriculture-310 of the README's build): the three weeks either side differ by more than
    the factor, the reports either side of the day by less, but by more than half of it."""
    for seed in range(4):
        level = np.full(DAYS, 1500.0)
        level[130:160] *= np.geomspace(1.0, np.exp(0.5), 30)
        level[160:] *= np.exp(0.5)
        level[145:] *= 0.75
        clean = daily_panel(level, seed=seed, noise=0.1)
        fixed = repair_unit_drift(switched(clean, 145, 2.20462), "cost", "kg/day")
        assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-6), seed


def test_a_switch_to_pounds_is_undone_when_a_region_is_hit_the_same_day():
    """Rain in one region (35% of the units) on the day of the switch, in a level climbing all year: the
    units' steps that day spread wide, but the rest still lie as close together as on any day."""
    rng = np.random.default_rng(2)
    level = 100 * np.exp(np.linspace(0, 3.0, DAYS))
    for seed in range(4):
        clean = daily_panel(level, seed=seed)
        hit = (pl.col("unit_id") < int(0.35 * UNITS)) & (pl.col("day") == 181)
        clean = clean.with_columns(
            pl.when(hit).then((pl.col("cost") * rng.uniform(1.3, 1.5)).round(2)).otherwise("cost")
        )
        fixed = repair_unit_drift(switched(clean, 181, 2.20462), "cost", "kg")
        assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-6), seed


def test_a_switch_to_pounds_of_whole_kilograms_rising_into_it_is_undone():
    """Whole kilograms that mostly repeat from day to day: an ordinary day's steps are all zero, and the
    switch's day scatters them by its rounding alone (MIN_SCATTER), in a level rising the days before."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        level = np.full(DAYS, 50.0)
        level[170:181] *= np.geomspace(1, 1.6, 11)
        level[181:] *= 1.6
        values = level[None, :] * rng.lognormal(0, 0.3, UNITS)[:, None] * rng.lognormal(0, 0.005, (UNITS, DAYS))
        clean = pl.DataFrame(
            {
                "unit_id": np.repeat(np.arange(UNITS), DAYS),
                "day": np.tile(np.arange(DAYS), UNITS),
                "cost": np.round(values, 0).reshape(-1),
            }
        )
        drifted = clean.with_columns(
            pl.when(pl.col("day") >= 181).then((pl.col("cost") * 2.20462).round(2)).otherwise("cost")
        )
        fixed = repair_unit_drift(drifted, "cost", "kg")
        assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-3, atol=0.02), seed


def slump_fortnight(seed: int, start: int = 215) -> pl.DataFrame:
    """A daily cost closed one day a week (no rows) with a short shift the day before, and a fortnight's slump
    from `start`: few orders, so few and low reports (an eighth of the level on a third of the units' days in
    its first week, a third on two thirds in its second), scattered wide as one order's cost is
    (manufacturing-930 of the README's build)."""
    rng = np.random.default_rng(seed)
    day = np.arange(DAYS)
    short = day % 7 == 3
    first = (day >= start) & (day < start + 7)
    second = (day >= start + 7) & (day < start + 14)
    level = 200.0 * np.where(short, 0.4, 1.0) * np.where(first, 0.15, np.where(second, 0.3, 1.0))
    scatter = np.where(first | second, 0.8, 0.4)
    values = level * rng.lognormal(0, 0.3, UNITS)[:, None] * np.exp(scatter * rng.normal(size=(UNITS, DAYS)))
    reported = np.where(first, 0.35, np.where(second, 0.65, np.where(short, 0.5, 0.95)))
    values[rng.random((UNITS, DAYS)) > reported] = 0.0
    frame = pl.DataFrame(
        {
            "unit_id": np.repeat(np.arange(UNITS), DAYS),
            "day": np.tile(day, UNITS),
            "cost": values.reshape(-1).round(2),
        }
    )
    return frame.filter(pl.col("day") % 7 != 4)


def test_a_switch_to_cents_into_a_fortnights_slump_is_undone_from_its_own_day():
    """The slump's cents lie between the old level and the new, so every split from the switch to the
    slump's end is about as sure: the split lands a week late, where the reports either side are all in
    cents and neither daily rule holds. On the switch's own day every unit's reports step about thirtyfold
    (the factor less the slump), and nowhere else in the split's span near tenfold."""
    from auditors.dataset import _best_split

    for seed in range(4):
        clean = slump_fortnight(seed)
        drifted = switched(clean, 215, 100.0)
        reports = drifted.filter(pl.col("cost") > 0).sort("day")
        split = _best_split(reports["day"].to_numpy(), np.log(reports["cost"].to_numpy()))
        assert split is not None and split[0] == 222, (seed, split)  # the situation: a week late
        fixed = repair_unit_drift(drifted, "cost", "EUR/day")
        assert np.allclose(fixed["cost"].to_numpy(), clean["cost"].to_numpy(), rtol=1e-9), seed


def test_a_cost_climbing_a_hundredfold_over_days_is_not_taken_for_cents():
    """A season opening: a level rising 100x over one to three weeks. Three weeks either side of its
    steepest split look like a step by x100, but no day steps the units' own reports by tenfold."""
    for days, seed in ((8, 0), (10, 1), (14, 2), (21, 0)):
        level = np.full(DAYS, 200.0)
        level[:60] = 2.0
        level[60 : 60 + days] = np.geomspace(2.0, 200.0, days)
        frame = daily_panel(level, seed=seed, noise=0.3)
        assert repair_unit_drift(frame, "cost", "EUR/day").equals(frame), (days, seed)

"""Do a build's observed files read like real system exports? The eight realism checks of issue 14.

python benchmarks/realism_report.py BUILD_OR_WORLD... [--worlds N] [--json OUT.json] [--by-world]

Every check is a statistic an analyst would compute on the observed files E (parsed and keyed the way the
independent auditor does it, `auditors.checks.parse_observed` and `auditors.dataset`), compared with a
target range that the world's own contract implies (its calendar, climate, party and event shapes, each
variable's observation model), never a number written down per domain. Where E cannot give a quantity the
check says so in its `source`: only the completion time of events whose files do not show it is read from
X (canonical/events.parquet). A target with a sampling allowance is widened by the noise the world's size
implies (e.g. the total-variation distance two samples of that size reach by chance).

Groups: 1 event times, 2 daily panels, 3 counts and rates, 4 feedback, 5 shared external series, 6 tails,
7 keys and names, 8 parties; B: checks over the whole build (party tables across worlds and domains).
`--worlds N` keeps the first N worlds (by index) of each build. The markdown goes to stdout; `--json`
writes every world's measurements, the per-domain and per-check summaries and the build checks.
"""

from __future__ import annotations

import functools
import json
import math
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl
from faker.providers.lorem.en_US import Provider as _EnglishLorem

from auditors.checks import parse_observed
from auditors.dataset import Dataset, UnitKeys, from_observed, merge_renamed_columns
from auditors.worldio import World, is_world_dir, key_to_int, load_world, normalise, read_observed, read_text
from contracts.calendar import date_factors, levels, open_for_all, weekdays
from contracts.keys import is_text_key, template
from contracts.model import Contract, Deliverable, Variable
from worldgen.packs import builtin_packs

DAY_S = 86400

# What each check measures and how its target follows from the contract (the README table's first columns).
CHECKS: dict[str, tuple[str, str]] = {
    "1a": ("events outside open hours", "share; <= 0.005 outside calendar.hours"),
    "1b": ("hour-of-day TV distance", "vs calendar.hours/peaks/flat_share; <= max(0.05, 3x sampling TV)"),
    "1c": ("weekday TV distance", "vs calendar weekly x monthly x dates over open days; <= max(0.03, 3x sampling TV)"),
    "1d": ("events on closed days", "share on days calendar closes (factor 0); <= 0.001"),
    "1e": (
        "dated-event lift realised",
        "observed/expected lift of holidays and events (factor != 0, 1); 1 +- max(0.4, 2.5 se)",
    ),
    "2a": ("daily rows on closed days", "share of daily-file rows on calendar-closed days; <= 0.005 (late postings)"),
    "2b": (
        "unit-days absent",
        "share absent from each daily file; calendar + extra closed weekday + outages + lifecycle, +- (0.03 + lifecycle spread)",
    ),
    "2c": ("blank daily rows", "share of rows with every value blank (absent, not null), files of 2+ values; <= 0.05"),
    "2d": ("weekday max/min volume", "events per open unit-day by weekday; calendar's ratio x exp(+-(0.05 + 3 se))"),
    "2e": (
        "units with a rest weekday",
        "share of units never reporting on one open weekday; calendar.extra_closed_weekday +- (0.05 + 2 se)",
    ),
    "3a": ("integer counts", "share of whole numbers in count columns (worst column); >= 0.99"),
    "3b": (
        "zeros of low counts",
        "zero share / exp(-mean), count columns with mean <= 3 (worst); >= 0.9 (Poisson bound)",
    ),
    "3c": ("rates are k/n", "share of rate values = k/n of that unit-day's denominator count (worst); >= 0.95"),
    "3d": ("rolling autocorrelation", "lag-1 autocorrelation of rolling columns (worst); >= (window-1)/window - 0.1"),
    "4a": ("survey response rate", "answered / events; declared response x [0.75, 1.25] (else [0.05, 0.30])"),
    "4b": ("integer scale answers", "share of whole points; >= 0.99"),
    "4c": ("J-shape: top point the mode", "share of the top point / the next most common point's; > 1"),
    "4d": ("J-shape: bottom above its neighbour", "share of the bottom point / the point above it; > 1"),
    "4e": ("feedback after completion", "share of feedback times >= completion; >= 0.99"),
    "4f": ("whole-day feedback delays", "share of feedback - event delays that are whole days; <= 0.02"),
    "4g": ("feedback delay median", "hours after the event; (completion_hours + feedback_delay_hours) x [0.4, 2.5]"),
    "5a": ("shared series agree", "within-(region|nation, day) share of variance explained (worst variable); >= 0.9"),
    "5b": ("wet-day share", "share of region-days with rain; climate.wet_days x [0.8, 1.2] (a half year: [0.7, 1.3])"),
    "5c": ("rain on wet days", "mean mm on a wet day; climate.wet_mm x [0.6, 1.5]"),
    "5d": ("rain tail", "max / wet_mm; [0.8, 4] x (ln wet days + 0.58), the exponential's expected max"),
    "5e": ("temperature seasonal range", "warmest - coldest month / the climate's over the same months; [0.7, 1.3]"),
    "5f": ("temperature level", "mean minus climate mean over the same days; within +- max(2.5, 0.2 swing_c) C"),
    "6a": ("durations right-skewed", "skewness / lognormal skewness at the variable's sd/mean (worst); >= 0.5"),
    "6b": ("sporadic zeros", "zero share of sporadic columns (worst); [0.5, 0.95]"),
    "6c": ("sporadic tail", "skewness of sporadic columns (worst); >= 1"),
    "7a": ("truncated name tokens", "share of column names with a token cut from a word of its own description; 0"),
    "7b": ("ordinal keys", "share of key columns whose numbers are exactly 1..n; <= 0.25"),
    "7c": ("systems sharing the master's unit code", "share of unit-key columns showing master codes; <= 0.9"),
    "8a": ("events before sign-up", "share of events before the party's sign-up date; <= 0.005"),
    "8b": (
        "home-region events",
        "share of events at a unit in the party's region; parties.home_share + chance, +- 0.05",
    ),
    "8c": ("events per party p99/median", "vs gamma(parties.loyalty) x exposure since sign-up (simulated); x [0.5, 2]"),
    "8d": ("events per party max", "vs the same simulation's max; <= 3x"),
    "8e": ("a person's busy days", "share of events on a person-party's day with > 2 of them; <= 0.02"),
    "B1": ("party table size varies", "coefficient of variation of party rows across worlds of one size; >= 0.1"),
    "B2": ("party columns differ by domain", "distinct party column sets / domains; >= 0.8"),
}
GROUPS = {
    "1": "event times",
    "2": "daily panels",
    "3": "counts, rates",
    "4": "feedback",
    "5": "shared series",
    "6": "tails",
    "7": "keys, names",
    "8": "parties",
}

# Tolerances, each with its reason.
OUTSIDE_HOURS_MAX = 0.005  # a clock or time-zone slip, not a pattern
HOUR_TV_FLOOR = 0.05  # an hour profile within 5 points of the declared one reads as that profile
WEEKDAY_TV_FLOOR = 0.03  # weekday shares move a little with the drivers of the volume
SAMPLING_TVS = 3.0  # and by chance up to three times the distance a sample of that size reaches on average
CLOSED_EVENTS_MAX = 0.001
LIFT_WIDTH, LIFT_SES = 0.4, 2.5  # a holiday's lift is realised within 40% (or 2.5 standard errors)
LIFT_MIN_SIGNAL = 0.2  # the calendar's dated effects must move activity by 20% in all for the check to apply
LIFT_WEEKS = 4  # neighbours: the same weekday up to four weeks either side
CLOSED_ROWS_MAX = 0.005  # 1% of rows are posted a day late; a few of those land on a closed day
ABSENT_TOLERANCE = 0.03
BLANK_ROWS_MAX = 0.05  # missing values blank single cells, not whole rows
WEEKDAY_RATIO_TOL, WEEKDAY_RATIO_SES = 0.05, 3.0
INTEGER_MIN = 0.99
LOW_COUNT_MEAN = 3.0  # counts averaging up to 3 a day have zeros an analyst expects to see
ZERO_RATIO_MIN = 0.9  # a Poisson mixture has at least exp(-mean) zeros (Jensen); 10% for the sampling
RATE_CONSISTENT_MIN = 0.95  # late postings and unresolved keys misplace a few rows
ROLLING_SLACK = 0.1
RESPONSE_BAND = (0.75, 1.25)  # missing values take a few answers away
RESPONSE_DEFAULT = (0.05, 0.30)
FEEDBACK_AFTER_MIN = 0.99
WHOLE_DAY_MAX = 0.02
DELAY_BAND = (0.4, 2.5)  # the median of a sum of two log-normal delays is near the sum of their medians
SHARED_MIN = 0.9
WARMEST_DOY = {"north": 201, "south": 19}  # climatology: warmest around 20 July (north) / 19 January (south)
WET_BAND, WET_BAND_PARTIAL = (0.8, 1.2), (0.7, 1.3)  # half a year's wet days differ more from the annual share
WET_MM_BAND, RAIN_MAX_BAND = (0.6, 1.5), (0.8, 4.0)
TEMP_LEVEL_C = 2.5  # a season's mean anomaly rarely exceeds 2.5 C
TEMP_RANGE_BAND = (0.7, 1.3)
MIN_MONTH_DAYS = 15  # a month with fewer days observed does not give a monthly mean
SKEW_SHARE_MIN = 0.5  # half the skewness a log-normal of the same spread has
SPORADIC_ZERO_BAND = (0.5, 0.95)  # zero on most days, but not never non-zero
SPORADIC_SKEW_MIN = 1.0
ORDINAL_SHARE_MAX = 0.25  # a system may number its units 1..n; most have codes
MASTER_CODE_SHARE = 0.95  # a column shows the master's codes when (nearly) all its numbers are master codes
SHARED_CODES_MAX = 0.9  # at least one system in ten keys units its own way (own ids with a mapping, names)
SIGNUP_MAX = 0.005
HOME_TOLERANCE = 0.05
TAIL_BAND, MAX_FACTOR = (0.5, 2.0), 3.0
PERSON_DAY_MAX, BUSY_SHARE_MAX = 2, 0.02  # more than two a day is rare for one person (2% of events at most)
PARTY_SIM_SEED = 20240614  # the party simulation is seeded: the report is deterministic
PARTY_SIZE_CV_MIN, PARTY_SETS_MIN = 0.1, 0.8

# Standard abbreviations of column names (a token that is a prefix of a word but a word in its own right).
ABBREVIATIONS = set(
    "id ids no num nbr qty amt avg min max mins pct temp ref refs cust acct dept info app addr desc cat prev org "
    "admin prep approx est std dev tx txn ts dt yr mo wk hr hrs sec secs kwh mwh wh km kg mm cm usd eur gbp chf "
    "int ext src dst dest loc reg stat stats tel msg doc docs lab rep tot val vol cnt seq ver v new old pos sku "
    "uuid code key pc per co op ops sat sun mon tue wed thu fri jan feb mar apr jun jul aug sep oct nov dec "
    "net gross rev inv kpi sla nps csat eta gmv aov ctr cpc cpm roi roas pm am precip frac len eng req wo ta ac "
    "dc util avail sched qc veg ot som refurb".split()
)
# Endings that make another form of a word, not a truncation of it.
INFLECTIONS = set(
    "s es ed d ing er ers ly y ies al ally ful fall ation ion ions ure ment ments ity ness ive ance ence".split()
)


# Common English words (Faker's list of ~1,000, already a dependency): 'at', 'drop', 'rest' are words, not cuts.
COMMON_WORDS = {w.lower() for w in _EnglishLorem.word_list if w.isalpha()}


@dataclass
class Check:
    """One measured statistic of one world against its target range (None: not applicable)."""

    id: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    detail: str = ""
    source: str = "E"

    @property
    def passed(self) -> bool | None:
        if self.value is None or not math.isfinite(self.value):
            return None
        return bool(
            (self.lo is None or self.value >= self.lo - 1e-12) and (self.hi is None or self.value <= self.hi + 1e-12)
        )

    def row(self) -> dict:
        return {**asdict(self), "name": CHECKS.get(self.id, (self.id,))[0], "passed": self.passed}


def na(check_id: str, why: str) -> Check:
    return Check(check_id, None, detail=why)


# --- the observed files, parsed --------------------------------------------------------------------------


class Files:
    """A world's observed files parsed as the auditor parses them, columns named by what they hold."""

    def __init__(self, world: World):
        self.world = world
        self.contract: Contract = world.contract  # type: ignore[assignment]
        c = self.contract
        self.periods = c.timeline.periods
        self.start = c.timeline.start
        self.open_all = open_for_all(c.calendar, self.start, self.periods)
        self.weekday = weekdays(self.start, self.periods)
        self.level = (
            levels(c.calendar, self.start, self.periods) * self.open_all
        )  # the calendar's expected activity per unit-day, 0 when closed

    @cached_property
    def frames(self) -> list[tuple[Deliverable, pl.DataFrame]]:
        out = []
        for d in self.contract.deliverables:
            if d.grain == "dictionary":
                continue
            frame = merge_renamed_columns(parse_observed(self.world, d, read_observed(self.world, d)), d)
            out.append((d, frame.rename({c.name: source_column(c.source) for c in d.columns})))
        return out

    def of(self, grain: str) -> list[tuple[Deliverable, pl.DataFrame]]:
        return [(d, f) for d, f in self.frames if d.grain == grain]

    @cached_property
    def keys(self) -> UnitKeys:
        d, master = self.of("units")[0]
        return UnitKeys(master, d, clean=True)

    @cached_property
    def master(self) -> pl.DataFrame:
        master = self.of("units")[0][1].filter(pl.col("unit_id").is_not_null())
        return master.unique(subset=["unit_id"], keep="first", maintain_order=True)

    @cached_property
    def events(self) -> pl.DataFrame:
        """The event log, re-sent duplicates dropped, units as master codes, with its day."""
        d, frame = self.of("events")[0]
        frame = self.keys.resolve(frame, d).filter(pl.col("time").is_not_null())
        frame = frame.unique(subset=["event_id"], keep="first", maintain_order=True)
        return frame.with_columns((pl.col("time") // DAY_S).cast(pl.Int64).alias("day"))

    @cached_property
    def daily(self) -> list[tuple[Deliverable, pl.DataFrame]]:
        return [(d, self.keys.resolve(f, d)) for d, f in self.of("panel")]

    @cached_property
    def dataset(self) -> Dataset:
        """The auditor's cleaned analysis tables (unit switches undone, renamed columns merged)."""
        return from_observed(self.world, clean=True)

    def variables(self, **match) -> list[Variable]:
        return [v for v in self.contract.variables if all(getattr(v, k) == x for k, x in match.items())]


def source_column(source: str) -> str:
    return source.split(".", 1)[1].lstrip("@")


def tv_noise(p: np.ndarray, n: int) -> float:
    """The total-variation distance a sample of n from p is expected to reach by chance."""
    return float(0.5 * np.sum(np.sqrt(2 * p * (1 - p) / (np.pi * max(n, 1)))))


def skewness(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    if len(x) < 3 or x.std() == 0:
        return float("nan")
    return float(np.mean((x - x.mean()) ** 3) / x.std() ** 3)


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1000 else f"{x:.0f}"


# --- 1 event times ---------------------------------------------------------------------------------------


def implied_hours(calendar) -> np.ndarray:
    """The hour-of-day shares the calendar declares: an even spread over the opening hours plus its peaks,
    a peak's tail outside the opening hours folded back evenly into them."""
    a, b = calendar.hours
    minutes = np.arange(a * 60, b * 60) / 60.0
    total = sum(p.weight for p in calendar.peaks)
    flat = calendar.flat_share if calendar.peaks else 1.0
    per_minute = np.full(len(minutes), flat / len(minutes))
    for p in calendar.peaks:
        w = (1 - flat) * p.weight / total
        cdf = np.array([0.5 * (1 + math.erf((m - p.hour) / (p.sd * math.sqrt(2)))) for m in [*minutes, b]])
        inside = np.diff(cdf)
        per_minute += w * inside + w * (1 - inside.sum()) / len(minutes)
    return np.bincount(np.floor(minutes).astype(int) % 24, weights=per_minute, minlength=24)[:24]


def event_times(f: Files) -> list[Check]:
    cal = f.contract.calendar
    t = f.events["time"].to_numpy()
    day = t // DAY_S
    hour = (t % DAY_S) / 3600.0
    n = len(t)
    if n == 0:
        return [na(i, "no events") for i in ("1a", "1b", "1c", "1d", "1e")]
    a, b = cal.hours
    inside = (
        np.ones(n, dtype=bool) if b - a >= 24 else ((hour >= a) & (hour < b)) | ((hour + 24 >= a) & (hour + 24 < b))
    )
    expected = implied_hours(cal)
    observed = np.bincount(np.floor(hour).astype(int), minlength=24)[:24] / n
    flat = np.where(expected > 0, 1.0, 0.0) / max((expected > 0).sum(), 1)
    tv = 0.5 * np.abs(observed - expected).sum()
    hour_check = Check(
        "1b", tv, hi=max(HOUR_TV_FLOOR, SAMPLING_TVS * tv_noise(expected, n)),
        detail=f"n={n}; a flat day over the open hours would be {0.5 * np.abs(flat - expected).sum():.2f} away; "
        f"busiest hour {int(np.argmax(observed))}:00 (declared {int(np.argmax(expected))}:00)",
    )  # fmt: skip
    in_range = (day >= 0) & (day < f.periods)
    wd_expected = np.bincount(f.weekday, weights=f.level, minlength=7)
    wd_expected /= wd_expected.sum()
    wd_observed = np.bincount(f.weekday[day[in_range]], minlength=7) / max(in_range.sum(), 1)
    names = "MTWTFSS"
    shares = " ".join(f"{names[i]}{wd_observed[i]:.2f}/{wd_expected[i]:.2f}" for i in range(7))
    closed = ~f.open_all
    return [
        Check("1a", float(1 - inside.mean()), hi=OUTSIDE_HOURS_MAX, detail=f"open {a:g}-{b:g}h"),
        hour_check,
        Check(
            "1c",
            0.5 * float(np.abs(wd_observed - wd_expected).sum()),
            hi=max(WEEKDAY_TV_FLOOR, SAMPLING_TVS * tv_noise(wd_expected, int(in_range.sum()))),
            detail=f"observed/declared {shares}",
        ),
        Check(
            "1d",
            float(closed[day[in_range]].mean()),
            hi=CLOSED_EVENTS_MAX,
            detail=f"{int(closed.sum())} closed days; {int(closed[day[in_range]].sum())} events on them",
        ),
        dated_lift(f, day[in_range]),
    ]


def dated_lift(f: Files, day: np.ndarray) -> Check:
    """How much of the calendar's holiday and event lifts the daily event totals show, each dated day
    against the same weekday in the weeks around it."""
    factors = date_factors(f.contract.calendar, f.start, f.periods)
    total = np.bincount(day, minlength=f.periods).astype(float)
    plain = f.open_all & (factors == 1)
    num = den = var = 0.0
    for d in np.flatnonzero(f.open_all & (factors != 1)):
        near = [d + 7 * k for k in range(-LIFT_WEEKS, LIFT_WEEKS + 1) if k and 0 <= d + 7 * k < f.periods]
        near = [x for x in near if plain[x]]
        if not near or total[near].sum() == 0:
            continue
        expected = f.level[d] / f.level[near].mean()
        observed = total[d] / total[near].mean()
        num += np.sign(expected - 1) * (observed - 1)
        den += abs(expected - 1)
        var += observed**2 * (1 / max(total[d], 1) + 1 / total[near].sum())
    if den < LIFT_MIN_SIGNAL:
        return na("1e", "the calendar's dated effects in the timeline move activity too little to measure")
    se = math.sqrt(var) / den
    width = max(LIFT_WIDTH, LIFT_SES * se)
    return Check("1e", num / den, lo=1 - width, hi=1 + width, detail=f"summed expected lift {den:.2f}, se {se:.2f}")


# --- 2 daily panels --------------------------------------------------------------------------------------


def daily_panels(f: Files) -> list[Check]:
    if not f.daily:
        return [na(i, "no daily file") for i in ("2a", "2b", "2c", "2d", "2e")]
    cal = f.contract.calendar
    units = set(f.master["unit_id"].to_list())
    closed = ~f.open_all
    on_closed, absent, blank = [], [], []
    for _, frame in f.daily:
        rows = frame.filter(pl.col("unit_id").is_not_null() & pl.col("day").is_not_null())
        days = rows["day"].to_numpy()
        inside = (days >= 0) & (days < f.periods)
        on_closed.append(float(closed[days[inside]].mean()) if inside.any() else 0.0)
        present = rows.filter(pl.col("unit_id").is_in(list(units)) & pl.col("day").is_between(0, f.periods - 1))
        seen = present.select("unit_id", "day").unique().height
        absent.append(1 - seen / (len(units) * f.periods))
        values = [x for x in frame.columns if x not in ("unit_id", "day")]
        if len(values) >= 2:  # with one value column, a blank row is just a missing value
            blank.append(float(frame.select(pl.all_horizontal(pl.col(values).is_null())).to_series().mean()))
    open_weekdays = max(int((np.asarray(cal.weekly) > 0).sum()), 1)
    # Units opening or closing mid-way: the contract's own allowance ((openings + closures) / 4 of unit-days),
    # give or take what a world with this many units can draw (each such unit misses up to half the timeline).
    changing = cal.openings + cal.closures
    lifecycle = changing / 4
    present = f.open_all.mean() * (1 - cal.extra_closed_weekday / open_weekdays) * (1 - cal.outages) * (1 - lifecycle)
    tolerance = ABSENT_TOLERANCE + f.open_all.mean() * (lifecycle + 3 * 0.5 * math.sqrt(changing / len(units)))
    worst_absent = max(absent, key=lambda x: abs(x - (1 - present)))
    files = ", ".join(f"{d.file} {x:.3f}" for (d, _), x in zip(f.daily, absent, strict=True))
    return [
        Check("2a", max(on_closed), hi=CLOSED_ROWS_MAX, detail=f"{int(closed.sum())} calendar-closed days"),
        Check("2b", worst_absent, lo=1 - present - tolerance, hi=1 - present + tolerance,
              detail=f"expected {1 - present:.3f}; {files}"),
        Check("2c", max(blank), hi=BLANK_ROWS_MAX) if blank else na("2c", "no daily file with two values"),
        weekday_ratio(f),
        rest_weekdays(f, units),
    ]  # fmt: skip


def rest_weekdays(f: Files, units: set) -> Check:
    """Units that never report on a weekday the calendar keeps open (their own closing day)."""
    share = f.contract.calendar.extra_closed_weekday
    seen = pl.concat([frame.select("unit_id", "day") for _, frame in f.daily]).drop_nulls().unique()
    seen = seen.filter(pl.col("unit_id").is_in(list(units)) & pl.col("day").is_between(0, f.periods - 1))
    open_weekdays = [w for w in range(7) if f.open_all[f.weekday == w].any()]
    seen = seen.with_columns(pl.Series("wd", f.weekday[seen["day"].to_numpy()]))
    per_unit = seen.group_by("unit_id").agg(pl.col("wd").unique().alias("wds"), pl.col("day").n_unique().alias("n"))
    per_unit = per_unit.filter(pl.col("n") >= 8 * len(open_weekdays))  # two months of reports at least
    if per_unit.height < 10:
        return na("2e", "fewer than ten units with two months of reports")
    resting = [len(set(open_weekdays) - set(w)) >= 1 for w in per_unit["wds"].to_list()]
    observed = float(np.mean(resting))
    width = 0.05 + 2 * math.sqrt(max(share * (1 - share), 0.01) / per_unit.height)
    return Check("2e", observed, lo=share - width, hi=share + width, detail=f"{per_unit.height} units")


def weekday_ratio(f: Files) -> Check:
    """Max/min over weekdays of the mean events per open unit-day, against the calendar's."""
    panel = f.dataset.panel.filter(pl.col("open") == 1)
    volume = f.contract.volume.name
    per_day = panel.group_by("day").agg(pl.len().alias("units"), pl.col(volume).sum().alias("events"))
    per_day = per_day.filter(pl.col("day").is_between(0, f.periods - 1)).sort("day")
    days = per_day["day"].to_numpy()
    keep = f.open_all[days]
    days, rate = days[keep], (per_day["events"].to_numpy() / per_day["units"].to_numpy())[keep]
    wd = f.weekday[days]
    observed, expected, se = {}, {}, {}
    for w in range(7):
        mine = wd == w
        if mine.sum() >= 3:
            observed[w] = rate[mine].mean()
            expected[w] = f.level[days[mine]].mean()
            se[w] = rate[mine].std(ddof=1) / math.sqrt(mine.sum()) / max(observed[w], 1e-9)
    if len(observed) < 2 or min(observed.values()) <= 0:
        return na("2d", "fewer than two weekdays with open days")
    hi_w, lo_w = max(observed, key=observed.get), min(observed, key=observed.get)
    ratio = observed[hi_w] / observed[lo_w]
    declared = max(expected.values()) / max(min(expected.values()), 1e-9)
    tol = WEEKDAY_RATIO_TOL + WEEKDAY_RATIO_SES * math.hypot(se[hi_w], se[lo_w])
    return Check(
        "2d", ratio, lo=declared * math.exp(-tol), hi=declared * math.exp(tol), detail=f"declared {declared:.2f}"
    )


# --- 3 counts and rates ----------------------------------------------------------------------------------


def shown_values(f: Files, names: set[str]) -> dict[str, np.ndarray]:
    """The raw values every daily, event or feedback file shows of these variables, pooled per variable."""
    out: dict[str, list[np.ndarray]] = defaultdict(list)
    for d, frame in f.frames:
        if d.grain not in ("panel", "events", "event_detail", "units"):
            continue
        for name in names & set(frame.columns):
            if frame.schema[name].is_numeric():
                out[name].append(frame[name].cast(pl.Float64).drop_nulls().drop_nans().to_numpy())
    return {k: np.concatenate(v) for k, v in out.items() if v}


def counts_rates(f: Files) -> list[Check]:
    volume = f.contract.volume.name
    counts = {v.name for v in f.contract.variables if (v.observe == "count" or v.dtype == "count") and v.name != volume}
    values = shown_values(f, counts)
    integer = {k: float(np.mean(np.abs(x - np.round(x)) < 1e-6)) for k, x in values.items() if len(x)}
    checks = [worst("3a", integer, lo=INTEGER_MIN)]
    zeros = {}
    for v in f.variables(observe="count"):
        x = values.get(v.name)
        if x is not None and len(x) and 0 < x.mean() <= LOW_COUNT_MEAN:
            zeros[v.name] = float(np.mean(x == 0) / math.exp(-x.mean()))
    checks.append(worst("3b", zeros, lo=ZERO_RATIO_MIN, none="no count column averages 3 or fewer"))
    checks.append(rates_are_fractions(f))
    checks.append(rolling_autocorrelation(f))
    return checks


def worst(check_id: str, by_name: dict[str, float], lo=None, hi=None, none: str = "no such column") -> Check:
    """The column furthest on the wrong side of its target stands for the world; the others go in the detail."""
    if not by_name:
        return na(check_id, none)
    key = min(by_name, key=lambda k: by_name[k]) if lo is not None else max(by_name, key=lambda k: by_name[k])
    detail = ", ".join(f"{k} {fmt(x)}" for k, x in sorted(by_name.items()))
    return Check(check_id, by_name[key], lo=lo, hi=hi, detail=detail)


def rates_are_fractions(f: Files) -> Check:
    """A rate of k in n shows k/n rounded: value x n lies within the rounding of a whole number. n is the
    unit-day's count of the rate's denominator, from the files (the event log counts the volume); a
    denominator no file shows is read from X, and the check says so."""
    panel = f.dataset.panel
    shares, source = {}, "E"
    for v in f.variables(observe="rate"):
        if v.name not in panel.columns or v.denominator is None:
            continue
        table = panel.select("unit_id", "day", pl.col(v.name).cast(pl.Float64))
        if v.denominator in panel.columns:
            table = table.with_columns(panel[v.denominator].cast(pl.Float64))
        else:
            table, source = table.join(hidden_counts(f, v.denominator), on=["unit_id", "day"]), "E+X (denominators)"
        pair = table.drop_nulls([v.name, v.denominator])
        x, n = pair[v.name].to_numpy(), pair[v.denominator].to_numpy()
        if len(x) == 0:
            continue
        half = 0.5 * 10.0 ** -(shown_decimals(f, v)) + 1e-9
        k = np.round(x * n)
        ok = (n > 0) & (np.abs(x * n - k) <= n * half + 1e-9) & (k >= 0) & (k <= n)
        shares[v.name] = float(ok.mean())
    check = worst("3c", shares, lo=RATE_CONSISTENT_MIN, none="no rate column in the files")
    check.source = source
    return check


def hidden_counts(f: Files, name: str) -> pl.DataFrame:
    """A count no observed file shows, per unit (as its master code) and day, from X."""
    units = f.world.canonical["units"].select("unit_id", "code")
    panel = f.world.canonical["panel"].select("unit_id", "day", pl.col(name).cast(pl.Float64))
    return panel.join(units, on="unit_id").select(pl.col("code").alias("unit_id"), "day", name)


def shown_decimals(f: Files, v: Variable) -> int:
    decimals = [c.decimals for d in f.contract.deliverables for c in d.columns if c.source.endswith(f".{v.name}")]
    return min([x for x in decimals if x is not None] or [v.decimals])


def rolling_autocorrelation(f: Files) -> Check:
    panel = f.dataset.panel
    acf, targets = {}, {}
    for v in f.variables(observe="rolling"):
        if v.name not in panel.columns:
            continue
        x = panel.select("unit_id", "day", pl.col(v.name).cast(pl.Float64)).drop_nulls().sort("unit_id", "day")
        x = x.with_columns((pl.col(v.name) - pl.col(v.name).mean().over("unit_id")).alias("z"))
        x = x.with_columns(
            pl.col("z").shift(1).over("unit_id").alias("prev"), pl.col("day").diff().over("unit_id").alias("gap")
        ).filter(pl.col("gap") <= 7)
        z, prev = x["z"].to_numpy(), x["prev"].to_numpy()
        if len(z) > 10:
            acf[v.name] = float(np.sum(z * prev) / math.sqrt(np.sum(z * z) * np.sum(prev * prev)))
            targets[v.name] = (v.window - 1) / v.window - ROLLING_SLACK if v.window else 0.0
    if not acf:
        return na("3d", "no rolling column")
    name = min(acf, key=lambda k: acf[k] - targets[k])
    detail = ", ".join(f"{k} {acf[k]:.2f} (window {f.contract.variable(k).window})" for k in sorted(acf))
    return Check("3d", acf[name], lo=targets[name], detail=detail)


# --- 4 feedback ------------------------------------------------------------------------------------------


def feedback(f: Files) -> list[Check]:
    events = f.events.select("event_id", pl.col("time").alias("event_time"))
    scales = f.variables(observe="scale")
    rates, integer, top, bottom, details = {}, {}, {}, {}, []
    after, whole, delays, source = [], [], [], "E"
    completion = completion_times(f)
    for _, frame in f.of("event_detail"):
        frame = frame.filter(pl.col("event_id").is_not_null()).unique(subset=["event_id"], keep="first")
        for v in (v for v in scales if v.name in frame.columns):
            answers = frame.filter(pl.col(v.name).is_not_null()).join(events, on="event_id", how="semi")
            rates[v.name] = answers.height / max(events.height, 1)
            points = answers[v.name].cast(pl.Float64).to_numpy()
            integer[v.name] = float(np.mean(np.abs(points - np.round(points)) < 1e-6)) if len(points) else float("nan")
            top[v.name], bottom[v.name], shares = j_shape(points, v)
            details.append(f"{v.name}: {shares}")
        if "feedback_time" in frame.columns:
            timed = frame.select("event_id", "feedback_time").drop_nulls().join(events, on="event_id")
            lag = (timed["feedback_time"] - timed["event_time"]).to_numpy()
            whole.append(lag % DAY_S == 0)
            delays.append(lag / 3600.0)
            if completion is not None:
                done = timed.join(completion[0], on="event_id")
                after.append((done["feedback_time"] >= done["completion_time"]).to_numpy())
                source = completion[1]
    if not rates:
        checks = [na(i, "no survey answers in the files") for i in ("4a", "4b", "4c", "4d")]
    else:
        declared = {v.name: v.response for v in scales if v.name in rates}
        bands = {
            k: (r * RESPONSE_BAND[0], r * RESPONSE_BAND[1]) if r else RESPONSE_DEFAULT for k, r in declared.items()
        }
        name = max(rates, key=lambda k: abs(math.log(max(rates[k], 1e-9) / (sum(bands[k]) / 2))))
        checks = [
            Check("4a", rates[name], lo=bands[name][0], hi=bands[name][1], detail=f"{name}; declared {declared[name]}"),
            worst("4b", integer, lo=INTEGER_MIN),
            Check("4c", min(top.values()), lo=1.0 + 1e-9, detail="; ".join(details)),
            Check("4d", min(bottom.values()), lo=1.0 + 1e-9, detail="; ".join(details)),
        ]
    if not delays:
        return checks + [na(i, "no feedback timestamps") for i in ("4e", "4f", "4g")]
    shape = f.contract.events
    expected = shape.completion_hours + shape.feedback_delay_hours
    median = float(np.median(np.concatenate(delays)))
    checks.append(
        Check("4e", float(np.concatenate(after).mean()), lo=FEEDBACK_AFTER_MIN, source=source)
        if after
        else na("4e", "no completion times")
    )
    checks.append(Check("4f", float(np.concatenate(whole).mean()), hi=WHOLE_DAY_MAX))
    checks.append(
        Check(
            "4g", median, lo=expected * DELAY_BAND[0], hi=expected * DELAY_BAND[1], detail=f"declared ~{expected:.1f} h"
        )
    )
    return checks


def j_shape(points: np.ndarray, v: Variable) -> tuple[float, float, str]:
    """The two arms of a J: top point / the next most common point, bottom point / the point above it."""
    lo, hi = int(v.min if v.min is not None else 1), int(v.max if v.max is not None else 5)
    whole = np.round(points[(points >= lo) & (points <= hi)]).astype(int) - lo
    if len(whole) == 0 or hi - lo < 2:
        return float("nan"), float("nan"), "no answers"
    p = np.bincount(whole, minlength=hi - lo + 1) / len(whole)
    top = p[-1] / max(p[:-1].max(), 1e-9)
    bottom = p[0] / max(p[1], 1e-9)
    return float(top), float(bottom), " ".join(f"{lo + i}:{x:.2f}" for i, x in enumerate(p))


def completion_times(f: Files) -> tuple[pl.DataFrame, str] | None:
    """(event_id, completion_time) from a file that shows it, else from X (no observed file does)."""
    for _, frame in f.of("event_detail") + f.of("events"):
        if "completion_time" in frame.columns:
            table = frame.select("event_id", "completion_time").drop_nulls()
            return table.unique(subset=["event_id"], keep="first"), "E"
    events = f.world.canonical["events"]
    d = f.of("events")[0][0]
    key = next(c for c in d.columns if c.source == "events.event_id")
    shown = "uuid" if key.format == "uuid" else "code"
    if shown not in events.columns or "completion_time" not in events.columns:
        return None
    return events.select(pl.col(shown).alias("event_id"), "completion_time"), "E+X (completion times)"


# --- 5 shared external series ----------------------------------------------------------------------------


def shared_series(f: Files) -> list[Check]:
    external = [v for v in f.contract.variables if v.scope != "unit" and v.grain == "panel"]
    panel = f.dataset.panel
    regions = f.master.select("unit_id", "region")
    agree = {}
    for v in (v for v in external if v.name in panel.columns):
        x = panel.select("unit_id", "day", pl.col(v.name).cast(pl.Float64)).drop_nulls().join(regions, on="unit_id")
        cell = ["region", "day"] if v.scope == "region" else ["day"]
        x = x.with_columns(pl.col(v.name).mean().over(cell).alias("m"))
        total = float(((x[v.name] - x[v.name].mean()) ** 2).sum())
        within = float(((x[v.name] - x["m"]) ** 2).sum())
        if total > 0:
            agree[f"{v.name} ({v.scope})"] = 1 - within / total
    checks = [worst("5a", agree, lo=SHARED_MIN, none="no region or nation series")]
    return checks + weather(f, panel, regions)


def weather(f: Files, panel: pl.DataFrame, regions: pl.DataFrame) -> list[Check]:
    climate = f.contract.climate
    checks = []
    rain = next((v for v in f.variables(shape="rain") if v.name in panel.columns), None)
    if climate is None or rain is None:
        checks += [na(i, "no rain series or climate") for i in ("5b", "5c", "5d")]
    else:
        x = region_days(panel, regions, rain.name)
        wet = x[x > 0]
        scale = math.log(max(len(wet), 2)) + 0.5772
        band = WET_BAND if f.periods >= 365 else WET_BAND_PARTIAL
        checks += [
            Check("5b", float(np.mean(x > 0)), lo=climate.wet_days * band[0], hi=climate.wet_days * band[1]),
            Check("5c", float(wet.mean()) if len(wet) else None, lo=climate.wet_mm * WET_MM_BAND[0],
                  hi=climate.wet_mm * WET_MM_BAND[1]),
            Check("5d", float(wet.max() / climate.wet_mm) if len(wet) else None, lo=RAIN_MAX_BAND[0] * scale,
                  hi=RAIN_MAX_BAND[1] * scale, detail=f"{len(wet)} wet region-days, max {fmt(wet.max() if len(wet) else None)} mm"),
        ]  # fmt: skip
    temp = next((v for v in f.variables(shape="temperature") if v.name in panel.columns), None)
    if climate is None or temp is None:
        return checks + [na(i, "no temperature series or climate") for i in ("5e", "5f")]
    daily = (
        panel.select("unit_id", "day", pl.col(temp.name).cast(pl.Float64))
        .drop_nulls()
        .join(regions, on="unit_id")
        .group_by("region", "day")
        .agg(pl.col(temp.name).median())
        .group_by("day")
        .agg(pl.col(temp.name).mean())
        .filter(pl.col("day").is_between(0, f.periods - 1))
        .sort("day")
    )
    days, values = daily["day"].to_numpy(), daily[temp.name].to_numpy()
    dates = np.datetime64(f.start) + days.astype("timedelta64[D]")
    month = dates.astype("datetime64[M]").astype(int) % 12
    doy = (dates - dates.astype("datetime64[Y]")).astype(int)
    climatology = climate.mean_c + climate.swing_c * np.cos(
        2 * np.pi * (doy - WARMEST_DOY[climate.hemisphere]) / 365.25
    )
    full = [m for m in range(12) if (month == m).sum() >= MIN_MONTH_DAYS]
    observed = [values[month == m].mean() for m in full]
    expected = [climatology[month == m].mean() for m in full]
    span = max(expected) - min(expected) if len(full) >= 2 else 0.0
    checks.append(
        Check("5e", (max(observed) - min(observed)) / span, lo=TEMP_RANGE_BAND[0], hi=TEMP_RANGE_BAND[1],
              detail=f"months {len(full)}: observed {min(observed):.1f}..{max(observed):.1f} C, climate "
              f"{min(expected):.1f}..{max(expected):.1f} C")
        if span > 1
        else na("5e", "the months observed span too little of the year")
    )  # fmt: skip
    limit = max(TEMP_LEVEL_C, 0.2 * climate.swing_c)
    checks.append(Check("5f", float(values.mean() - climatology.mean()), lo=-limit, hi=limit))
    return checks


def region_days(panel: pl.DataFrame, regions: pl.DataFrame, name: str) -> np.ndarray:
    """One value per region and day (the median over the region's units): the series a weather feed holds."""
    x = panel.select("unit_id", "day", pl.col(name).cast(pl.Float64)).drop_nulls().join(regions, on="unit_id")
    return x.group_by("region", "day").agg(pl.col(name).median())[name].to_numpy()


# --- 6 tails ---------------------------------------------------------------------------------------------


def tails(f: Files) -> list[Check]:
    ds = f.dataset
    skew, share = {}, {}
    for v in f.variables(observe="duration"):
        table = ds.events if v.grain == "event" else ds.panel
        if v.name not in table.columns:
            continue
        x = table[v.name].cast(pl.Float64).drop_nulls().to_numpy()
        cv = v.sd / v.mean if v.mean > 0 else 0.5
        s2 = math.log1p(cv**2)
        reference = (math.exp(s2) + 2) * math.sqrt(math.expm1(s2))  # a log-normal's skewness at that spread
        skew[v.name] = skewness(x) / reference
    checks = [worst("6a", skew, lo=SKEW_SHARE_MIN, none="no duration column")]
    zero, tail = {}, {}
    for v in f.variables(observe="sporadic"):
        table = ds.events if v.grain == "event" else ds.panel
        if v.name in table.columns:
            x = table[v.name].cast(pl.Float64).drop_nulls().to_numpy()
            zero[v.name], tail[v.name] = float(np.mean(x == 0)), skewness(x)
            share[v.name] = zero[v.name]
    if zero:
        name = max(zero, key=lambda k: max(SPORADIC_ZERO_BAND[0] - zero[k], zero[k] - SPORADIC_ZERO_BAND[1]))
        checks.append(Check("6b", zero[name], lo=SPORADIC_ZERO_BAND[0], hi=SPORADIC_ZERO_BAND[1], detail=name))
    else:
        checks.append(na("6b", "no sporadic column"))
    checks.append(worst("6c", tail, lo=SPORADIC_SKEW_MIN, none="no sporadic column"))
    return checks


# --- 7 keys and names ------------------------------------------------------------------------------------


def tokens(name: str) -> list[str]:
    """A column name's words: split at separators and at camelCase humps."""
    return [
        t.lower()
        for part in re.split(r"[\s_\-./]+", name)
        for t in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", part)
    ]


def vocabulary(f: Files) -> set[str]:
    """The words the world writes in full: descriptions, units, data-dictionary prose (not the column
    names themselves), entity and variable names, regions, the persona."""
    c = f.contract
    text = [v.description + " " + v.unit + " " + v.name for v in c.variables]
    text += [e.name + " " + e.key + " " + e.table for e in c.entities] + c.regions
    text += [c.persona.role, c.persona.organisation, c.persona.concern, c.parties.since]
    text += [p.name + " " + p.doc for p in c.parties.columns]
    text += [m.name + " " + m.unit for m in (c.measures.capacity, c.measures.amount)]
    text += [col.doc for d in c.deliverables for col in [*d.columns, *d.fields]]
    for d in c.deliverables:
        if d.grain == "dictionary":
            for line in read_text(f.world, d.file).splitlines():
                cells = [x.strip() for x in line.strip().strip("|").split("|")]
                text.append(" ".join(cells[1:]) if line.startswith("|") else line)
    world = {w for t in text for w in re.findall(r"[a-z]+", t.lower().replace("_", " "))}
    return world | COMMON_WORDS | pack_prose()


PROSE_FIELDS = {"title", "description", "doc", "note", "label"}


@functools.cache
def pack_prose() -> frozenset[str]:
    """Every word the shipped domain packs write in prose (descriptions, docs, notes; never column names)."""
    words: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in PROSE_FIELDS and isinstance(value, str):
                    words.update(re.findall(r"[a-z]+", value.lower()))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for pack in builtin_packs().values():
        walk(pack.model_dump())
    return frozenset(words)


def truncated(token: str, words: set[str] | frozenset[str], context: set[str]) -> str | None:
    """The word `token` was cut from: it is no word, number or standard abbreviation itself, but the start of
    a longer word its column's own description uses (`context`), and not another form of that word (dish:
    dishes, fail: failure, drop: dropped are forms, not cuts; sho: shop, resta: restaurant are cuts)."""
    t = token.lower()
    if len(t) < 2 or t.isdigit() or t in words or t in ABBREVIATIONS or (t[0] == "v" and t[1:].isdigit()):
        return None
    longer = sorted(w for w in context if w.startswith(t) and len(w) > len(t))
    forms = [w for w in longer if w[len(t) :] in INFLECTIONS or (w[len(t)] == t[-1] and w[len(t) + 1 :] in INFLECTIONS)]
    return longer[0] if longer and not forms else None


def column_context(f: Files, c) -> set[str]:
    """The words a column's description gives it: its data-dictionary line, what it holds (the canonical
    column and, for a variable, its description) and the entity it keys."""
    table, column = c.source.split(".", 1)
    text = [c.doc, column, table]
    if column.lstrip("@") in {v.name for v in f.contract.variables}:
        text.append(f.contract.variable(column.lstrip("@")).description)
    text += [e.name for e in f.contract.entities if e.table == table or column.startswith(e.name)]
    text += [e.name for e in f.contract.entities if column in ("unit_id", "party_id", "event_id")]
    return {w for t in text for w in re.findall(r"[a-z]+", t.lower().replace("_", " "))}


def keys_names(f: Files) -> list[Check]:
    words = vocabulary(f)
    cut, total = {}, 0
    for d, _ in f.frames:
        for name in read_observed(f.world, d).columns:
            total += 1
            # A column renamed mid-year carries the old name inside the new one (prepMinutes_v2).
            owner = next((c for c in d.columns if c.name == name), None) or next(
                (c for c in d.columns if normalise(c.name) in normalise(name)), None
            )
            context = column_context(f, owner) if owner is not None else set()
            for t in tokens(name):
                whole = truncated(t, words, context)
                if whole:
                    cut[f"{d.file}:{name}"] = f"{t}<{whole}"
    detail = ", ".join(f"'{k}' ({v})" for k, v in sorted(cut.items())[:6])
    checks = [Check("7a", len(cut) / max(total, 1), hi=0.0, detail=detail or f"{total} column names")]
    ordinal, total = [], 0
    for d, _ in f.frames:
        raw = read_observed(f.world, d)
        for c in d.columns:
            if c.name not in raw.columns or template(c) is None or is_text_key(c):
                continue
            numbers = raw.select(key_to_int(pl.col(c.name))).to_series().drop_nulls().unique()
            total += 1
            if len(numbers) and numbers.min() == 1 and numbers.max() == len(numbers):
                ordinal.append(f"{d.file}:{c.name}")
    checks.append(
        Check("7b", len(ordinal) / total, hi=ORDINAL_SHARE_MAX, detail=", ".join(ordinal[:4]) or f"{total} key columns")
        if total
        else na("7b", "no numbered keys")
    )
    return checks + [shared_unit_codes(f)]


def shared_unit_codes(f: Files) -> Check:
    """Systems showing the master's unit code (in whatever format) rather than ids of their own or names."""
    codes = set(f.master["unit_id"].to_list())
    shared, keyed, columns = [], set(), 0
    for d, _ in f.frames:
        if d.grain == "units":
            continue
        raw = read_observed(f.world, d)
        for c in (c for c in d.columns if c.source.endswith(".unit_id") and c.name in raw.columns):
            columns += 1
            keyed.add(d.system)
            numbers = raw.select(key_to_int(pl.col(c.name))).to_series().drop_nulls().unique().to_list()
            if numbers and np.mean([x in codes for x in numbers]) >= MASTER_CODE_SHARE:
                shared.append(d.system)
    if not columns:
        return na("7c", "no unit keys outside the master")
    own = sorted(keyed - set(shared))
    return Check(
        "7c", len(shared) / columns, hi=SHARED_CODES_MAX, detail=f"own ids or names: {', '.join(own) or 'none'}"
    )


# --- 8 parties -------------------------------------------------------------------------------------------


def parties(f: Files) -> list[Check]:
    if not f.of("parties"):
        return [na(i, "no party file") for i in ("8a", "8b", "8c", "8d", "8e")]
    table = f.of("parties")[0][1].filter(pl.col("party_id").is_not_null())
    table = table.unique(subset=["party_id"], keep="first", maintain_order=True)
    events = f.events.filter(pl.col("party_id").is_not_null()).select("party_id", "unit_id", "day")
    joined = events.join(table.select("party_id", "region", "signup_day"), on="party_id")
    matched = joined.height / max(events.height, 1)
    before = joined.filter(pl.col("signup_day").is_not_null())
    checks = [
        Check("8a", float((before["day"] < before["signup_day"]).mean()), hi=SIGNUP_MAX,
              detail=f"{matched:.1%} of events find their party"),
    ]  # fmt: skip
    units = f.master.select("unit_id", pl.col("region").alias("unit_region"))
    located = joined.join(units, on="unit_id").drop_nulls(["region", "unit_region"])
    if located.height:
        at = located["unit_region"].value_counts(normalize=True).rename({"unit_region": "r", "proportion": "e"})
        of = table["region"].value_counts(normalize=True).rename({"region": "r", "proportion": "p"})
        chance = float(at.join(of, on="r").select((pl.col("e") * pl.col("p")).sum()).item())
        home = f.contract.parties.home_share
        expected = home + (1 - home) * chance
        observed = float((located["region"] == located["unit_region"]).mean())
        checks.append(Check("8b", observed, lo=expected - HOME_TOLERANCE, hi=expected + HOME_TOLERANCE,
                            detail=f"expected {expected:.2f} (home_share {home:.2f}, chance {chance:.2f})"))  # fmt: skip
    else:
        checks.append(na("8b", "no regions to compare"))
    per_party = events.group_by("party_id").len()["len"].to_numpy()
    counts = np.concatenate([per_party, np.zeros(max(table.height - len(per_party), 0))])
    sim = simulated_parties(f, table.height, len(events))
    active, sim_active = counts[counts > 0], sim[sim > 0]
    tail = np.percentile(active, 99) / np.median(active)
    sim_tail = np.percentile(sim_active, 99) / np.median(sim_active)
    checks.append(
        Check(
            "8c",
            float(tail),
            lo=sim_tail * TAIL_BAND[0],
            hi=sim_tail * TAIL_BAND[1],
            detail=f"{table.height} parties, median {np.median(active):.0f}; simulated {sim_tail:.1f}",
        )
    )
    checks.append(Check("8d", float(active.max()), hi=MAX_FACTOR * float(sim.max()),
                        detail=f"simulated max {sim.max():.0f}"))  # fmt: skip
    return checks + [busy_days(f, events)]


def busy_days(f: Files, events: pl.DataFrame) -> Check:
    """A person orders, applies, works a shift a couple of times a day at most: the share of events on a
    person's day with more than two of them (parties named as people in the contract only)."""
    party = f.contract.entity("party")
    if party.name_style != "person":
        return na("8e", f"parties are {party.name_style or 'unnamed'} ({party.name}), not people")
    per_day = events.group_by("party_id", "day").len()
    busy = int(per_day.filter(pl.col("len") > PERSON_DAY_MAX)["len"].sum())
    return Check("8e", busy / max(events.height, 1), hi=BUSY_SHARE_MAX,
                 detail=f"{party.name}: up to {per_day['len'].max()} in a day")  # fmt: skip


def simulated_parties(f: Files, n: int, events: int) -> np.ndarray:
    """Events per party if each party's activity is gamma(loyalty) and it is active from its sign-up (drawn
    evenly over history_days before the start and the timeline) to the end."""
    rng = np.random.default_rng(PARTY_SIM_SEED)
    shape = f.contract.parties
    signup = rng.integers(-shape.history_days, f.periods, size=n)
    exposure = (f.periods - np.maximum(signup, 0)) / f.periods
    weight = rng.gamma(shape.loyalty, 1.0, n) * exposure
    return rng.multinomial(events, weight / weight.sum()).astype(float)


# --- a world, a build ------------------------------------------------------------------------------------

MEASURES = (event_times, daily_panels, counts_rates, feedback, shared_series, tails, keys_names, parties)


def measure_world(path: Path) -> dict:
    world = load_world(path)
    if world.contract is None:
        raise SystemExit(f"{path}: invalid contract ({world.contract_error})")
    f = Files(world)
    checks: list[Check] = []
    for measure in MEASURES:
        try:
            checks += measure(f)
        except Exception as exc:  # noqa: BLE001 - one broken statistic must not hide the others
            checks.append(na(f"{measure.__name__}", f"error: {type(exc).__name__}: {exc}"))
    party = f.of("parties")
    party_columns = sorted(
        source_column(c.source) for c in party[0][0].columns if c.source.split(".")[1] not in ("party_id", "name")
    ) if party else []  # fmt: skip
    return {
        "world": world.meta.get("world_id", path.name),
        "index": world.meta.get("index"),
        "domain": f.contract.domain,
        "size": f.contract.size,
        "parties": party[0][1]["party_id"].n_unique() if party else None,
        "party_columns": party_columns,
        "checks": [c.row() for c in checks],
    }


def world_paths(paths: list[Path], limit: int | None) -> list[Path]:
    out = []
    for path in paths:
        if is_world_dir(path):
            out.append(path)
            continue
        worlds = sorted(p for p in (path / "worlds").iterdir() if p.is_dir() and not p.name.startswith("."))
        if limit is not None:
            worlds = [w for w in worlds if json.loads((w / "world.json").read_text()).get("index", 0) < limit]
        out += worlds
    return out


def build_checks(worlds: list[dict]) -> list[dict]:
    rows = []
    by_size = defaultdict(list)
    for w in worlds:
        if w["parties"]:
            by_size[w["size"]].append(w["parties"])
    for size, sizes in sorted(by_size.items()):
        cv = statistics.pstdev(sizes) / statistics.mean(sizes) if len(sizes) >= 3 else None
        check = Check(
            "B1", cv, lo=PARTY_SIZE_CV_MIN, detail=f"{size}: {len(sizes)} worlds, {min(sizes)}..{max(sizes)} parties"
        )
        rows.append(check.row() | {"size": size})
    sets = {w["domain"]: tuple(w["party_columns"]) for w in worlds}
    value = len(set(sets.values())) / len(sets) if len(sets) >= 3 else None
    rows.append(
        Check("B2", value, lo=PARTY_SETS_MIN, detail=f"{len(set(sets.values()))} sets over {len(sets)} domains").row()
    )
    return rows


def summarise(worlds: list[dict]) -> dict:
    by_check, by_domain = {}, {}
    for check_id in CHECKS:
        rows = [(w, c) for w in worlds for c in w["checks"] if c["id"] == check_id]
        applicable = [(w, c) for w, c in rows if c["passed"] is not None]
        if not check_id.startswith("B"):
            values = [c["value"] for _, c in applicable]
            failing = [(w["world"], c["value"]) for w, c in applicable if not c["passed"]]
            by_check[check_id] = {
                "name": CHECKS[check_id][0], "target": CHECKS[check_id][1], "worlds": len(applicable),
                "passed": sum(c["passed"] for _, c in applicable),
                "median": statistics.median(values) if values else None, "failing": failing,
                "sources": sorted({c["source"] for _, c in applicable}),
            }  # fmt: skip
    for domain in sorted({w["domain"] for w in worlds}):
        mine = [w for w in worlds if w["domain"] == domain]
        cells = {}
        for g in GROUPS:
            rows = [c for w in mine for c in w["checks"] if c["id"].startswith(g) and c["passed"] is not None]
            cells[g] = [sum(c["passed"] for c in rows), len(rows)]
        failing = sorted({c["id"] for w in mine for c in w["checks"] if c["passed"] is False})
        errors = sorted({c["name"] for w in mine for c in w["checks"] if c["detail"].startswith("error:")})
        by_domain[domain] = {"worlds": len(mine), "groups": cells, "failing": failing, "errors": errors}
    return {"by_check": by_check, "by_domain": by_domain}


def markdown(worlds: list[dict], summary: dict, build: list[dict], by_world: bool) -> str:
    lines = [
        f"{len(worlds)} worlds, {len(summary['by_domain'])} domains; each target is derived from the world's contract.",
        "",
        "| check | statistic | target | worlds passing | median | read from |",
        "|---|---|---|---|---|---|",
    ]
    for check_id, s in summary["by_check"].items():
        lines.append(
            f"| {check_id} | {s['name']} | {s['target']} | {s['passed']}/{s['worlds']} | {fmt(s['median'])} "
            f"| {', '.join(s['sources']) or '-'} |"
        )
    lines += ["", "| domain | worlds | " + " | ".join(f"{g} {n}" for g, n in GROUPS.items()) + " | failing |"]
    lines.append("|---|---|" + "---|" * len(GROUPS) + "---|")
    for domain, s in summary["by_domain"].items():
        cells = " | ".join(f"{a}/{b}" if b else "-" for a, b in s["groups"].values())
        lines.append(f"| {domain} | {s['worlds']} | {cells} | {', '.join(s['failing'])} |")
    lines += ["", "| build check | value | target | passed | detail |", "|---|---|---|---|---|"]
    for r in build:
        lines.append(
            f"| {r['id']} {r['name']} | {fmt(r['value'])} | {CHECKS[r['id']][1]} | {r['passed']} | {r['detail']} |"
        )
    failing = [(w, c) for w in worlds for c in w["checks"] if c["passed"] is False]
    errors = [(w, c) for w in worlds for c in w["checks"] if c["detail"].startswith("error:")]
    lines += ["", f"Failing measurements ({len(failing)}):", ""]
    for w, c in failing:
        lines.append(f"- {w['world']} {c['id']} {c['name']}: {fmt(c['value'])} not in [{fmt(c['lo'])}, {fmt(c['hi'])}]"
                     f" ({c['source']}) {c['detail']}")  # fmt: skip
    for w, c in errors:
        lines.append(f"- ERROR {w['world']} {c['name']}: {c['detail']}")
    if by_world:
        for w in worlds:
            lines += ["", f"### {w['world']}", ""]
            for c in w["checks"]:
                state = {True: "pass", False: "FAIL", None: "n/a"}[c["passed"]]
                lines.append(f"- {c['id']} {state} {fmt(c['value'])} [{fmt(c['lo'])}, {fmt(c['hi'])}] {c['detail']}")
    return "\n".join(lines)


def report(paths: list[Path], limit: int | None = None) -> dict:
    worlds = [measure_world(p) for p in world_paths(paths, limit)]
    return {"worlds": worlds, **summarise(worlds), "build": build_checks(worlds)}


def main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="build directories or world directories")
    parser.add_argument("--worlds", type=int, default=None, help="first N worlds of each build")
    parser.add_argument("--json", type=Path, default=None, help="write the measurements here")
    parser.add_argument("--by-world", action="store_true", help="also list every world's measurements")
    args = parser.parse_args(argv)
    result = report(args.paths, args.worlds)
    print(markdown(result["worlds"], result, result["build"], args.by_world))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=float))


if __name__ == "__main__":
    main(sys.argv[1:])

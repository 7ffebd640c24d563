"""Analysis tables built from a world: from X (the truth), or from E alone, cleaned or raw.

`from_canonical` reads X. `from_observed` reads only the observed files and the contract's data dictionary
(which column of which file holds which key, date or variable) and, with `clean=True`, does what a careful
analyst would: read keys by their digits, match CRM names to the order system's spelling, merge columns
renamed mid-year, drop re-sent duplicates and detect and undo unit switches. It never reads
projection.json. With `clean=False` it does only the parsing, as a hurried analyst would.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from auditors.checks import parse_observed
from auditors.worldio import World, normalise, read_observed
from contracts.model import Contract, Deliverable

# Conversion factors an analyst recognises when a column's level jumps (cents, milli, hours, pounds...).
KNOWN_FACTORS = (1000.0, 100.0, 60.0, 10.0, 3.6, 2.20462, 1.60934)
# Unit-switch detection (repair_unit_drift), as an analyst would do it by eye on a daily-median chart:
MIN_DAYS = 20  # fewer daily medians than this cannot show a switch
MAX_NONPOSITIVE_SHARE = 0.2  # a column that is often zero or negative has no log scale to jump on
EDGE_DAYS = 7  # a switch is looked for at least a week from either end, and judged on a week each side
MIN_JUMP = 1.8  # a switch multiplies the level by at least 1.8 (conversion factors are 2.2 or more)
SHARPNESS = 0.3  # the week-on-week step must carry the whole jump (within 30%): switches are not gradual
FACTOR_MATCH = 0.15  # the step must be within 0.15 log-units of a known conversion factor
UNIT_WINDOW_DAYS = 14  # each unit's level is compared two weeks before and after the switch
UNIT_STEP_SHARE = 0.5  # a unit switches if its level moves at least half the factor, in its direction
UNITS_SWITCHING = 0.8  # a system migration moves at least 80% of units on the same day
SUFFIXES = re.compile(r"\b(inc|llc|ltd|plc|group|co|and sons|corp)\b\.?")


@dataclass
class Dataset:
    """units (unit_id, capacity, unit variables), panel (unit_id x day grid) and events (one row per event)."""

    units: pl.DataFrame
    panel: pl.DataFrame
    events: pl.DataFrame
    capacity: str


def from_canonical(world: World) -> Dataset:
    contract = world.contract
    assert contract is not None
    t = world.canonical
    capacity = _capacity_name(contract)
    unit_vars = [v.name for v in contract.variables if v.grain == "unit"]
    event_vars = [v.name for v in contract.variables if v.grain == "event"]
    panel_vars = [v.name for v in contract.variables if v.grain == "panel"]
    amount = _amount_name(contract)
    events = t["events"].select("event_id", "unit_id", "day", amount, *event_vars)
    panel = t["panel"].select("unit_id", "day", *panel_vars)
    return Dataset(
        t["units"].select("unit_id", capacity, *unit_vars),
        _with_event_means(panel, events, event_vars),
        events,
        capacity,
    )


def _capacity_name(contract: Contract) -> str:
    return contract.measures.capacity.name


def _amount_name(contract: Contract) -> str:
    return contract.measures.amount.name


def _with_event_means(panel: pl.DataFrame, events: pl.DataFrame, event_vars: list[str]) -> pl.DataFrame:
    if not event_vars:
        return panel
    means = events.group_by("unit_id", "day").agg(pl.col(v).mean() for v in event_vars)
    return panel.join(means, on=["unit_id", "day"], how="left")


# --- from E -----------------------------------------------------------------------------------------


def from_observed(world: World, clean: bool = True) -> Dataset:
    contract = world.contract
    assert contract is not None
    periods = contract.timeline.periods
    by_grain: dict[str, list[tuple[Deliverable, pl.DataFrame]]] = {}
    for d in contract.deliverables:
        frame = parse_observed(world, d, read_observed(world, d))
        frame = (
            _merge_renamed_columns(frame, d)
            if clean
            else frame.select([c.name for c in d.columns if c.name in frame.columns])
        )
        frame = frame.rename(
            {c.name: c.source.split(".", 1)[1].lstrip("@") for c in d.columns if c.name in frame.columns}
        )
        by_grain.setdefault(d.grain, []).append((d, frame))
    volume = contract.volume.name
    amount = _amount_name(contract)
    event_vars = [v.name for v in contract.variables if v.grain == "event"]

    _, events = by_grain["events"][0]
    events = events.with_columns((pl.col("time") // 86400).cast(pl.Int64).alias("day"))
    if clean:
        events = events.unique(subset=["event_id"], keep="first", maintain_order=True)
        for column in [amount] + [v for v in event_vars if v in events.columns]:
            events = repair_unit_drift(events, column)
    names = events.select("unit_id", "name").unique(subset=["unit_id"], keep="first")
    for _, detail in by_grain.get("event_detail", []):
        detail = detail.with_columns((pl.col("time") // 86400).cast(pl.Int64).alias("day")).drop("time")
        if clean:
            detail = detail.unique(subset=["event_id"], keep="first", maintain_order=True)
            for column in [c for c in detail.columns if c in event_vars]:
                detail = repair_unit_drift(detail, column)
        events = events.join(detail.drop("day"), on="event_id", how="left")
    events = events.select("event_id", "unit_id", "day", amount, *[v for v in event_vars if v in events.columns])

    _, units_file = by_grain["units"][0]
    units = _match_units(units_file, names, clean)
    unit_ids = sorted(set(units["unit_id"].drop_nulls().to_list()) | set(names["unit_id"].to_list()))
    grid = pl.DataFrame(
        {"unit_id": np.repeat(unit_ids, periods), "day": np.tile(np.arange(periods), len(unit_ids))},
        schema={"unit_id": pl.Int64, "day": pl.Int64},
    )
    counts = events.group_by("unit_id", "day").len(name=volume)
    panel = grid.join(counts, on=["unit_id", "day"], how="left").with_columns(pl.col(volume).fill_null(0))
    for _, frame in by_grain.get("panel", []):
        # One row per unit and day is needed to join at all; a raw analysis just keeps the first.
        frame = frame.unique(subset=["unit_id", "day"], keep="first", maintain_order=True)
        if clean:
            for column in [c for c in frame.columns if c not in ("unit_id", "day")]:
                frame = repair_unit_drift(frame, column)
        panel = panel.join(frame, on=["unit_id", "day"], how="left")
    for _, frame in by_grain.get("schedule", []):
        panel = _expand_schedule(panel, frame)
    capacity = _capacity_name(contract)
    return Dataset(
        units, _with_event_means(panel, events, [v for v in event_vars if v in events.columns]), events, capacity
    )


def _merge_renamed_columns(frame: pl.DataFrame, d: Deliverable) -> pl.DataFrame:
    """A column renamed mid-year shows up as an extra, mostly empty column whose name contains the old one."""
    known = [c.name for c in d.columns if c.name in frame.columns]
    extras = [c for c in frame.columns if c not in known]
    for extra in extras:
        owner = next((k for k in known if normalise(k) in normalise(extra)), None)
        if owner is not None:
            frame = frame.with_columns(
                pl.coalesce(pl.col(owner), pl.col(extra).cast(frame.schema[owner], strict=False)).alias(owner)
            )
    return frame.select(known)


def clean_name(name: str) -> str:
    text = name.lower().replace("&", " and ")
    text = re.sub(r"[^a-z0-9 ]", " ", text)
    text = SUFFIXES.sub(" ", text)
    return " ".join(text.split())


def _match_units(units_file: pl.DataFrame, names: pl.DataFrame, clean: bool) -> pl.DataFrame:
    """Attach unit ids to CRM rows by name: exact for a raw analysis, normalised then fuzzy when cleaning."""
    reference = dict(zip(names["name"].to_list(), names["unit_id"].to_list(), strict=True))
    if clean:
        by_clean = {clean_name(n): uid for n, uid in reference.items()}
        choices = list(by_clean)
        ids = []
        for n in units_file["name"].to_list():
            key = clean_name(str(n))
            if key not in by_clean:
                close = difflib.get_close_matches(key, choices, n=1, cutoff=0.75)
                key = close[0] if close else key
            ids.append(by_clean.get(key))
    else:
        ids = [reference.get(n) for n in units_file["name"].to_list()]
    out = units_file.with_columns(pl.Series("unit_id", ids, dtype=pl.Int64)).drop("name", "region", strict=False)
    return out.filter(pl.col("unit_id").is_not_null()).unique(subset=["unit_id"], keep="first", maintain_order=True)


def _expand_schedule(panel: pl.DataFrame, schedule: pl.DataFrame) -> pl.DataFrame:
    """Change logs become daily step functions: each value holds from its effective day to the next change."""
    for fld in sorted(schedule["field"].unique().to_list()):
        changes = schedule.filter(pl.col("field") == fld).select("unit_id", "day", pl.col("value").alias(fld))
        changes = changes.sort("unit_id", "day").unique(subset=["unit_id", "day"], keep="last", maintain_order=True)
        panel = (
            panel.join(changes, on=["unit_id", "day"], how="left")
            .sort("unit_id", "day")
            .with_columns(pl.col(fld).forward_fill().backward_fill().over("unit_id"))
        )
    return panel


def repair_unit_drift(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """Find a day after which a column's level jumps by a recognisable factor and convert it back."""
    if column not in frame.columns or not frame.schema[column].is_numeric():
        return frame
    daily = frame.filter(pl.col(column) > 0).group_by("day").agg(pl.col(column).median().alias("m")).sort("day")
    if daily.height < MIN_DAYS or frame.filter(pl.col(column) <= 0).height > MAX_NONPOSITIVE_SHARE * frame.height:
        return frame
    logm = np.log(daily["m"].to_numpy())
    n = len(logm)
    csum = np.concatenate([[0.0], np.cumsum(logm)])
    splits = np.arange(EDGE_DAYS, n - EDGE_DAYS)
    if len(splits) == 0:
        return frame
    jumps = (csum[n] - csum[splits]) / (n - splits) - csum[splits] / splits
    best = int(splits[int(np.argmax(np.abs(jumps)))])
    jump = float(jumps[best - EDGE_DAYS])
    local = float(np.median(logm[best : best + EDGE_DAYS]) - np.median(logm[best - EDGE_DAYS : best]))
    # A unit switch is a sharp step by a conversion factor an analyst recognises; seasons and regime
    # changes are gradual or the wrong size, and are left alone.
    if abs(jump) < np.log(MIN_JUMP) or abs(local - jump) > SHARPNESS * abs(jump):
        return frame
    factor = None
    for known in KNOWN_FACTORS:
        for candidate in (known, 1 / known):
            if abs(local - np.log(candidate)) < FACTOR_MATCH:
                factor = candidate
    if factor is None:
        return frame
    from_day = int(daily["day"][best])
    if "unit_id" in frame.columns and not _every_unit_switches(frame, column, from_day, factor):
        return frame  # a lever changed for some units (a policy), not the unit of the whole system
    fixed = pl.when(pl.col("day") >= from_day).then(pl.col(column) / factor).otherwise(pl.col(column))
    return frame.with_columns(fixed.cast(pl.Float64).alias(column))


def _every_unit_switches(frame: pl.DataFrame, column: str, from_day: int, factor: float) -> bool:
    """A system migration changes every unit's numbers by the same factor on the same day."""
    near = (pl.col("day") >= from_day - UNIT_WINDOW_DAYS) & (pl.col("day") < from_day + UNIT_WINDOW_DAYS)
    window = frame.filter(near & (pl.col(column) > 0))
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

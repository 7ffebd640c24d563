"""Where a world is: the persona's region, resolved to a country whose public holidays, seasons and climate
the world's calendar and weather take.

A pack declares its domain's rhythm (weekly and monthly profiles, the domain's own events) and how its
activity responds to a public holiday (`calendar.holidays`); the country supplies which days those are.
So a college in Melbourne closes on Anzac Day, not Thanksgiving, has its long break in December and January
(its `seasonal` events and a `seasonal_months` profile move half a year), and its weather is Melbourne's.
A pack whose units spread over a country (`regions_scope: national`) takes the country's regions too.
The table of places and countries is `countries.yaml`. A region the table does not know keeps the pack's
climate and regions, its events that no country limits, and no public holidays.
"""

from __future__ import annotations

import functools
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

from contracts.model import DATE_RULE, Calendar, Climate, DateEffect

SEASON_SHIFT_MONTHS = 6  # the southern hemisphere's seasons, half a year from the northern's


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Holiday(_Strict):
    """A public holiday: its date rule (as a DateEffect's), and whether nearly everything closes."""

    date: str = Field(pattern=DATE_RULE)
    name: str
    offset: int = 0
    days: int = Field(default=1, ge=1, le=31)
    major: bool = False


class Country(_Strict):
    name: str
    regions: list[str] = Field(min_length=3)  # its main sub-national regions, where a national firm's units lie
    climate: Climate
    holidays: list[Holiday] = Field(min_length=1)


class PlaceEntry(_Strict):
    country: str
    climate: Climate | None = None


class Table(_Strict):
    places: dict[str, str | PlaceEntry]
    countries: dict[str, Country]


class Place(_Strict):
    country: str
    climate: Climate


@functools.cache
def table() -> Table:
    text = resources.files("worldgen").joinpath("countries.yaml").read_text(encoding="utf-8")
    return Table.model_validate(yaml.safe_load(text))


def place_of(region: str) -> Place | None:
    """The country and climate of a persona's region ("Oregon, United States"): its most specific part the
    table knows (Oregon before the United States), or None."""
    t = table()
    for part in (p.strip() for p in region.split(",")):
        entry = t.places.get(part)
        if entry is None:
            continue
        entry = PlaceEntry(country=entry) if isinstance(entry, str) else entry
        return Place(country=entry.country, climate=entry.climate or t.countries[entry.country].climate)
    return None


def regions_of(region: str, fallback: list[str]) -> list[str]:
    """The regions of the persona's country ("Melbourne, Australia" -> the Australian states), or `fallback`
    where the table does not know the place."""
    place = place_of(region)
    return list(table().countries[place.country].regions) if place is not None else list(fallback)


def localise(calendar: Calendar, climate: Climate | None, region: str) -> tuple[Calendar, Climate | None]:
    """The pack's calendar and climate as they are in the persona's region (see the module docstring)."""
    place = place_of(region)
    country = place.country if place is not None else None
    south = place is not None and place.climate.hemisphere == "south"
    kept = {h.date for h in table().countries[country].holidays} if country is not None else None
    dates = [
        _settled(d, south)
        for d in calendar.dates
        if (not d.countries or country in d.countries)
        and (d.with_holiday is None or kept is None or d.with_holiday in kept)
    ]
    if place is not None and calendar.holidays is not None:
        response = calendar.holidays
        for h in table().countries[place.country].holidays:
            factor = response.major if h.major else response.minor
            dates.append(DateEffect(date=h.date, name=h.name, factor=factor, offset=h.offset, days=h.days))
    monthly = list(calendar.monthly)
    if south and calendar.seasonal_months:
        monthly = monthly[-SEASON_SHIFT_MONTHS:] + monthly[:-SEASON_SHIFT_MONTHS]
    update = {"dates": dates, "monthly": monthly, "country": country}
    return calendar.model_copy(update=update), (place.climate if place is not None and climate is not None else climate)


def _settled(effect: DateEffect, south: bool) -> DateEffect:
    """A pack event as the contract holds it: moved half a year if it follows the seasons in the south, and
    no longer marked (so that a contract's calendar is final and never localised twice)."""
    date = effect.date
    if south and effect.seasonal and date != "easter":
        month = (int(date[:2]) - 1 + SEASON_SHIFT_MONTHS) % 12 + 1
        date = f"{month:02d}{date[2:]}"
    return effect.model_copy(update={"date": date, "countries": [], "with_holiday": None, "seasonal": False})

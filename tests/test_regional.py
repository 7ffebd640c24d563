"""A world is where its persona is: the country's public holidays, the hemisphere's seasons and the place's
climate, never another country's holidays (no Thanksgiving in Melbourne)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from contracts.calendar import date_factors, easter, resolve
from contracts.model import DateEffect
from personas import builtin_personas
from worldgen import regional
from worldgen.contract import WorldSpec, build_contract
from worldgen.packs import builtin_packs, get_pack
from worldgen.seeding import Streams
from worldgen.skeleton import sample_skeleton


def _names(calendar) -> set[str]:
    return {d.name for d in calendar.dates}


def test_easter_is_the_gregorian_date():
    known = {2019: (4, 21), 2024: (3, 31), 2025: (4, 20), 2026: (4, 5), 2000: (4, 23), 2038: (4, 25)}
    for year, (month, day) in known.items():
        assert easter(year) == dt.date(year, month, day)
    good_friday = DateEffect(date="easter", name="Good Friday", factor=0, offset=-2)
    assert resolve(good_friday, 2024) == dt.date(2024, 3, 29)


def test_a_melbourne_college_gets_australian_holidays_a_southern_year_and_a_southern_climate():
    pack = get_pack("education")
    north, _ = regional.localise(pack.calendar, pack.climate, "Oregon, United States")
    south, climate = regional.localise(pack.calendar, pack.climate, "Melbourne, Australia")
    assert south.country == "AU" and north.country == "US"
    assert "Thanksgiving break" in _names(north) and "Thanksgiving break" not in _names(south)
    assert any("Anzac" in name for name in _names(south))
    assert not any("Anzac" in name for name in _names(north))
    assert climate is not None and climate.hemisphere == "south"
    # The academic year's closed month (August up north) is February down south, and the winter break moves.
    assert north.monthly.index(0) == 7 and south.monthly.index(0) == 1
    finals = {d.name: d.date for d in south.dates}["Finals week"]
    assert finals.startswith("06-")
    # The contract's calendar is final: no event is still marked for a country or a season.
    assert all(not d.countries and not d.seasonal for d in south.dates)


def test_public_holidays_take_the_domains_response():
    pack = get_pack("finance")  # banks close on every public holiday
    calendar, _ = regional.localise(pack.calendar, pack.climate, "Germany")
    factors = date_factors(calendar, "2024-01-01", 366)
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(366)]
    closed = {d for d, f in zip(days, factors, strict=True) if f == 0}
    assert dt.date(2024, 10, 3) in closed  # German Unity Day
    assert dt.date(2024, 3, 29) in closed  # Good Friday
    assert dt.date(2024, 7, 4) not in closed  # not a German holiday


@pytest.mark.parametrize(("domain", "event"), [("finance", "Christmas Eve"), ("marketing", "Christmas shopping peak")])
def test_a_christmas_rush_happens_only_where_christmas_is_a_public_holiday(domain, event):
    pack = get_pack(domain)
    for region in ("Germany", "Lagos, Nigeria", "Manila, Philippines"):
        assert event in _names(regional.localise(pack.calendar, pack.climate, region)[0]), region
    for region in ("Tokyo, Japan", "Shanghai, China", "Istanbul, Turkey"):
        assert event not in _names(regional.localise(pack.calendar, pack.climate, region)[0]), region


def test_an_unknown_region_keeps_the_packs_climate_and_no_country_holidays():
    pack = get_pack("education")
    calendar, climate = regional.localise(pack.calendar, pack.climate, "Atlantis")
    assert calendar.country is None and climate == pack.climate
    assert "Thanksgiving break" not in _names(calendar)
    assert len(calendar.dates) == sum(1 for d in pack.calendar.dates if not d.countries)


def test_every_persona_region_resolves_to_a_country_of_the_table():
    regions = {p.region for p in builtin_personas()}
    assert len(regions) > 50
    missing = sorted(r for r in regions if regional.place_of(r) is None)
    assert not missing
    table = regional.table()
    for country in table.countries.values():
        assert 1 <= sum(h.major for h in country.holidays) <= 4, country.name


@pytest.mark.parametrize("domain", sorted(builtin_packs()))
def test_every_pack_declares_how_it_meets_a_public_holiday(domain):
    assert get_pack(domain).calendar.holidays is not None


def test_the_persona_region_reaches_the_contract():
    pack = get_pack("education")
    persona = next(p for p in builtin_personas() if p.domain == "education" and "Australia" in p.region)
    world = WorldSpec(seed=0, index=0, size="small", persona=persona)
    streams = Streams(world.seed, world.index)
    dag = sample_skeleton(pack, streams.rng("skeleton"), persona.focus)
    contract = build_contract(world, pack, dag, streams)
    place = regional.place_of(persona.region)
    assert contract.calendar.country == place.country == "AU"
    assert contract.climate == place.climate and contract.climate.hemisphere == "south"
    assert "Thanksgiving break" not in _names(contract.calendar)


def test_the_calendar_multiplies_the_volume_so_a_quiet_weekday_is_quiet_at_every_unit():
    """Sunday at a tenth of a weekday's volume means a tenth at a busy depot too: the calendar scales each
    unit's volume (an additive calendar left big units busy on Sundays and halved the weekday ratio)."""
    from contracts.calendar import weekdays
    from worldgen.observe import DefectSettings
    from worldgen.pipeline import synthesize

    persona = next(p for p in builtin_personas() if p.domain == "transport")
    world = WorldSpec(seed=0, index=0, size="small", persona=persona)
    contract, state, _ = synthesize(world, get_pack("transport"), DefectSettings())
    volume = contract.volume.name
    rate = state.column("panel", f"{volume}_expected").reshape(contract.entity("unit").count, -1)
    weekday = weekdays(contract.timeline.start, contract.timeline.periods)
    weekly = contract.calendar.weekly
    quiet = int(np.argmin([w if w > 0 else np.inf for w in weekly]))
    busy = int(np.argmax(weekly))
    open_quiet = rate[:, weekday == quiet]
    open_quiet = open_quiet[open_quiet > 0]
    observed = open_quiet.mean() / rate[:, weekday == busy][rate[:, weekday == busy] > 0].mean()
    assert observed == pytest.approx(weekly[quiet] / weekly[busy], rel=0.25)


def test_a_national_firms_units_lie_in_its_countrys_regions():
    """A haulier in Auckland has depots in New Zealand's regions, not the pack's US ones; a college keeps its
    campuses; a place the table does not know keeps the pack's regions."""
    hr, education = get_pack("hr"), get_pack("education")
    assert hr.regions_scope == "national" and education.regions_scope == "local"
    assert regional.regions_of("Auckland", hr.regions) == ["Auckland", "Wellington", "Canterbury", "Waikato", "Otago"]
    assert regional.regions_of("Atlantis", hr.regions) == hr.regions
    persona = next(p for p in builtin_personas() if p.domain == "hr" and p.region == "Melbourne")
    world = WorldSpec(seed=0, index=0, size="small", persona=persona)
    skeleton = sample_skeleton(hr, Streams(0, 0).rng("skeleton"), persona.focus)
    contract = build_contract(world, hr, skeleton, Streams(0, 0))
    assert "Victoria" in contract.regions and "Midwest" not in contract.regions

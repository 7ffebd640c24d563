"""The canonical stage's and the sealing's fast paths give what the plain code gives, bit for bit: the trend
probe draws the focus exactly as the full state has it, the packed sort orders rows as a stable sort, the
person-day cap flags the same events, the profile's feature columns equal those built one by one, and the
profile's grouped scoring of a step or a curve keeps the same candidates as the plain (rows, candidates) fit."""

from __future__ import annotations

import numpy as np
import pytest

from personas import builtin_personas
from worldgen import canonical, phenomena, skeleton
from worldgen.build import persona_for
from worldgen.contract import WorldSpec, build_contract
from worldgen.entities import PERSON_DAY_CAP, _over_cap
from worldgen.estimation import (
    _Curve,
    _decided,
    _feature_matrix,
    _grouped_sse,
    _Lagged,
    _plain_inside,
    _profile_inside,
    _Step,
)
from worldgen.mechanisms import saturation_curve, shift_periods
from worldgen.packs import get_pack
from worldgen.seeding import Streams
from worldgen.sorting import stable_order as _stable_order


def _draft(index: int):
    persona = persona_for(0, index, builtin_personas())
    pack, streams = get_pack(persona.domain), Streams(0, index)
    dag = skeleton.sample_skeleton(pack, streams.rng("skeleton"), persona.focus)
    return build_contract(WorldSpec(0, index, "small", persona), pack, dag, streams), streams


TREND_WORLDS = (0, 2, 4, 5, 6, 7)  # the first six small worlds of seed 0 whose persona has a trend to judge


@pytest.mark.parametrize("index", TREND_WORLDS)
def test_the_trend_probe_draws_the_focus_as_the_full_state_has_it(index):
    draft, streams = _draft(index)
    judged_at = phenomena.trend_layer(draft)
    assert judged_at is not None, f"world {index} has no trend: pick another for TREND_WORLDS"
    focus = draft.persona.focus
    for attempt in range(3):
        full = canonical.generate(draft, streams, attempt)
        probed = canonical.probe(draft, streams, attempt, judged_at, focus)
        table = canonical.table_of(draft.variable(focus))
        for column in (focus, "day") + ((f"responded_{focus}",) if f"responded_{focus}" in full.tables[table] else ()):
            assert np.array_equal(probed.column(table, column), full.column(table, column), equal_nan=True)
        assert phenomena.trend_holds(draft, probed) == phenomena.trend_holds(draft, full)


def _plain_over_cap(chosen: np.ndarray, day: np.ndarray) -> np.ndarray:
    seen: dict[tuple[int, int], int] = {}
    over = np.zeros(len(day), dtype=bool)
    for i, key in enumerate(zip(chosen.tolist(), day.tolist(), strict=True)):
        seen[key] = seen.get(key, 0) + 1
        over[i] = seen[key] > PERSON_DAY_CAP
    return over


@pytest.mark.parametrize("n", [0, 1, 2, 3, 50, 2000])
def test_the_person_day_cap_and_the_packed_sort_match_the_plain_code(n):
    rng = np.random.default_rng(n)
    chosen, day = rng.integers(0, max(n // 8, 1), n), rng.integers(0, 5, n)
    assert np.array_equal(_over_cap(chosen, day), _plain_over_cap(chosen, day))
    key = chosen * 5 + day
    assert np.array_equal(_stable_order(key, n), np.lexsort((np.arange(n), key)))
    huge = key + 2**62  # too large to pack the row number below: the stable argsort instead
    assert np.array_equal(_stable_order(huge, n), np.lexsort((np.arange(n), huge)))


def test_profile_feature_columns_match_the_features_one_by_one():
    rng = np.random.default_rng(7)
    seen = np.round(rng.normal(3.0, 2.0, 5000), 1)  # repeated values, some below the curve's origin
    thetas = np.linspace(0.1, 4.0, 79)
    curve = _Curve(seen, 0.5)
    plain = np.column_stack([saturation_curve(seen, 1.0, theta, 0.5) for theta in thetas])
    got = _feature_matrix(curve, thetas)
    assert got.flags.c_contiguous and np.array_equal(got, plain)
    assert np.array_equal(curve(thetas[3]), plain[:, 3])
    step = _Step(seen)
    plain = np.column_stack([(seen > theta).astype(float) for theta in thetas])
    assert np.array_equal(_feature_matrix(step, thetas), plain)
    assert np.array_equal(step(thetas[5]), plain[:, 5])


def _profile_cases(seed: int):
    """Random parents (continuous, rounded to few distinct values, or nearly constant), candidates inside
    and outside their range, and residuals that a step or a curve of the parent explains strongly or not
    at all: the features the profile scores, with their candidates and a centred residual."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([5, 40, 700, 6000]))
    seen = rng.normal(3.0, 2.0, n)
    if seed % 3 == 1:
        seen = np.round(seen, 0)
    if seed % 7 == 0:
        seen = np.full(n, 2.0)
        seen[: max(n // 50, 1)] = 3.0
    strength = float(rng.choice([0.0, 0.05, 1.0, 20.0]))
    tau = float(np.quantile(seen, rng.uniform(0.1, 0.9)))
    thresholds = np.unique(np.concatenate([np.quantile(seen, np.linspace(0.01, 0.99, 99)), [seen.max() + 1]]))
    y = strength * (seen > tau) + rng.normal(0, 1, n)
    yield _Step(seen), thresholds, y - y.mean()
    origin, kappa = float(np.quantile(seen, rng.uniform(0.0, 0.5))), float(rng.uniform(0.3, 3.0))
    y = strength * saturation_curve(seen, 1.0, kappa, origin) + rng.normal(0, 1, n)
    scales = np.linspace(0.1, 4.0, 79) * float(rng.uniform(0.5, 2.0))
    yield _Curve(seen, origin), scales, y - y.mean()
    yield _Curve(seen, float(seen.max()) + 1.0), scales, y - y.mean()  # every row below the origin: flat


@pytest.mark.parametrize("seed", range(40))
def test_the_profiles_grouped_scoring_keeps_the_plain_candidates(seed):
    for feature, candidates, r in _profile_cases(seed):
        plain = _plain_inside(feature, candidates, r)
        assert np.array_equal(_profile_inside(feature, candidates, r), plain)
        grouped = _grouped_sse(feature, candidates, r)
        if grouped is not None:
            decided = _decided(*grouped, len(r))
            assert decided is None or np.array_equal(decided, plain)


def test_the_profiles_grouped_scoring_decides_typical_profiles_and_defers_near_ties():
    rng = np.random.default_rng(11)
    seen = rng.normal(0.0, 1.0, 4000)
    thresholds = np.quantile(seen, np.linspace(0.01, 0.99, 99))
    y = 1.0 * (seen > 0.2) + rng.normal(0, 1, len(seen))
    r = y - y.mean()
    grouped = _grouped_sse(_Step(seen), thresholds, r)
    assert grouped is not None and _decided(*grouped, len(r)) is not None  # the usual case: no matrix built
    sse, error = grouped
    k = 10.83 / (len(r) - 2)
    cut = sse.min() * (1 + k)
    near = sse.copy()
    far = np.argmax(sse)
    near[far] = cut + 0.5 * error[far]  # a candidate within its error bound of the cut
    assert _decided(near, error, len(r)) is None  # left to the plain computation


@pytest.mark.parametrize("periods", [1, 5, 40])
def test_lagged_columns_match_the_shifted_panel_at_the_rows(periods):
    rng = np.random.default_rng(periods)
    units, n = 7, 500
    panel = rng.normal(0.0, 1.0, (units, periods))
    panel[rng.random(panel.shape) < 0.05] = np.nan  # a gap reads as it is
    unit, day = rng.integers(0, units, n), rng.integers(0, periods, n)
    lagged = _Lagged(panel, 0.25, unit, day)
    lags = np.arange(0, 31, dtype=float)
    plain = np.column_stack([shift_periods(panel, int(lag), 0.25)[unit, day] for lag in lags])
    got = _feature_matrix(lagged, lags)
    assert got.flags.c_contiguous and np.array_equal(got, plain, equal_nan=True)
    some = np.array([30.0, 2.0, 7.0])
    got = _feature_matrix(lagged, some)
    assert got.flags.c_contiguous and np.array_equal(got, plain[:, [30, 2, 7]], equal_nan=True)
    assert np.array_equal(lagged(3.0), plain[:, 3], equal_nan=True)


def _party_contract(name_style: str, regions: list[str], count: int):
    from types import SimpleNamespace

    party = SimpleNamespace(name_style=name_style, count=count)
    shape = SimpleNamespace(loyalty=2.0, home_share=0.8, history_days=50, columns=[])
    return SimpleNamespace(parties=shape, regions=regions, entity=lambda kind: party)


@pytest.mark.parametrize("seed", range(8))
def test_parties_drawn_by_pool_match_the_plain_masks(seed):
    """Same parties and the same stream afterwards, with the cap's redraws (persons), without (companies),
    for a probe (no choice), with regions nobody lives in, units in unlisted regions and a listed twice."""
    from worldgen.entities import _parties_for, _parties_for_plain

    rng = np.random.default_rng(seed)
    regions = ["a", "b", "c", "d"][: 1 + seed % 4]
    count = int(rng.integers(1, 40))
    parties = {
        "party_id": np.arange(1, count + 1, dtype=np.int64),
        "region": np.array(rng.choice(regions[:-1] or regions, count), dtype=object),
        "signup_day": rng.integers(-50, 100, count).astype(np.int64),
    }
    units = np.array(rng.choice(regions + ["elsewhere"], 7), dtype=object)
    n = int(rng.integers(0, 3000))
    unit_idx = rng.integers(0, 7, n)
    day = np.sort(rng.integers(0, 100, n))
    listed = (regions, regions + regions[:1])
    for style, choose, regions_ in [(s, c, r) for s in ("person", "company") for c in (True, False) for r in listed]:
        contract = _party_contract(style, regions_, count)
        fast_rng, plain_rng = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
        fast = _parties_for(contract, units, day, parties, fast_rng, choose, unit_idx)
        plain = _parties_for_plain(contract, units[unit_idx], day, parties, plain_rng, choose)
        assert (fast is None) == (plain is None)
        assert fast is None or np.array_equal(fast, plain)
        assert fast_rng.random() == plain_rng.random()
        again = _parties_for(contract, units[unit_idx], day, parties, np.random.default_rng(seed + 100), choose)
        assert (again is None) == (plain is None) and (again is None or np.array_equal(again, plain))

"""The canonical stage's and the sealing's fast paths give what the plain code gives, bit for bit: the trend
probe draws the focus exactly as the full state has it, the packed sort orders rows as a stable sort, the
person-day cap flags the same events, and the profile's feature columns equal those built one by one."""

from __future__ import annotations

import numpy as np
import pytest

from personas import builtin_personas
from worldgen import canonical, phenomena, skeleton
from worldgen.build import persona_for
from worldgen.contract import WorldSpec, build_contract
from worldgen.entities import PERSON_DAY_CAP, _over_cap, _stable_order
from worldgen.estimation import _Curve, _feature_matrix, _Step
from worldgen.mechanisms import saturation_curve
from worldgen.packs import get_pack
from worldgen.seeding import Streams


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

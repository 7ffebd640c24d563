"""The generator's fast paths against their plain computations, bit for bit: a rating's answer
distribution worked out per distinct level; event UUIDs built as one block of text; the person-day cap updated after a
round of redraws."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from tests.test_canonical_fast_paths import _plain_over_cap
from worldgen import observation
from worldgen.entities import _over_cap, _over_cap_after, _uuids
from worldgen.observation import DISTINCT_MIN_ROWS, _answer_cdf_plain, _answer_columns


def _content_means(rng: np.random.Generator, n: int, distinct: int, points: int) -> np.ndarray:
    levels = rng.uniform(0.01 * points, 0.99 * points, distinct)
    return levels[rng.integers(distinct, size=n)]


@pytest.mark.parametrize("points", [1, 4, 6, 10])
@pytest.mark.parametrize(
    "n", [0, 1, DISTINCT_MIN_ROWS - 1, DISTINCT_MIN_ROWS, DISTINCT_MIN_ROWS + 1, 3 * DISTINCT_MIN_ROWS + 7]
)
@pytest.mark.parametrize("distinct", [1, 8, 650, 100_000])
def test_answer_cdf_per_distinct_level_is_the_plain_one(points, n, distinct):
    rng = np.random.default_rng(points * 1_000_003 + n * 31 + distinct)
    content = _content_means(rng, n, distinct, points)
    fast, plain = _answer_columns(content, points), _answer_cdf_plain(content, points)
    assert fast.shape == plain.T.shape == (points + 1, n)
    assert fast.tobytes() == np.ascontiguousarray(plain.T).tobytes()


def test_answer_cdf_takes_the_distinct_path_and_edge_values():
    """Repeated levels take the per-level path (checked by counting its calls), including the ends of the
    interpolation grid, values between grid points and values differing in the last bit."""
    points = 4
    edges = np.array([0.01 * points, 0.99 * points, 2.0, np.nextafter(2.0, 3.0), np.nextafter(2.0, 1.0), 1e-300])
    rng = np.random.default_rng(1)
    content = np.concatenate([edges, _content_means(rng, 5 * DISTINCT_MIN_ROWS, 40, points)])
    content = content[rng.permutation(len(content))]
    calls = []
    original = observation._answer_columns_plain

    def counted(values, k):
        calls.append(len(values))
        return original(values, k)

    observation._answer_columns_plain = counted
    try:
        fast = _answer_columns(content, points)
    finally:
        observation._answer_columns_plain = original
    assert calls == [len(np.unique(content))]
    assert fast.tobytes() == np.ascontiguousarray(_answer_cdf_plain(content, points).T).tobytes()


def test_answer_cdf_with_a_non_finite_value_is_the_plain_one():
    rng = np.random.default_rng(2)
    content = _content_means(rng, 3 * DISTINCT_MIN_ROWS, 5, 4)
    content[17] = np.nan
    fast, plain = _answer_columns(content, 4), _answer_cdf_plain(content, 4)
    assert np.array_equal(fast, plain.T, equal_nan=True)


@pytest.mark.parametrize("n", [0, 1, 2, 1000])
def test_uuids_are_the_uuid_modules_version_4_text_of_the_draws(n):
    rng = np.random.default_rng(n)
    draws = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64)
    if n:
        draws[0] = [0, 2**63 - 1]  # every bit clear, then set
    expected = [str(uuid.UUID(bytes=row.astype(">u8").tobytes(), version=4)) for row in draws]
    got = _uuids(draws)
    assert got.dtype == object and got.shape == (n,)
    assert got.tolist() == expected
    assert all(type(text) is str for text in got.tolist())


@pytest.mark.parametrize("seed", range(12))
def test_the_cap_after_a_redraw_is_the_cap_ranked_afresh(seed):
    """Redraw the events over the cap (or any events: some back to their own party, some to a party no
    event had, some to the highest party) and compare the updated cap with one ranked from scratch."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000)) if seed else 0
    parties = int(rng.integers(1, 60))
    chosen, day = rng.integers(0, parties, n), np.sort(rng.integers(0, 1 + seed * 10, n))
    over = _over_cap(chosen, day)
    for round_ in range(4):
        redrawn = np.flatnonzero(over) if round_ % 2 == 0 else np.unique(rng.integers(0, max(n, 1), min(n, 5)))
        before = chosen[redrawn].copy()
        chosen = chosen.copy()
        chosen[redrawn] = rng.integers(0, parties + 2, redrawn.size)  # parties + 1: none had it before
        if redrawn.size:
            chosen[redrawn[: redrawn.size // 3]] = before[: redrawn.size // 3]  # the same party drawn again
        updated = _over_cap_after(over, chosen, day, redrawn, before)
        over = _over_cap(chosen, day)
        assert np.array_equal(updated, over)
        assert np.array_equal(over, _plain_over_cap(chosen, day))


def test_a_cached_realised_scale_is_the_one_computed_afresh():
    """Every parent's scale as each child sees it, asked of a finished state whose cache the generation
    filled, equals the scale worked out on an empty cache."""
    from worldgen import canonical
    from worldgen.build import BuildConfig, persona_for, validate_config
    from worldgen.contract import WorldSpec, build_contract
    from worldgen.grid import Grid
    from worldgen.packs import get_pack
    from worldgen.seeding import Streams
    from worldgen.skeleton import sample_skeleton

    pool = validate_config(BuildConfig(n=2, seed=0, size="small"))
    for index in range(2):
        world = WorldSpec(0, index, "small", persona_for(0, index, pool))
        pack = get_pack(world.persona.domain)
        streams = Streams(world.seed, world.index)
        draft = build_contract(
            world, pack, sample_skeleton(pack, streams.rng("skeleton"), world.persona.focus), streams
        )
        state = canonical.generate(draft, streams)
        assert state.scales  # the generation asked some parent more than once or at least once
        grid = Grid(draft.entity("unit").count, draft.timeline.periods)
        grid.set_events(state.column("events", "unit_id") - 1, state.column("events", "day"))
        fresh = canonical.CanonicalState(tables=state.tables)
        for (name, through_panel), cached in state.scales.items():
            seen_as = "panel" if through_panel else "event"
            step = canonical.Step(draft, state, grid, np.random.default_rng(0))
            again = canonical.Step(draft, fresh, grid, np.random.default_rng(0)).realised(name, seen_as)
            assert step.realised(name, seen_as) is cached
            assert again == cached
            fresh.scales.clear()

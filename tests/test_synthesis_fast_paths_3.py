"""The generator's fast paths of the fifth speed round against their plain computations, bit for bit, and
the generator left in the same state: campaign windows drawn from a block of PCG64's raw words instead of
scalar draws; a weighted pick among a few outcomes by counting running sums instead of numpy's search; the
events over a person's daily cap ranked only in crowded hash buckets of their party-day; a relocated fit's
candidate features built on the kept rows only; the sealed contract's deep copy through pickle; a party
pool's search through a guide table; UUIDs' hex digits by arithmetic; events' times of day written to
rows by position; rows gathered by position instead of through a boolean mask."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from personas import builtin_personas
from worldgen import roots, skeleton
from worldgen.build import persona_for
from worldgen.canonical import rows_where
from worldgen.contract import WorldSpec, build_contract
from worldgen.entities import (
    _over_cap,
    _over_cap_ranked,
    _Pool,
    _seconds_of_day,
    _uuids,
    weighted_choice,
)
from worldgen.estimation import _Curve, _feature_matrix, _Lagged, _Step
from worldgen.packs import get_pack
from worldgen.phenomena import _deep_copy
from worldgen.seeding import Streams


def _same_state(a: np.random.Generator, b: np.random.Generator) -> None:
    assert a.bit_generator.state == b.bit_generator.state
    # and the next draws of every kind agree (a half word kept for the next 32-bit draw among them)
    assert a.integers(0, 30) == b.integers(0, 30)
    assert a.random() == b.random()
    assert np.array_equal(a.integers(10, 40, size=7), b.integers(10, 40, size=7))


@pytest.mark.parametrize("seed", range(40))
def test_campaigns_from_raw_words_are_the_scalar_draws(seed):
    g = np.random.default_rng(seed)
    U, T = int(g.integers(1, 80)), int(g.integers(1, 400))
    late = g.random((U, T)) < g.random()
    p_before, p_after = float(g.random()), float(g.random())
    plain, fast = np.random.default_rng(seed + 10_000), np.random.default_rng(seed + 10_000)
    if seed % 2:  # a half word waiting in PCG64's buffer before the campaigns start
        assert plain.integers(0, 7) == fast.integers(0, 7)
    expected = roots._campaigns_plain(U, T, late, p_before, p_after, plain)
    got = roots._campaigns(U, T, late, p_before, p_after, fast)
    assert np.array_equal(expected, got)
    _same_state(plain, fast)


@pytest.mark.parametrize("seed", range(6))
def test_campaigns_from_raw_words_reject_as_lemire_does(seed, monkeypatch):
    """Ranges near 2**32 reject about a third of the 32-bit draws: the raw path redraws as numpy does."""
    monkeypatch.setattr(roots, "CAMPAIGN_LENGTH", (3, 3_000_000_003))
    monkeypatch.setattr(roots, "CAMPAIGN_FIRST_START", 3_000_000_000)
    late = np.random.default_rng(seed).random((50, 5)) < 0.5
    plain, fast = np.random.default_rng(seed), np.random.default_rng(seed)
    expected = roots._campaigns_plain(50, 5, late, 0.4, 0.7, plain)
    assert np.array_equal(expected, roots._campaigns_raw(50, 5, late, 0.4, 0.7, fast.bit_generator))
    _same_state(plain, fast)


def test_campaigns_fall_back_when_the_block_runs_out(monkeypatch):
    """A block too small (as if rejections ran on) leaves the generator untouched and the plain way draws."""
    late = np.random.default_rng(4).random((6, 90)) < 0.5
    plain, fast = np.random.default_rng(3), np.random.default_rng(3)
    assert plain.integers(0, 9) == fast.integers(0, 9)
    before = fast.bit_generator.state
    monkeypatch.setattr(roots, "_campaign_words", lambda U, T: 5)
    assert roots._campaigns_raw(6, 90, late, 0.5, 0.3, fast.bit_generator) is None
    assert fast.bit_generator.state == before
    expected = roots._campaigns_plain(6, 90, late, 0.5, 0.3, plain)
    assert np.array_equal(expected, roots._campaigns(6, 90, late, 0.5, 0.3, fast))
    _same_state(plain, fast)


def test_campaigns_of_another_bit_generator_are_drawn_plainly():
    late = np.ones((4, 60), dtype=bool)
    plain = np.random.Generator(np.random.MT19937(5))
    fast = np.random.Generator(np.random.MT19937(5))
    assert np.array_equal(
        roots._campaigns_plain(4, 60, late, 0.2, 0.9, plain), roots._campaigns(4, 60, late, 0.2, 0.9, fast)
    )
    assert plain.random() == fast.random()


@pytest.mark.parametrize("seed", range(30))
def test_weighted_choice_is_numpys_choice(seed):
    g = np.random.default_rng(seed)
    k = int(g.integers(1, 17))
    weights = g.random(k) * (g.random(k) < 0.8)  # some outcomes never picked
    if not weights.sum():
        weights[0] = 1.0
    p = weights / weights.sum()
    n = int(g.integers(0, 5000))
    plain, fast = np.random.default_rng(seed), np.random.default_rng(seed)
    expected = plain.choice(k, size=n, p=p)
    got = weighted_choice(fast, p, n)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert plain.random() == fast.random()


def test_weighted_choice_on_running_sums_edges():
    """Uniforms exactly on a running sum go to the next outcome, as numpy's right-side search sends them."""
    p = np.array([0.25, 0.25, 0.0, 0.5])

    class Fixed:
        def random(self, n):
            return np.array([0.0, 0.25, 0.5, 0.4999999999, 0.75, 0.9999999999][:n])

        def choice(self, k, size, p):
            raise AssertionError("the fast path should take these")

    cdf = p.cumsum() / p.cumsum()[-1]
    draws = Fixed().random(6)
    assert np.array_equal(weighted_choice(Fixed(), p, 6), cdf.searchsorted(draws, side="right"))


@pytest.mark.parametrize("p", [[0.5, 0.6], [-0.1, 1.1], [0.2] * 20 + [-3.0]])
def test_weighted_choice_leaves_numpys_checks_to_numpy(p):
    with pytest.raises(ValueError):
        weighted_choice(np.random.default_rng(0), np.array(p), 10)


@pytest.mark.parametrize("seed", range(25))
def test_over_cap_on_crowded_buckets_is_the_full_ranking(seed):
    """From a handful of parties (most party-days over the cap) to many (almost none), days in time order
    or shuffled, and party numbers large enough to crowd the hash's buckets with other party-days."""
    g = np.random.default_rng(seed)
    n = int(g.integers(0, 20_000))
    parties = int(g.choice([1, 3, 50, 2_000, 10**6]))
    day = g.integers(0, int(g.integers(1, 400)), n)
    if seed % 2:
        day = np.sort(day)
    chosen = g.integers(0, parties, n) * int(g.choice([1, 7, 2**20]))
    assert np.array_equal(_over_cap(chosen, day), _over_cap_ranked(chosen, day))


def _features(seed: int):
    """A step, a curve (values repeating as a daily parent's do on its events), a lag, and a plain function."""
    g = np.random.default_rng(seed)
    n = int(g.integers(1, 3000))
    seen = np.round(g.normal(0.0, 1.0, n), int(g.integers(0, 3)))
    yield _Step(seen), np.linspace(-1.5, 1.5, 17)
    yield _Curve(seen, float(g.normal())), np.linspace(0.1, 4.0, 79)[g.random(79) < 0.6]
    units, periods = 5, int(g.integers(1, 60))
    panel = g.normal(0.0, 1.0, (units, periods))
    lagged = _Lagged(panel, 0.5, g.integers(0, units, n), g.integers(0, periods, n))
    yield lagged, np.arange(0, 31, dtype=float)
    yield lagged, np.array([4.0, 0.0, 17.0])
    yield (lambda theta: np.sin(seen * theta)), np.array([0.5, 1.0, 2.0])


@pytest.mark.parametrize("seed", range(12))
def test_feature_matrix_on_kept_rows_is_the_whole_one_masked(seed):
    for feature, candidates in _features(seed):
        whole = _feature_matrix(feature, candidates)
        g = np.random.default_rng(seed + 99)
        for keep in (g.random(len(whole)) < 0.9, np.ones(len(whole), dtype=bool), np.zeros(len(whole), dtype=bool)):
            got = _feature_matrix(feature, candidates, keep)
            assert got.flags.c_contiguous and got.dtype == whole.dtype
            assert np.array_equal(got, whole[keep]), (type(feature).__name__, seed)


def _draft(index: int):
    """World `index` of seed 0's draft contract (a default build's persona)."""
    world = WorldSpec(0, index, "default", persona_for(0, index, builtin_personas()))
    pack = get_pack(world.persona.domain)
    streams = Streams(0, index)
    return build_contract(
        world, pack, skeleton.sample_skeleton(pack, streams.rng("skeleton"), world.persona.focus), streams
    )


@pytest.mark.parametrize("index", range(8))
def test_seals_copy_is_a_deep_copy(index):
    draft = _draft(index)
    copied, plain = _deep_copy(draft), draft.model_copy(deep=True)
    assert copied == plain and copied.model_dump_json() == plain.model_dump_json()
    assert copied.model_fields_set == plain.model_fields_set
    copied.edges[0].params["changed"] = 1.0  # nothing shared with the draft
    copied.variables[0].name = "changed"
    assert draft == plain


@pytest.mark.parametrize("seed", range(30))
def test_pool_search_through_its_guide_is_numpys_search(seed):
    """Activities from a few heavy to many tiny ones (a crowded guide falls back), zero activities, keys on
    the running sums themselves, at zero and at the total, and the few or odd keys searched plainly."""
    g = np.random.default_rng(seed)
    P = int(g.integers(1, 30_000))
    activity = g.gamma(float(g.choice([0.05, 0.3, 0.6, 2.5])), 1.0, P)
    activity[g.random(P) < 0.02] = 0.0
    pool = _Pool(np.arange(P), g.integers(-50, 300, P), activity)
    cumulative = pool.cumulative
    keys = g.random(int(g.integers(0, 40_000))) * cumulative[g.integers(0, P, 1)]
    keys[: len(keys) // 10] = cumulative[g.integers(0, P, len(keys) // 10)]  # exactly on a sum
    if len(keys) > 2:
        keys[0], keys[1] = 0.0, cumulative[-1]
    for some in (keys, keys[:100], np.append(keys, np.nan), np.append(keys, -1.0), np.append(keys, 1e300)):
        assert np.array_equal(pool.search(some), np.searchsorted(cumulative, some, side="right"))


def test_uuids_are_the_uuid_modules_text():
    draws = np.random.default_rng(1).integers(0, 2**63, size=(300, 2), dtype=np.int64)
    assert _uuids(draws).tolist() == [
        str(uuid.UUID(bytes=bytes(row), version=4)) for row in draws.astype(">u8").view(np.uint8).reshape(-1, 16)
    ]


def _seconds_of_day_plain(contract, n: int, rng: np.random.Generator) -> np.ndarray:
    """`entities._seconds_of_day` as it was: numpy's weighted choice, rows written through boolean masks."""
    c = contract.calendar
    opening, closing = c.hours
    weights = np.array(
        [c.flat_share] + [p.weight * (1 - c.flat_share) / sum(q.weight for q in c.peaks) for p in c.peaks]
    )
    component = rng.choice(len(weights), size=n, p=weights / weights.sum())
    hours = rng.uniform(opening, closing, n)
    for k, peak in enumerate(c.peaks, start=1):
        mine = component == k
        hours[mine] = rng.normal(peak.hour, peak.sd, int(mine.sum()))
    outside = (hours < opening) | (hours >= closing)
    hours[outside] = rng.uniform(opening, closing, int(outside.sum()))
    return np.minimum((hours * 3600).astype(np.int64), int(closing * 3600) - 1)


@pytest.mark.parametrize("index", range(10))
def test_seconds_of_day_are_the_plain_draws(index):
    """Ten worlds' calendars (their domains' peaks), from no event to many."""
    draft = _draft(index)
    for n in (0, 1, 37, 20_000):
        plain, fast = np.random.default_rng(n + index), np.random.default_rng(n + index)
        assert np.array_equal(_seconds_of_day(draft, n, fast), _seconds_of_day_plain(draft, n, plain))
        _same_state(plain, fast)


@pytest.mark.parametrize("seed", range(10))
def test_rows_where_is_the_boolean_gather(seed):
    """1-d and 2-d, floats with blanks and integers, no row, every row, and the means taken of them."""
    g = np.random.default_rng(seed)
    n = int(g.integers(0, 5000))
    floats = g.normal(0.0, 1.0, (n, int(g.integers(1, 9))))
    floats[g.random(floats.shape) < 0.01] = np.nan
    for values in (floats, np.ascontiguousarray(floats[:, 0]), g.integers(0, 365, n)):
        for mask in (g.random(n) < g.random(), np.zeros(n, dtype=bool), np.ones(n, dtype=bool)):
            got, plain = rows_where(values, mask), values[mask]
            assert got.dtype == plain.dtype and got.flags.c_contiguous == plain.flags.c_contiguous
            assert np.array_equal(got, plain, equal_nan=True)
            if mask.any():
                assert np.array_equal(got.mean(axis=0), plain.mean(axis=0), equal_nan=True)

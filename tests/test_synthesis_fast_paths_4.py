"""The generator's fast paths of the sixth speed round against their plain computations, bit for bit: a
stable order of many keys below 2**32 by two radix passes over 16-bit digits; a rating's answer
distribution worked out per hash group of equal levels; a trend probe's ghosts (variables drawn only to move
their step's stream) making the full draw's draws; a probe's events making the full table's draws without
working out its columns; the kept attempt's full draw taking the steps its probe drew whole and going on
from where it stopped after the events' keys."""

from __future__ import annotations

import numpy as np
import pytest

from tests.test_canonical_fast_paths import TREND_WORLDS, _draft
from worldgen import canonical, observation, phenomena
from worldgen.entities import draw_entities, draw_events
from worldgen.grid import Grid
from worldgen.observation import (
    DISTINCT_MIN_ROWS,
    HASH_BUCKETS_PER_ROW,
    _answer_cdf_plain,
    _answer_columns,
    _hash_buckets,
)
from worldgen.sorting import RADIX_DIGIT_BITS, RADIX_MIN_ROWS
from worldgen.sorting import stable_order as _stable_order

RADIX_TOP = (1 << (2 * RADIX_DIGIT_BITS)) - 1  # the largest key the radix passes take


@pytest.mark.parametrize("n", [RADIX_MIN_ROWS - 1, RADIX_MIN_ROWS, RADIX_MIN_ROWS + 1, 70_000])
@pytest.mark.parametrize("top", [0, 5, (1 << RADIX_DIGIT_BITS) - 1, 1 << RADIX_DIGIT_BITS, 30_000_000, RADIX_TOP])
def test_radix_passes_order_as_a_stable_argsort(n, top):
    """Keys with many ties, with the largest the radix passes take, with digits equal in one half only:
    the order is lexsort's (row number breaking ties)."""
    rng = np.random.default_rng(n * 7 + top % 1009)
    key = rng.integers(0, top, n, endpoint=True)
    key[: n // 3] = key[n // 3 : 2 * (n // 3)]  # ties
    key[-50:] = (key[-50:] >> RADIX_DIGIT_BITS) << RADIX_DIGIT_BITS  # equal low digits
    key[rng.integers(n)] = top
    order = _stable_order(key, n)
    assert order.dtype == np.int64
    assert np.array_equal(order, np.lexsort((np.arange(n), key)))


@pytest.mark.parametrize("top", [RADIX_TOP + 1, 2**62])
def test_keys_beyond_two_digits_take_the_packed_sort(top):
    n = 3 * RADIX_MIN_ROWS
    rng = np.random.default_rng(top % 1013)
    key = rng.integers(0, top, n, endpoint=True)
    key[: n // 2] = key[n // 2 : 2 * (n // 2)]
    key[rng.integers(n)] = top
    assert np.array_equal(_stable_order(key, n), np.lexsort((np.arange(n), key)))


@pytest.mark.parametrize("buckets_per_row", [0.0005, 0.01, HASH_BUCKETS_PER_ROW])
@pytest.mark.parametrize("distinct", [1, 40, 700, 3000])
def test_answer_cdf_grouped_by_hash_is_the_plain_one(monkeypatch, buckets_per_row, distinct):
    """Few buckets for many values force collisions (rows unlike their bucket's holder); signed zeros, tiny
    values and neighbours in the last bit are distinct bits. Every row gets the plain bits."""
    monkeypatch.setattr(observation, "HASH_BUCKETS_PER_ROW", buckets_per_row)
    points = 4
    rng = np.random.default_rng(distinct)
    levels = rng.uniform(0.04, 3.96, distinct)
    edges = np.array([0.0, -0.0, 2.0, np.nextafter(2.0, 3.0), np.nextafter(2.0, 1.0), 1e-300, 0.04, 3.96])
    content = np.concatenate([levels[rng.integers(distinct, size=3 * DISTINCT_MIN_ROWS)], np.tile(edges, 50)])
    content = content[rng.permutation(len(content))]
    fast = _answer_columns(content, points)
    assert fast.tobytes() == np.ascontiguousarray(_answer_cdf_plain(content, points).T).tobytes()


def test_hash_buckets_hold_one_of_their_own_rows():
    values = np.random.default_rng(3).uniform(0, 1, 5000).round(2)
    bucket, holder = _hash_buckets(values)
    held = np.flatnonzero(holder >= 0)
    assert np.array_equal(np.sort(held), np.unique(bucket))
    assert np.array_equal(bucket[holder[held]], held)
    same = values.view(np.uint64)
    assert np.array_equal(bucket[same == same[0]], np.full((same == same[0]).sum(), bucket[0]))


@pytest.mark.parametrize("index", TREND_WORLDS)
def test_a_ghost_moves_the_stream_as_the_full_draw_does(index):
    """Every derived variable `_ghostly` passes leaves its step's generator where the full draw leaves it
    (from the same state, on the committed state of a whole attempt); a reported count's Poisson draws do
    not (which is why they are drawn in full)."""
    draft, streams = _draft(index)
    state = canonical.generate(draft, streams, 0)
    grid = Grid(draft.entity("unit").count, draft.timeline.periods)
    grid.set_events(state.column("events", "unit_id") - 1, state.column("events", "day"))
    parents_of = canonical._parents_of(draft)
    ghostly = 0
    for v in draft.variables:
        if not parents_of[v.name] or v.role == "volume":
            continue
        full_rng, ghost_rng = np.random.default_rng(index), np.random.default_rng(index)
        canonical._draw_into(canonical.Step(draft, state, grid, full_rng), v, parents_of[v.name])
        canonical._draw_ghost(canonical.Step(draft, state, grid, ghost_rng), v)
        same = full_rng.bit_generator.state == ghost_rng.bit_generator.state
        if canonical._ghostly(v):
            ghostly += 1
            assert same, v.name
        elif v.observe == "count":
            assert not same, v.name
    assert ghostly


def test_probes_of_the_trend_worlds_draw_ghosts():
    """The trend probe's test (test_canonical_fast_paths) goes through ghosts: some of its worlds have them."""
    ghosts = set()
    for index in TREND_WORLDS:
        draft, _ = _draft(index)
        focus = draft.persona.focus
        ghosts |= canonical._needed(draft, focus, phenomena.trend_layer(draft))[1]
    assert ghosts


@pytest.mark.parametrize("index", TREND_WORLDS)
@pytest.mark.parametrize("key_style", ["uuid", "sequence"])
def test_a_probes_events_make_the_full_tables_draws(index, key_style):
    """Events drawn for a probe ("draws": person-capped parties chosen, company ones not) leave the stream
    where the full table leaves it, with the same keys; a log-normal draw takes its normal draw's words."""
    draft, _ = _draft(index)
    draft.events.key_style = key_style
    tables = draw_entities(draft, np.random.default_rng(index), named=False)
    units, periods = draft.entity("unit").count, draft.timeline.periods
    counts = np.random.default_rng(index + 1).poisson(2.0, (units, periods))
    full_rng, probe_rng = np.random.default_rng(index + 2), np.random.default_rng(index + 2)
    full = draw_events(counts, draft, Grid(units, periods), tables, full_rng)
    probed = draw_events(counts, draft, Grid(units, periods), tables, probe_rng, "draws")
    assert full_rng.bit_generator.state == probe_rng.bit_generator.state
    assert list(probed) == ["event_id", "unit_id", "day"]
    for column in probed:
        assert probed[column].tobytes() == full[column].tobytes()
    for sigma in (0.0, 0.3, 2.0):
        a, b = np.random.default_rng(index), np.random.default_rng(index)
        a.lognormal(1.5, sigma, 5000)
        b.standard_normal(5000)
        assert a.bit_generator.state == b.bit_generator.state


def _recorded(state: canonical.CanonicalState) -> list:
    """Everything a state holds, in its order (tables, columns, ledger, parameters, inputs, contributions)."""
    tables = [
        (t, c, a.dtype.str, a.tobytes() if a.dtype != object else a.tolist())
        for t, cols in state.tables.items()
        for c, a in cols.items()
    ]
    inputs = [(edge, x.tobytes()) for edge, x in state.inputs.items()]
    parts = [(child, [(p, a.tobytes()) for p, a in d.items()]) for child, d in state.contributions.items()]
    return [tables, state.ledger, list(state.params.items()), inputs, parts, state.digests]


@pytest.mark.parametrize("index", TREND_WORLDS)
def test_a_full_draw_taking_its_probes_whole_steps_is_the_plain_one(index):
    draft, streams = _draft(index)
    layer = phenomena.trend_layer(draft)
    for attempt in range(2):
        probed = canonical.probe(draft, streams, attempt, layer, draft.persona.focus)
        plain = canonical.generate(draft, streams, attempt)
        assert _recorded(canonical.generate(draft, streams, attempt, probed)) == _recorded(plain)


def test_probes_of_the_trend_worlds_draw_whole_steps_and_stop_after_keys():
    """The test above goes through steps taken from the probe, steps gone on from where it stopped after
    the events' keys and steps gone on from the variables they begin with drawn in full (before a ghost,
    before events drawn only for their draws, and where the probe's draws end): some of its worlds' probes
    have each."""
    whole, stopped, begun = 0, set(), set()
    for index in TREND_WORLDS:
        draft, streams = _draft(index)
        layer = phenomena.trend_layer(draft)
        probed = canonical.probe(draft, streams, 0, layer, draft.persona.focus)
        needed, ghosts = canonical._needed(draft, draft.persona.focus, layer)
        whole += len(probed.whole)
        for step in probed.stopped:  # the probe's events: their keys only, or every draw (a variable after)
            names = draft.layers[step - 1]
            volume = next(k for k, name in enumerate(names) if draft.variable(name).role == "volume")
            stopped.add(any(name in needed or name in ghosts for name in names[volume + 1 :]))
        for step, (count, _) in probed.begun.items():  # before a ghost, or where the probe's draws end
            begun.add(draft.layers[step - 1][count] in ghosts)
    assert whole and stopped == {False, True} and begun == {False, True}

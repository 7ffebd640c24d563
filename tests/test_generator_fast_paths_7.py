"""The generator's fast paths of the seventh speed round against their plain computations, bit for bit: the
kept attempt's entities named from its probe's unnamed draws instead of drawn again; the parties' regions
and categories picked through `weighted_choice` instead of `rng.choice(p=...)`; a ledger column hashed from
its own buffer instead of a copy of its bytes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from contracts.hashing import column_sha256
from tests.test_canonical_fast_paths import TREND_WORLDS, _draft
from worldgen import canonical, entities, phenomena


def _same_tables(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for table in a:
        assert list(a[table]) == list(b[table]), table
        for column in a[table]:
            x, y = a[table][column], b[table][column]
            assert x.dtype == y.dtype and x.shape == y.shape, (table, column)
            assert x.tolist() == y.tolist() if x.dtype == object else x.tobytes() == y.tobytes(), (table, column)


@pytest.mark.parametrize("index", TREND_WORLDS[:3])
def test_named_unnamed_draws_are_the_named_draw(index):
    """Naming the unnamed draws gives `draw_entities`' named tables (the same column order too), leaves the
    stream where the named draw leaves it, and the unnamed tables are the `named=False` ones."""
    draft, _ = _draft(index)
    named_rng, unnamed_rng, plain_rng = (np.random.default_rng(index) for _ in range(3))
    named = entities.draw_entities(draft, named_rng)
    unnamed = entities.draw_unnamed(draft, unnamed_rng)
    assert named_rng.bit_generator.state == unnamed_rng.bit_generator.state
    _same_tables(entities.draw_entities(draft, plain_rng, named=False), unnamed.tables)
    _same_tables(named, entities.name_entities(draft, unnamed))
    assert all(named["units"]["name"]) and all(named["parties"]["name"])  # names, not blanks


@pytest.mark.parametrize("index", TREND_WORLDS[:3])
def test_a_kept_attempt_named_from_its_probe_is_drawn_afresh(index):
    """The full draw of an attempt taking its probe's entities equals the full draw without a probe: every
    table and the ledger."""
    draft, streams = _draft(index)
    judged_at = phenomena.trend_layer(draft)
    probed = canonical.probe(draft, streams, 1, judged_at, draft.persona.focus)
    assert probed.unnamed is not None
    taken, fresh = canonical.generate(draft, streams, 1, probed=probed), canonical.generate(draft, streams, 1)
    _same_tables(dict(taken.tables), dict(fresh.tables))
    assert taken.ledger == fresh.ledger


@pytest.mark.parametrize("outcomes", [1, 2, 5, 16])
def test_party_picks_are_numpys_choice(outcomes):
    """`weighted_choice` with the parties' kinds of weights (uneven, a zero, normalised by their sum) picks
    as `rng.choice(k, n, p=...)` and leaves the stream where it does."""
    rng = np.random.default_rng(outcomes)
    for trial in range(20):
        weights = rng.random(outcomes) + (trial % 3 == 0)
        weights[0] = 0.0 if outcomes > 1 and trial % 4 == 1 else weights[0]
        p = weights / weights.sum()
        a, b = np.random.default_rng(trial), np.random.default_rng(trial)
        assert np.array_equal(a.choice(outcomes, 3000, p=p), entities.weighted_choice(b, p, 3000))
        assert a.bit_generator.state == b.bit_generator.state


@pytest.mark.parametrize(
    "values",
    [
        np.arange(7, dtype=np.int8),
        np.array([True, False, True]),
        np.zeros(0),
        np.zeros((0, 3)),
        np.arange(12.0).reshape(3, 4).T,  # not contiguous
        np.array([1.5, -0.0, np.nan], dtype=">f8"),  # big-endian: hashed as little-endian
        np.array(["2020-01-01", "NaT"], dtype="datetime64[D]"),  # no buffer export of its own
        np.array(2.5),
        np.zeros(2, dtype=[("a", "i4"), ("b", "f8")]),
    ],
)
def test_a_column_is_hashed_as_its_bytes(values):
    """`column_sha256` of a numeric column is sha256 of its tag and its little-endian `tobytes()`."""
    arr = np.ascontiguousarray(values)
    arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
    plain = hashlib.sha256(f"{arr.dtype.kind}{arr.dtype.itemsize}:".encode() + arr.tobytes()).hexdigest()
    assert column_sha256(values) == plain

"""The generator's fast paths of the fifth speed round against their plain computations, bit for bit, and
the generator left in the same state: campaign windows drawn from a block of PCG64's raw words instead of
scalar draws."""

from __future__ import annotations

import numpy as np
import pytest

from worldgen import roots


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

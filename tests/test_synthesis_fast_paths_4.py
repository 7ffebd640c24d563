"""The generator's fast paths of the sixth speed round against their plain computations, bit for bit: a
stable order of many keys below 2**32 by two radix passes over 16-bit digits."""

from __future__ import annotations

import numpy as np
import pytest

from worldgen.entities import RADIX_DIGIT_BITS, RADIX_MIN_ROWS, _stable_order

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

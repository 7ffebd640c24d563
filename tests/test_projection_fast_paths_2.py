"""The projection check's undo, its faster ways against the plain ones: key variants mapped once per distinct
text (an Enum of them) against the rows showing a variant replaced, and a column swapped into a copy of the
frame against `with_columns`."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors import checks
from auditors.checks import undo
from contracts.frames import with_column as _with_column

KEY_TEXTS = ["A-1", "a1", "a 1", "B-2", "b2", "é", "", "x", "Ünï  code", None]


def outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)


def _restored(frame, changes, repeats, monkeypatch):
    monkeypatch.setattr(checks, "TEXT_REPEATS", repeats)
    return outcome(lambda: undo(frame, [{"kind": "id_variants", "column": "k", "changes": changes}]))


@pytest.mark.parametrize("seed", range(300))
def test_key_variants_mapped_per_distinct_text_are_those_replaced_row_by_row(seed, monkeypatch):
    """Either way: the same column (values, blanks, name, type, place), the same error for a variant never
    shown, the caller's frame untouched; texts repeated or not, blanks, one text, a swap of two keys."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000 if seed % 10 == 0 else 40))
    kinds = KEY_TEXTS[: int(rng.integers(1, len(KEY_TEXTS) + 1))]
    keys = [kinds[i] for i in rng.integers(0, len(kinds), n)]
    if seed % 13 == 0:
        keys = [None] * n
        keys[int(rng.integers(0, n))] = "A-1"
    frame = pl.DataFrame({"n": range(n), "k": pl.Series(keys, dtype=pl.String), "z": rng.random(n)})
    texts = [t for t in KEY_TEXTS if t is not None]
    pairs = rng.integers(0, len(texts), (rng.integers(1, 5), 2))
    changes = [[texts[a], texts[b], "how"] for a, b in pairs]
    before = frame.clone()
    plain = _restored(frame, changes, 10**9, monkeypatch)  # never the Enum: the rows showing a variant
    fast = _restored(frame, changes, 0, monkeypatch)  # always the Enum
    if isinstance(plain, tuple):
        assert fast == plain
    else:
        assert fast.schema == plain.schema and fast.to_dict(as_series=False) == plain.to_dict(as_series=False)
        back = {variant: original for original, variant, _ in changes}
        assert fast["k"].to_list() == [v if v is None else back.get(v, v) for v in keys]
    assert frame.equals(before)


@pytest.mark.parametrize("seed", range(100))
def test_a_column_swapped_into_a_copy_is_with_columns(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 20))
    frame = pl.DataFrame({"a": rng.random(n), "b": [str(v) for v in rng.integers(0, 5, n)], "c": range(n)})
    frame = pl.concat([frame, frame]) if seed % 2 else frame  # two chunks
    name = ["a", "b", "c", "new"][seed % 4]
    length = frame.height + (1 if seed % 7 == 0 else 0)  # a column of another height: with_columns' error
    column = pl.Series(name, rng.integers(0, 9, length))
    before = frame.clone()
    got = outcome(lambda: _with_column(frame, column))
    want = outcome(lambda: frame.with_columns(column))
    if isinstance(want, tuple):
        assert got == want
    else:
        assert got.schema == want.schema and got.to_dict(as_series=False) == want.to_dict(as_series=False)
    assert frame.equals(before)

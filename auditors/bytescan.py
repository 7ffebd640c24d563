"""Values read off the bytes of text with numpy, where the plain ways (a regex, a count) go value by value or
pass by pass: the numbers at the end of keys, the braces that open no record.

Each function answers only for the inputs it reads exactly as the plain way does, and returns None for any
other (the caller then takes the plain way); tests/test_audit_fast_paths_2.py compares the two.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from contracts.safeio import MIB

BRACE_BLOCK = MIB  # braces are looked for a MiB at a time (their positions: 8 bytes a brace)


NEWLINE = ord("\n")


def braces_not_after(data: bytes, before: bytes, lines: np.ndarray | None = None) -> int:
    """data.count(b"{") - data.count(before + b"{"): the `{` not right after `before`, found with numpy in
    blocks instead of by two counts. `before` holds no `{`, so no two matches of `before{` overlap and each
    ends at its own `{` (which is what makes the two the same number).

    With `lines` (a writable copy of `data`'s bytes), the byte right before each `{` that follows `before`
    is made a line break there, in the same pass (`},{` -> `}\n{`: an array's records as NDJSON lines)."""
    assert b"{" not in before
    array = np.frombuffer(data, dtype=np.uint8)
    lone = 0
    for start in range(0, len(array), BRACE_BLOCK):
        at = np.flatnonzero(array[start : start + BRACE_BLOCK] == ord("{")) + start
        after = np.ones(len(at), dtype=bool)
        for back, byte in enumerate(reversed(before), 1):
            after &= (at >= back) & (array[np.maximum(at - back, 0)] == byte)
        lone += len(at) - int(np.count_nonzero(after))
        if lines is not None:
            lines[at[after] - 1] = NEWLINE  # `after` holds only braces at `len(before)` or later
    return lone


MAX_KEY_DIGITS = 18  # any run of this many digits is a number below 10**18, which an Int64 holds
MAX_KEY_BYTES = 64  # keys longer than this (none of ours) are read the plain ways
MAX_KEY_WIDTHS = 8  # and so are columns of keys of more lengths than this (one numpy pass per length)
ASCII_END = 0x80  # bytes from here on belong to multi-byte UTF-8 characters


def trailing_digit_numbers(keys: pl.Series) -> pl.Series | None:
    """`key_to_int` of a text column read off its bytes with numpy: the keys of each length (a few) as the
    rows of a byte matrix, read column by column (`_fixed_width_numbers`). Blank keys stay blank. None for
    any column that is not all ASCII keys of a few lengths ending, each, in the same columns of digits as
    every key of its length (`\\d` is any Unicode digit; other keys are read the plain ways)."""
    texts = keys.fill_null("0") if keys.null_count() else keys
    if texts.is_empty():
        return None
    lengths, data = _lengths_and_bytes(texts)
    if lengths.min() < 1 or lengths.max() > MAX_KEY_BYTES:
        return None
    widths = np.flatnonzero(np.bincount(lengths))
    if len(widths) > MAX_KEY_WIDTHS:
        return None
    if len(widths) == 1:  # all keys of one length (the generator's): their bytes are the matrix
        numbers = _fixed_width_numbers(data.reshape(-1, int(widths[0])).T)
        if numbers is None:
            return None
    else:
        numbers = np.zeros(len(lengths), dtype=np.int64)
        for width in widths:
            rows = lengths == width
            same_width = np.frombuffer(texts.filter(pl.Series(rows)).str.join("").item().encode(), dtype=np.uint8)
            block = _fixed_width_numbers(same_width.reshape(-1, width).T)
            if block is None:
                return None
            numbers[rows] = block
    found = pl.Series(keys.name, numbers)  # an int64 array: an Int64 column
    return found.set(keys.is_null(), None) if keys.null_count() else found


ARROW_TEXT = {"large_string": np.int64, "string": np.int32}  # offsets-and-bytes layouts: their offset types


def _lengths_and_bytes(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The byte lengths of a text column without nulls, and all its bytes back to back (what
    `str.len_bytes()` and `str.join("")` give), read off the Arrow array polars exports (one copy of the
    bytes, where the two polars calls make three); the polars calls for a layout other than offsets-and-bytes."""
    import pyarrow as pa  # here, not at import: a process that only loads worlds never needs it

    array = texts.clone().to_arrow()  # polars merges the chunks of the series it exports: the caller's stay
    if isinstance(array, pa.Array) and str(array.type) in ARROW_TEXT and array.null_count == 0:
        offset_type = ARROW_TEXT[str(array.type)]
        offsets = np.frombuffer(array.buffers()[1], dtype=offset_type)[array.offset : array.offset + len(array) + 1]
        data = np.frombuffer(array.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        return np.diff(offsets).astype(np.int64), data
    lengths = texts.str.len_bytes().to_numpy().astype(np.int64, copy=False)
    return lengths, np.frombuffer(texts.str.join("").item().encode(), dtype=np.uint8)


def _fixed_width_numbers(keys: np.ndarray) -> np.ndarray | None:
    """The numbers of the trailing digits of ASCII keys of one length (the columns of a byte matrix, one
    row per byte position) when every key's run of digits at its end starts at the same position (each
    key's byte before it is no digit) and is at most MAX_KEY_DIGITS long; None otherwise."""
    if keys.max() >= ASCII_END:
        return None
    digits = np.ascontiguousarray(keys) - np.uint8(ord("0"))  # wraps around below "0": no digit
    not_all_digits = np.flatnonzero(digits.max(axis=1) > 9)
    first = int(not_all_digits[-1]) + 1 if len(not_all_digits) else 0  # where the positions of digits start
    width = keys.shape[0]
    if first == width or width - first > MAX_KEY_DIGITS:
        return None  # a key not ending in a digit, or a run too long for an Int64 to be sure to hold it
    if first > 0 and (digits[first - 1] <= 9).any():
        return None  # a key whose run starts earlier than the others'
    numbers = np.zeros(keys.shape[1], dtype=np.int64)
    for position in range(first, width):
        numbers = numbers * 10 + digits[position]
    return numbers

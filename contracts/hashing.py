"""Content hashes shared by the generator's ledger and the auditor (one definition, two users)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl


def column_sha256(values: np.ndarray) -> str:
    """sha256 of a column's values: dtype-tagged little-endian bytes, or unit-separated text for strings."""
    h = hashlib.sha256()
    if values.dtype.kind in "OUT":
        h.update(b"str:")
        items = values.tolist()
        try:
            text = "\x1f".join(items)  # the common case, all strings: no per-item conversion
        except TypeError:
            text = "\x1f".join("" if v is None else str(v) for v in items)
        h.update(text.encode())
    else:
        arr = np.ascontiguousarray(values)
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        h.update(f"{arr.dtype.kind}{arr.dtype.itemsize}:".encode())
        # The contiguous array's own buffer, as bytes: the same bytes as `arr.tobytes()` without copying
        # them first (a ledger hashes ~15 MB a world).
        h.update(arr.reshape(-1).view(np.uint8))
    return h.hexdigest()


def series_sha256(series: pl.Series) -> str:
    """`column_sha256(series.to_numpy())`; a text column is joined by polars (blanks as empty texts, as
    `column_sha256` writes them) instead of through a Python object per value, and its UTF-8 bytes taken as
    they are (a cast to Binary) instead of decoded into a Python text and encoded back."""
    if series.dtype != pl.String:
        return column_sha256(series.to_numpy())
    texts = series.fill_null("") if series.null_count() else series
    h = hashlib.sha256(b"str:")
    h.update(texts.str.join("\x1f").cast(pl.Binary).item())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """A file's sha256, read by `hashlib.file_digest` into one reused buffer (not a new block per read)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()

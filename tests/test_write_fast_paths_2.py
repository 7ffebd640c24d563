"""The write stage's second set of fast paths give what the plain ways give, byte for byte."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from contracts.frames import with_column
from contracts.hashing import file_sha256
from worldgen.defects import MissingValues, _at, _pick, _values_at
from worldgen.observe import _frame_nan_to_null
from worldgen.write import _Digests, _write_parquet_hashed, write_parquet


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (3 << 20) + 7])
def test_digests_are_the_file_hash(tmp_path: Path, size):
    path = tmp_path / "f.bin"
    path.write_bytes(random.Random(size).randbytes(size))
    digest = _Digests()
    assert file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest(path) == file_sha256(path)
    assert digest(path) == file_sha256(path)  # a second call reuses the first hash


def _series(rng: random.Random, dtype: pl.DataType, n: int, blanks: bool) -> pl.Series:
    pools = {
        pl.Int64: [0, -1, 2**62, 7, -(2**63)],
        pl.Float64: [0.1, -0.0, float("nan"), float("inf"), 1e-300, 1 / 3],
        pl.String: ["", "a", "ünï", "日本", " x "],
        pl.Int32: [0, -5, 2**31 - 1],
        pl.Date: [dt.date(2025, 1, 1), dt.date(1999, 12, 31)],
    }
    values = [rng.choice(pools[dtype]) for _ in range(n)]
    if blanks:
        values = [None if rng.random() < 0.3 else v for v in values]
    return pl.Series("c", values, dtype=dtype)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dtype", [pl.Int64, pl.Float64, pl.String, pl.Int32, pl.Date])
def test_values_at_rows_are_the_gathered_values(seed, dtype):
    rng = random.Random(seed)
    for n in (0, 1, 5, 40):
        for blanks in (False, True):
            series = _series(rng, dtype, n, blanks)
            rows = np.sort(np.array(rng.sample(range(n), k=rng.randint(0, n)), dtype=np.int64))
            fast, plain = _values_at(series, rows), series.gather(rows).to_list()
            assert [type(v) for v in fast] == [type(v) for v in plain]
            assert json.dumps(fast, default=str) == json.dumps(plain, default=str)  # NaN too, as records write it


@pytest.mark.parametrize("seed", range(5))
def test_with_column_is_with_columns(seed):
    rng = random.Random(seed)
    for n in (0, 1, 9):
        frame = pl.DataFrame([_series(rng, t, n, True).alias(f"c{k}") for k, t in enumerate([pl.Int64, pl.String])])
        replacement = _series(rng, pl.Float64, n, True).alias(rng.choice(frame.columns))
        before = frame.clone()
        fast, plain = with_column(frame, replacement), frame.with_columns(replacement)
        assert fast.equals(plain) and fast.schema == plain.schema
        assert frame.equals(before) and frame.schema == before.schema  # the input is left as it was


@pytest.mark.parametrize("seed", range(8))
def test_missing_values_are_the_plain_gather_and_blanks(seed):
    """MissingValues as it was written before the fast paths: the gathered values, then blanks via
    with_columns, with the same draws."""
    rng = random.Random(seed)
    for dtype in (pl.Int64, pl.Float64, pl.String, pl.Null):
        n = rng.choice([0, 1, 30])
        column = (
            pl.Series("v", [None] * n, dtype=pl.Null)
            if dtype == pl.Null
            else _series(rng, dtype, n, bool(seed % 2)).alias("v")
        )
        frame = pl.DataFrame([column, pl.Series("k", list(range(n)), dtype=pl.Int64)])
        defect = MissingValues("v", 0.2)
        out, record = defect.apply(frame, np.random.default_rng(seed))
        rows = _pick(np.random.default_rng(seed), n, 0.2)
        assert record["rows"] == rows.tolist()
        assert json.dumps(record["values"]) == json.dumps(frame["v"].gather(rows).to_list())
        mask = np.isin(np.arange(n), rows)
        blanked = frame.with_columns(pl.when(pl.Series(mask)).then(None).otherwise(pl.col("v")).alias("v"))
        assert out.equals(blanked) and out.schema == frame.schema


@pytest.mark.parametrize("seed", range(6))
def test_frame_without_a_thread_pool_is_the_plain_frame(seed):
    rng = np.random.default_rng(seed)
    for n in (0, 1, 1500):  # polars starts its pool for arrays of more than 1,000 values
        floats = [rng.normal(size=n) for _ in range(rng.integers(0, 5))]
        for values in floats:
            values[rng.random(n) < 0.2] = np.nan
        columns: dict = {f"f{k}": v for k, v in enumerate(floats)}
        columns["f32"] = rng.normal(size=n).astype(np.float32)
        columns["i"] = rng.integers(-5, 5, size=n)
        columns["s"] = np.array([rng.choice(["a", "ünï", ""]) for _ in range(n)], dtype=object)
        columns["series"] = pl.Series("other name", rng.normal(size=n))
        fast, plain = _frame_nan_to_null(columns), pl.DataFrame(columns, nan_to_null=True)
        assert fast.schema == plain.schema and fast.height == plain.height
        comparable = [name for name, dtype in fast.schema.items() if dtype != pl.Object]  # empty text: Object
        assert fast.select(comparable).equals(plain.select(comparable))
        assert [c.null_count() for c in fast.iter_columns()] == [c.null_count() for c in plain.iter_columns()]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dtype", [pl.Int64, pl.Float64, pl.String, pl.Int32, pl.Date])
def test_rows_at_are_the_gathered_rows(seed, dtype):
    rng = random.Random(seed)
    for n in (0, 1, 5, 40):
        series = _series(rng, dtype, n, blanks=bool(seed % 2))
        rows = np.sort(np.array(rng.sample(range(n), k=rng.randint(0, n)), dtype=np.int64))
        fast, plain = _at(series, rows), series.gather(rows)
        assert fast.equals(plain) and fast.dtype == plain.dtype and fast.name == plain.name
        assert fast.to_list() == plain.to_list() or dtype == pl.Float64  # NaN != NaN; equals covers it


@pytest.mark.parametrize("size", [0, 1, 4097, (1 << 20) + 3])
def test_digests_of_bytes_written_are_the_file_hash(tmp_path: Path, size):
    """A file written through `_Digests.write` (from a buffer's memoryview too) hashes as read back from disk."""
    data = random.Random(size).randbytes(size)
    digest = _Digests()
    buffer = io.BytesIO(data)
    digest.write(tmp_path / "b.bin", buffer.getbuffer())
    assert (tmp_path / "b.bin").read_bytes() == data
    assert digest(tmp_path / "b.bin") == file_sha256(tmp_path / "b.bin")
    text = "ünï\n日本 \r\n" * (size % 97)
    digest.write_text(tmp_path / "t.txt", text)
    assert (tmp_path / "t.txt").read_bytes() == text.encode("utf-8")  # newlines as they are, no translation
    assert digest(tmp_path / "t.txt") == file_sha256(tmp_path / "t.txt")


def test_parquet_through_memory_is_the_plain_file(tmp_path: Path):
    """`_write_parquet_hashed` writes the bytes `write_parquet` writes to a path, and their hash."""
    rng = random.Random(3)
    frame = pl.DataFrame([_series(rng, dtype, 300, blanks=True).alias(str(dtype)) for dtype in (pl.Int64, pl.String)])
    write_parquet(frame, tmp_path / "plain.parquet")
    digest = _Digests()
    _write_parquet_hashed(frame, tmp_path / "fast.parquet", digest)
    assert (tmp_path / "fast.parquet").read_bytes() == (tmp_path / "plain.parquet").read_bytes()
    assert digest[tmp_path / "fast.parquet"] == file_sha256(tmp_path / "plain.parquet")

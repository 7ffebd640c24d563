"""The third set of fast paths of the projection and the build give what the plain ways give."""

from __future__ import annotations

import functools
import gc
import os
import random

import numpy as np
import polars as pl
import pytest

from worldgen import build
from worldgen.defects import respelled
from worldgen.observe import _in_order, sort_rows

INTEGER_TYPES = [pl.Int64, pl.Int32, pl.UInt32, pl.Int8]


def _keys(rng: random.Random, n: int, dtype: pl.DataType, spread: int, ordered: bool) -> list[int]:
    spread = min(spread, 100) if dtype == pl.Int8 else spread
    lo = 0 if dtype == pl.UInt32 else -spread
    values = [rng.randint(lo, spread) for _ in range(n)]
    return sorted(values) if ordered else values


def _frame(rng: random.Random, n: int, dtype: pl.DataType, how: str) -> pl.DataFrame:
    """A frame of two integer keys and a payload: in order by (a, b), by a alone, or shuffled."""
    a = _keys(rng, n, dtype, rng.choice([1, 3, 1000]), ordered=how != "shuffled")
    b = _keys(rng, n, dtype, rng.choice([1, 3, 1000]), ordered=False)
    if how == "ordered":  # ascending within each run of equal a
        rows = sorted(zip(a, b, strict=True))
        a, b = [r[0] for r in rows], [r[1] for r in rows]
    payload = [rng.choice(["x", "y", None, "ü"]) for _ in range(n)]
    return pl.DataFrame({"a": pl.Series(a, dtype=dtype), "b": pl.Series(b, dtype=dtype), "p": payload})


def _same(fast: pl.DataFrame, plain: pl.DataFrame) -> None:
    assert fast.equals(plain)
    assert fast.schema == plain.schema
    assert [fast[c].flags for c in fast.columns] == [plain[c].flags for c in plain.columns]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", INTEGER_TYPES)
@pytest.mark.parametrize("how", ["ordered", "first_key_only", "shuffled"])
def test_sort_rows_is_the_stable_sort(seed, dtype, how):
    rng = random.Random(seed)
    for n in (0, 1, 2, 3, 17, 400):
        frame = _frame(rng, n, dtype, how)
        for by in (["a", "b"], ["a"], ["b"], ["b", "a"], ["a", "p"]):
            _same(sort_rows(frame, by), frame.sort(by, maintain_order=True))


def test_sort_rows_takes_its_fast_path_on_sorted_integer_keys():
    frame = pl.DataFrame({"t": [1, 1, 2, 5], "id": [3, 4, 1, 1], "v": [0.5, None, 2.0, float("nan")]})
    assert _in_order(frame, ["t", "id"])
    assert not _in_order(frame, ["id", "t"])
    assert not _in_order(frame.with_columns(pl.col("t").cast(pl.Float64)), ["t"])  # only integer keys decide
    assert not _in_order(frame.with_columns(pl.lit(None, pl.Int64).alias("t")), ["t"])  # blanks: sorted as usual
    assert not _in_order(frame, [])
    _same(sort_rows(frame, ["t", "id"]), frame.sort(["t", "id"], maintain_order=True))
    # the input frame is left as it was (no flag set on the caller's column)
    assert frame["t"].flags == {"SORTED_ASC": False, "SORTED_DESC": False}


@pytest.mark.parametrize("seed", range(4))
def test_sort_rows_ties_keep_their_order(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    frame = pl.DataFrame({"t": np.sort(rng.integers(0, 30, n)), "id": rng.integers(0, 3, n), "row": np.arange(n)})
    ordered = frame.sort(["t", "id"], maintain_order=True)
    frame = pl.DataFrame({c: ordered[c].to_numpy() for c in ordered.columns})  # in order, but not flagged
    assert _in_order(frame, ["t", "id"])
    _same(sort_rows(frame, ["t", "id"]), frame.sort(["t", "id"], maintain_order=True))


def test_freeze_long_lived_keeps_the_collector_working():
    before = gc.get_freeze_count()
    try:
        build._freeze_long_lived()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # objects made after the freeze are still collected
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("seed", range(8))
def test_respelled_is_replace(seed):
    rng = random.Random(seed)
    pool = ["Acme Ltd", "acme ltd", "Bäcker & Söhne", "", " x ", "Farm 1", "Farm 10", "日本"]
    for n in (0, 1, 5, 300):
        values = [None if rng.random() < 0.1 else rng.choice(pool) for _ in range(n)]
        frame = pl.DataFrame({"n": pl.Series(values, dtype=pl.String)})
        if rng.random() < 0.5:
            frame = frame.sort("n")  # a sorted, flagged column, as a master file sorted by name has
        keys = rng.sample(pool, k=rng.randint(0, len(pool)))
        mapping = {k: rng.choice([k.upper(), k + "  ", "Acme Ltd", ""]) for k in keys}
        fast = frame.with_columns(respelled(pl.col("n"), mapping))
        _same(fast, frame.with_columns(pl.col("n").replace(mapping)))


def test_spawn_environment_tunes_the_allocator_and_restores(monkeypatch):
    knob = build.POLARS_ALLOCATOR_KNOB
    for before in (None, build.POLARS_OWN_ALLOCATOR_CONF):  # unset, or as importing polars leaves it
        if before is None:
            monkeypatch.delenv(knob, raising=False)
        else:
            monkeypatch.setenv(knob, before)
        with build._spawn_environment(2):
            assert os.environ[knob] == build.POLARS_ALLOCATOR_CONF  # what the spawned workers inherit
        assert os.environ.get(knob) == before  # never left in the caller's process
    monkeypatch.setenv(knob, build.POLARS_OWN_ALLOCATOR_CONF + ",narenas:1")  # a user's setting, as polars keeps it
    with build._spawn_environment(2):
        assert os.environ[knob] == build.POLARS_OWN_ALLOCATOR_CONF + ",narenas:1"  # the user's own setting wins


def test_spawn_environment_tunes_the_c_allocator_unless_the_user_did(monkeypatch):
    for name in build.C_ALLOCATOR_KNOBS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MALLOC_TOP_PAD_", "4096")  # the user's own
    with build._spawn_environment(2):
        assert os.environ["MALLOC_MMAP_THRESHOLD_"] == build.C_ALLOCATOR_KNOBS["MALLOC_MMAP_THRESHOLD_"]
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == build.C_ALLOCATOR_KNOBS["MALLOC_TRIM_THRESHOLD_"]
        assert os.environ["MALLOC_TOP_PAD_"] == "4096"
        assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    assert not {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"} & set(os.environ)
    assert os.environ["MALLOC_TOP_PAD_"] == "4096"


@functools.cache
def polars_own_allocator_settings() -> str:
    """What importing polars writes into the allocator variable when nobody set it."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != build.POLARS_ALLOCATOR_KNOB}
    code = f"import os, polars; print(os.environ.get({build.POLARS_ALLOCATOR_KNOB!r}, ''))"
    shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return shown.stdout.strip()


def skip_unless_polars_settings_known():
    """A polars release with other allocator defaults only loses the tuning (the driver no longer recognises
    them, so workers keep polars' own); it says so here as a skip rather than failing everyone's CI."""
    own = polars_own_allocator_settings()
    if own != build.POLARS_OWN_ALLOCATOR_CONF:
        pytest.skip(f"this polars starts jemalloc with {own!r}, not POLARS_OWN_ALLOCATOR_CONF: update it")


def test_workers_get_the_allocator_settings(monkeypatch):
    """A spawned worker's polars ends with our settings last (jemalloc takes the last of a repeated option)."""
    import multiprocessing

    skip_unless_polars_settings_known()

    monkeypatch.setenv(build.POLARS_ALLOCATOR_KNOB, build.POLARS_OWN_ALLOCATOR_CONF)
    context = multiprocessing.get_context("spawn")
    with build._spawn_environment(1), context.Pool(1) as pool:
        shown = pool.apply(_allocator_settings)
    assert shown.endswith("," + build.POLARS_ALLOCATOR_CONF)


def _allocator_settings() -> str:
    import polars  # noqa: F401 - its import writes the settings it starts jemalloc with

    return os.environ[build.POLARS_ALLOCATOR_KNOB]


def test_ray_workers_get_the_allocator_knobs_a_local_worker_gets(monkeypatch):
    from worldgen.executors import _worker_environment

    for name in build.C_ALLOCATOR_KNOBS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(build.POLARS_ALLOCATOR_KNOB, build.POLARS_OWN_ALLOCATOR_CONF)  # as importing polars leaves it
    monkeypatch.setenv("MALLOC_TOP_PAD_", "4096")  # the user's own
    env = _worker_environment()
    assert env["GLIBC_TUNABLES"] == build.C_ALLOCATOR_KNOBS["GLIBC_TUNABLES"]
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0")  # the user's list of other tunables: ours added
    assert _worker_environment()["GLIBC_TUNABLES"] == "glibc.pthread.rseq=0:glibc.malloc.hugetlb=1"
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")  # the user's own choice of it wins
    assert _worker_environment()["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert env["MALLOC_MMAP_THRESHOLD_"] == build.C_ALLOCATOR_KNOBS["MALLOC_MMAP_THRESHOLD_"]
    assert env["MALLOC_TOP_PAD_"] == "4096"
    assert env[build.POLARS_ALLOCATOR_KNOB] == build.POLARS_ALLOCATOR_CONF
    with build._spawn_environment(2):  # the same settings as the spawned workers inherit
        assert all(os.environ[knob] == env[knob] for knob in build.allocator_knobs({}))

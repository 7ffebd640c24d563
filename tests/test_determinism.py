"""Same seed, same bytes (whatever N or the worker count); seed streams stay isolated."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.conftest import build


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def worlds(out: Path) -> dict[str, Path]:
    return {p.name: p for p in (out / "worlds").iterdir() if p.is_dir()}


def test_world_k_is_identical_whatever_n_and_workers(small_build, tmp_path):
    other = build(tmp_path / "b", n=3, workers=2)
    mine, theirs = worlds(small_build), worlds(other)
    assert len(theirs) == 3
    for name, path in theirs.items():
        assert tree_hashes(path) == tree_hashes(mine[name]), name


def test_a_different_seed_gives_different_worlds(small_build, tmp_path):
    other = build(tmp_path / "c", n=2, seed=1)
    a = [tree_hashes(p) for p in sorted(worlds(small_build).values())[:2]]
    for path in worlds(other).values():
        hashes = tree_hashes(path)
        assert all(hashes["canonical/events.parquet"] != h["canonical/events.parquet"] for h in a)


def test_defect_settings_never_change_canonical_state(small_build, tmp_path):
    clean = build(tmp_path / "clean", n=2, defect_scale=0.0)
    heavy = build(tmp_path / "heavy", n=2, defect_scale=2.0)
    for name, path in worlds(clean).items():
        a, b = tree_hashes(path), tree_hashes(worlds(heavy)[name])
        canonical = [k for k in a if k.startswith("canonical/")]
        assert canonical and all(a[k] == b[k] for k in canonical)
        assert a["contract.json"] == b["contract.json"]
        observed = [k for k in a if k.startswith("observed/")]
        assert any(a[k] != b[k] for k in observed)


def test_rebuilding_a_deleted_world_restores_its_bytes(tmp_path):
    out = build(tmp_path / "r", n=2)
    victim = sorted(worlds(out).values())[1]
    before = tree_hashes(victim)
    for p in sorted(victim.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    victim.rmdir()
    build(out, n=2)
    assert tree_hashes(victim) == before


def test_event_means_are_the_row_order_sums_whatever_polars_threads_do():
    """The auditor's unit-day means are summed in row order (polars' own group means vary in the last bits
    from run to run, which a scan can turn into a different audit)."""
    import numpy as np
    import polars as pl

    from auditors.dataset import group_means

    rng = np.random.default_rng(0)
    n = 5000
    units, days, x = rng.integers(0, 7, n), rng.integers(0, 30, n), rng.lognormal(0, 1, n)
    x[rng.random(n) < 0.1] = np.nan
    chunks = [
        pl.DataFrame({"unit_id": units[i : i + 500], "day": days[i : i + 500], "x": x[i : i + 500]})
        for i in range(0, n, 500)
    ]
    events = pl.concat(chunks, rechunk=False)
    got = group_means(events, ["x"])
    for row in got.iter_rows(named=True):
        picked = x[(units == row["unit_id"]) & (days == row["day"])]
        picked = picked[np.isfinite(picked)]
        want = None if len(picked) == 0 else float(np.add.reduce(picked, dtype=float) / len(picked))
        assert (row["x"] is None and want is None) or abs(row["x"] - want) < 1e-12
    assert got.height == len({(u, d) for u, d in zip(units.tolist(), days.tolist(), strict=True)})

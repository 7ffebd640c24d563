"""Shared fixtures: small builds made once per session and reused read-only by many tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from worldgen.build import BuildConfig, run_build

# Property tests draw the same examples on every run: a red CI run is reproducible, never a lucky draw.
settings.register_profile("worldgen", derandomize=True)
settings.load_profile("worldgen")


def build(out: Path, n: int, seed: int = 0, workers: int = 1, defect_scale: float = 1.0, domains=()) -> Path:
    run_build(
        BuildConfig(n=n, seed=seed, out=out, workers=workers, size="small", defect_scale=defect_scale, domains=domains)
    )
    return out


@pytest.fixture(scope="session")
def small_build(tmp_path_factory) -> Path:
    """Eight small worlds, seed 0, one worker (five of them eligible for a bench)."""
    return build(tmp_path_factory.mktemp("build") / "out", n=8)


@pytest.fixture(scope="session")
def world_dirs(small_build) -> list[Path]:
    return sorted(p for p in (small_build / "worlds").iterdir() if p.is_dir())

"""numpy's kernels are pinned to the x86-64 baseline whichever package loads first, so bytes do not follow the CPU.

Each case runs in a fresh interpreter: numpy reads its CPU switch once, at its first import.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from contracts import kernels

ROOT = Path(__file__).resolve().parents[1]
X86 = platform.machine().lower() in ("x86_64", "amd64")
pytestmark = pytest.mark.skipif(not X86, reason="the pin is for numpy's x86-64 kernels")


def run(code: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != kernels.ENV} | env
    environ["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine_has_kernels_above_baseline() -> bool:
    """What numpy would run here unpinned (an AVX2 or AVX-512 machine: nearly every x86-64 today)."""
    return bool(
        run(
            "import numpy, json; from contracts.kernels import active_kernels; print(json.dumps({'k': active_kernels()}))",
            **{kernels.ENV: ""},
        )["k"]
    )


@pytest.mark.parametrize("package", ["worldgen", "worldgen.cli", "contracts", "auditors", "rubrics", "personas"])
def test_importing_any_world_package_first_pins_numpy_to_its_baseline(package):
    if not machine_has_kernels_above_baseline():
        pytest.skip("this CPU has no numpy kernels above the baseline to switch off")
    got = run(
        f"import {package}, numpy, os, json; from contracts.kernels import active_kernels; "
        f"print(json.dumps({{'active': active_kernels(), 'env': os.environ.get({kernels.ENV!r})}}))"
    )
    assert got == {"active": "", "env": " ".join(kernels.X86_DISPATCH_TARGETS)}


def test_a_users_own_setting_is_kept():
    got = run(
        f"import worldgen, numpy, os, json; print(json.dumps({{'env': os.environ[{kernels.ENV!r}]}}))",
        **{kernels.ENV: "AVX512_SPR"},
    )
    assert got == {"env": "AVX512_SPR"}


def test_numpy_loaded_first_is_named_by_a_warning_on_build(tmp_path):
    if not machine_has_kernels_above_baseline():
        pytest.skip("this CPU has no numpy kernels above the baseline")
    code = f"""
import numpy, warnings, json
from pathlib import Path
from worldgen.build import BuildConfig, run_build
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    run_build(BuildConfig(n=1, out=Path({str(tmp_path / "out")!r}), workers=1, size="small"))
print(json.dumps([str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]))
"""
    got = run(code)
    assert len(got) == 1 and "imported before worldgen" in got[0] and kernels.ENV in got[0]


def test_ray_workers_get_the_drivers_pin():
    from worldgen.executors import _worker_environment

    assert _worker_environment()[kernels.ENV] == os.environ[kernels.ENV]
    assert kernels.active_kernels() == ""  # this test process was pinned by conftest's imports

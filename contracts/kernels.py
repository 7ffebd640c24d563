"""numpy's math kernels pinned to the x86-64 baseline, so that a world's bytes do not depend on the CPU.

numpy picks SIMD kernels for the CPU it runs on when it is first imported. Above the x86-64-v2 baseline
(AVX2, AVX-512) its float64 exp, log, power, tanh, ... return different last bits, and its unstable sorts
(argsort, argpartition) put ties in a different order. A world generated on an AVX-512 machine then differs
from the same seed generated on an AVX2 one: the golden digests of world 0 were made on the second kind and
failed on the first. numpy reads NPY_DISABLE_CPU_FEATURES once, at its first import, so the packages that
compute worlds (contracts, worldgen, auditors, rubrics, personas) call `pin_numpy_kernels()` before anything
imports numpy. On x86-64 every machine then runs the same baseline kernels (measured on 12 default worlds:
the same bytes with the AVX2 kernels and with the baseline; 200 worlds cost the same CPU within noise).

This module imports nothing heavy; it must stay that way.
"""

from __future__ import annotations

import os
import platform
import sys

ENV = "NPY_DISABLE_CPU_FEATURES"
# numpy (>= 2.4)'s x86-64 targets above its baseline, x86-64-v2; what every x86-64 numpy build can run.
X86_DISPATCH_TARGETS = ("X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR")


def _on_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def pin_numpy_kernels() -> None:
    """Ask numpy for its baseline kernels, unless it is loaded already or the user chose their own."""
    if "numpy" in sys.modules or ENV in os.environ or not _on_x86_64():
        return
    os.environ[ENV] = " ".join(X86_DISPATCH_TARGETS)


def active_kernels() -> str:
    """numpy's kernels above the baseline in this process ("" when pinned, or when not on x86-64)."""
    if not _on_x86_64():
        return ""
    from numpy._core import _multiarray_umath

    features = _multiarray_umath.__cpu_features__
    return " ".join(target for target in X86_DISPATCH_TARGETS if features.get(target))


def unpinned_warning() -> str | None:
    """One line if numpy was loaded before worldgen with CPU-specific kernels, else None."""
    active = active_kernels()
    if not active:
        return None
    return (
        f"numpy runs its {active} kernels in this process (it was imported before worldgen, or {ENV} says so): "
        f"its worlds are deterministic but may differ in the last bits from another machine's; import worldgen "
        f"before numpy, or set {ENV}={' '.join(X86_DISPATCH_TARGETS)!r}"
    )

"""The host side of a session's files: the workspace the sandbox sees and the runtime it runs from.

    <base>/workspace/data      copies of the world's observed files (bound read-only)
    <base>/workspace/scratch   the agent's writable directory
    <base>/runtime             the launcher, the driver and any staged library packages (read-only)
    <base>/home                HOME and TMPDIR when running without bubblewrap

Copies, not binds of the world: nothing else of the world directory is ever reachable. When root runs the
sandbox as a fresh uid, the tree is made readable to it and scratch/ and home/ are handed over.
"""

from __future__ import annotations

import importlib
import os
import shutil
import threading
from pathlib import Path

from contracts.errors import WorldgenError

HERE = Path(__file__).parent
# Root runs sandboxes as uids from this range, one per session, so sessions never share an NPROC budget.
UID_BASE = 100_000
UIDS_PER_PROCESS = 64
_uid_counter = 0
_uid_lock = threading.Lock()


class SandboxError(WorldgenError):
    """The sandbox cannot be set up or started."""


def make_workspace(base: Path, data: Path | None, library: tuple[str, ...]) -> None:
    for folder in ("runtime", "workspace/data", "workspace/scratch", "home"):
        (base / folder).mkdir(parents=True)
    if data is not None:
        if not Path(data).is_dir():
            raise SandboxError(f"{data}: no such data directory")
        shutil.copytree(data, base / "workspace" / "data", dirs_exist_ok=True, copy_function=shutil.copyfile)
    for name in ("_launcher.py", "_driver.py"):
        shutil.copyfile(HERE / name, base / "runtime" / name)
    for name in library:
        stage_package(name, base / "runtime" / "lib")


def stage_package(name: str, target: Path) -> None:
    """Copy a package's sources (no caches) for import inside the sandbox."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        raise SandboxError(f"cannot stage package {name!r} into the sandbox: not importable") from None
    shutil.copytree(
        Path(module.__file__).parent,
        target / name,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        copy_function=shutil.copyfile,
    )


def grant(base: Path, uid: int | None) -> None:
    """Everything readable (the base itself only searchable); scratch/ and home/ owned by the sandbox's uid."""
    for path in [base, *base.rglob("*")]:
        path.chmod((0o711 if path == base else 0o755) if path.is_dir() else 0o644)
    if uid is not None:
        for path in (base / "workspace" / "scratch", base / "home"):
            os.chown(path, uid, uid)


def sandbox_uid() -> int:
    """A uid no other live session of this process uses: NPROC is counted per uid, host-wide."""
    global _uid_counter
    with _uid_lock:
        _uid_counter += 1
        slot = _uid_counter % UIDS_PER_PROCESS
    return UID_BASE + (os.getpid() % 100_000) * UIDS_PER_PROCESS + slot

"""The harness the bad-input cases share: sandboxes, snapshots, and two ways of running the command."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
IN_PROCESS_SECONDS = 30  # hang guards, not performance assertions: a refusal takes well under a second
SUBPROCESS_SECONDS = 60
BIG = 64 << 20  # files larger than this are fingerprinted by size, mtime and inode instead of hashed


@dataclass(frozen=True)
class Case:
    """One bad input: `make` prepares the sandbox and returns the command's arguments."""

    id: str
    make: Callable[[Sandbox], list[str]]
    expect: str  # a fragment of the one stderr line
    code: int = 2
    may_change: tuple[str, ...] = ()  # sandbox-relative paths that are the command's intended output
    installed: bool = False  # also run through the installed `worldgen` command
    skip: Callable[[], str | None] = field(default=lambda: None)  # a reason to skip on this machine, or None


@dataclass
class Sources:
    """Read-only material shared by every case: a sound world and one of its tasks, from the session build."""

    world: Path
    task: Path


@dataclass
class Sandbox:
    """A case's private directory; everything in it is snapshotted before and after the command."""

    root: Path
    sources: Sources

    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        return path

    def json(self, rel: str, value: object) -> Path:
        return self.write(rel, json.dumps(value))

    def fifo(self, rel: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        return path

    def sparse(self, rel: str, size: int) -> Path:
        """A file of `size` bytes that takes no disk space (to test size caps cheaply)."""
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            f.truncate(size)
        return path

    def link(self, rel: str, target: str | Path) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, path)
        return path

    def copy_world(self, rel: str = "world") -> Path:
        target = self.root / rel
        shutil.copytree(self.sources.world, target, symlinks=True)
        return target

    def copy_task(self, rel: str = "task.json") -> Path:
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.sources.task, target)
        return target

    def task_json(self) -> dict:
        return json.loads(self.sources.task.read_text())

    def owned_out(self, rel: str = "out", seed: int = 0, size: str = "small", **settings) -> Path:
        """An empty build directory of ours for these settings: build.json and worlds/, no world built."""
        from worldgen.build import BUILD_FILE, WORLDS_DIR, BuildConfig, _build_record, validate_config

        out = self.root / rel
        (out / WORLDS_DIR).mkdir(parents=True)
        cfg = BuildConfig(n=1, seed=seed, out=out, size=size, **settings)
        (out / BUILD_FILE).write_text(json.dumps(_build_record(cfg, validate_config(cfg)), indent=2) + "\n")
        return out

    def world_id(self, index: int, seed: int = 0) -> str:
        """The id the default persona pool gives world `index` of a build with root `seed`."""
        from personas import builtin_personas
        from worldgen.build import persona_for, world_id_for

        pool = sorted(builtin_personas(), key=lambda p: p.id)
        return world_id_for(seed, index, persona_for(seed, index, pool).domain)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


class CaseTimeout(Exception):
    pass


def run_in_process(args: list[str], seconds: int = IN_PROCESS_SECONDS) -> Result:
    """`worldgen.cli.main(args)` in this process, stdout and stderr captured, with an alarm as hang guard."""
    from worldgen.cli import main

    def expire(signum, frame):
        raise CaseTimeout(f"worldgen {' '.join(args)} did not finish within {seconds}s")

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return Result(code, out.getvalue(), err.getvalue())


def run_installed(args: list[str], cwd: Path, seconds: int = SUBPROCESS_SECONDS) -> Result:
    """The installed `worldgen` command, killed if it outlives `seconds`."""
    done = subprocess.run(
        [WORLDGEN, *args], capture_output=True, text=True, cwd=cwd, timeout=seconds, stdin=subprocess.DEVNULL
    )
    return Result(done.returncode, done.stdout, done.stderr)


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` (links not followed): its kind and, for files, the sha256 of its bytes."""
    seen: dict[str, str] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                seen[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode) and info.st_size > BIG:  # sparse size-cap probes: stat, not bytes
                seen[rel] = f"big:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}:{oct(info.st_mode)}"
            elif stat.S_ISREG(info.st_mode):
                seen[rel] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest() + f":{oct(info.st_mode)}"
            elif stat.S_ISDIR(info.st_mode):
                seen[rel] = f"dir:{oct(info.st_mode)}"
            else:
                seen[rel] = f"special:{stat.S_IFMT(info.st_mode)}"
    return seen


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def check_result(result: Result, case: Case, before: dict[str, str], after: dict[str, str]) -> None:
    """What every bad input must get: the code, one stderr line with the reason, no traceback, no side effect."""
    lines = result.stderr.splitlines()
    assert result.code == case.code, f"exit {result.code}, expected {case.code}; stderr: {result.stderr[:500]}"
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}: {result.stderr[:500]!r}"
    assert "Traceback" not in result.stderr
    assert case.expect in lines[0], f"{case.expect!r} not in {lines[0]!r}"
    allowed = set(case.may_change)
    unexpected = [p for p in changed(before, after) if p not in allowed]
    assert not unexpected, f"the command touched {unexpected[:10]}"

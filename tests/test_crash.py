"""Kills, interrupts and races: whatever happens to a build, what it leaves is whole worlds, a manifest that
lists exactly them, and, once resumed, the same bytes as an uninterrupted build.

The reference is an uninterrupted build of the same 3 small worlds made in-process by one worker; the builds
here run the installed command with two worker processes. Every file is compared byte for byte, manifest,
build.json and the lock file included; only timings.jsonl (wall-clock) is left out.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import build

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
WALL_CLOCK = {"timings.jsonl"}
HANG_GUARD = 180  # seconds; a hang guard, not a performance assertion
N, SEED = 3, 5


def command(out: Path) -> list[str]:
    return [
        WORLDGEN,
        "build",
        "--n",
        str(N),
        "--seed",
        str(SEED),
        "--size",
        "small",
        "--workers",
        "2",
        "--out",
        str(out),
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted build: in-process, one worker."""
    return build(tmp_path_factory.mktemp("reference") / "out", n=N, seed=SEED)


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under root (links and special files would show up as such)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in WALL_CLOCK:
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[rel] = "not a regular file or directory"
        elif path.is_file():
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def assert_same_build(out: Path, reference: Path) -> None:
    got, want = tree(out), tree(reference)
    assert sorted(got) == sorted(want), sorted(set(got) ^ set(want))[:10]
    differ = [rel for rel in want if got[rel] != want[rel]]
    assert not differ, differ[:10]


def committed(out: Path) -> list[str]:
    worlds = out / "worlds"
    return sorted(p.name for p in worlds.iterdir() if not p.name.startswith(".")) if worlds.is_dir() else []


def start(out: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        command(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, **popen
    )


def wait_for_first_world(out: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not committed(out):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "no world committed in time"
        time.sleep(0.05)


def resume(out: Path) -> None:
    done = subprocess.run(command(out), capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def manifest_lists_exactly_the_committed_worlds(out: Path) -> None:
    listed = [json.loads(line)["world_id"] for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(listed) == committed(out)
    assert not [p for p in (out / "worlds").iterdir() if p.name.startswith(".")], "no half-written world is left"


def test_kill_9_mid_build_then_resume_gives_the_uninterrupted_bytes(reference, tmp_path):
    out = tmp_path / "out"
    build = start(out)
    wait_for_first_world(out, build)
    workers = psutil.Process(build.pid).children(recursive=True)
    assert workers, "the build runs its worlds in worker processes"
    build.kill()
    build.communicate(timeout=HANG_GUARD)
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers outlived their parent: {alive}"
    after_kill = committed(out)
    time.sleep(1.0)
    assert committed(out) == after_kill, "no world may be committed after the parent died"
    assert after_kill and len(after_kill) < N, "the kill landed mid-build"
    resume(out)
    assert_same_build(out, reference)


@pytest.mark.parametrize(
    ("signum", "code", "whole_group"),
    [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)],
    ids=["ctrl-c-to-the-process-group", "sigterm-to-the-parent"],
)
def test_interrupt_mid_build_writes_an_exact_manifest_then_resume_gives_the_uninterrupted_bytes(
    reference, tmp_path, signum, code, whole_group
):
    out = tmp_path / "out"
    build = start(out, start_new_session=True)  # its own process group, as a terminal's foreground job
    wait_for_first_world(out, build)
    workers = psutil.Process(build.pid).children(recursive=True)
    if whole_group:
        os.killpg(build.pid, signum)  # Ctrl-C reaches every process of the foreground group
    else:
        build.send_signal(signum)
    stdout, stderr = build.communicate(timeout=HANG_GUARD)
    assert build.returncode == code, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and f"interrupted by {signal.Signals(signum).name}" in lines[0], stderr
    assert "re-run the same command to resume" in lines[0]
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    manifest_lists_exactly_the_committed_worlds(out)
    assert (out / "build.lock").read_text() == "", "the lock file is emptied when the build lets go"
    resume(out)
    assert_same_build(out, reference)


def test_two_builds_racing_on_one_directory(reference, tmp_path):
    out = tmp_path / "out"
    builds = [start(out), start(out)]  # both at once: exactly one gets the directory, the other is refused
    deadline = time.monotonic() + HANG_GUARD
    while all(b.poll() is None for b in builds):
        assert time.monotonic() < deadline, "neither build ended"
        time.sleep(0.05)
    loser = next(b for b in builds if b.poll() is not None)
    winner = next(b for b in builds if b is not loser)
    assert winner.poll() is None, "the second build is refused at once, while the first is still building"
    _, loser_err = loser.communicate(timeout=HANG_GUARD)
    assert loser.returncode == 2, loser_err
    assert loser_err.count("\n") == 1 and f"another worldgen build (pid {winner.pid})" in loser_err, loser_err
    _, winner_err = winner.communicate(timeout=HANG_GUARD)
    assert winner.returncode == 0, winner_err
    assert_same_build(out, reference)


def test_a_worker_killed_by_the_system_stops_the_build_with_one_line(tmp_path):
    """What an out-of-memory kill looks like: exit 1, one line naming the world and the signal, no half-state."""
    out = tmp_path / "out"
    build = start(out)
    deadline = time.monotonic() + HANG_GUARD
    workers: list[psutil.Process] = []
    while not workers:
        assert build.poll() is None and time.monotonic() < deadline
        workers = [
            p
            for p in psutil.Process(build.pid).children()
            if "resource_tracker" not in " ".join(p.cmdline())
            and (out / "worlds").is_dir()
            and any(name.startswith(".tmp-") for name in os.listdir(out / "worlds"))
        ]
        time.sleep(0.05)
    for worker in workers:  # every worker, so that the one building the world in flight is among them
        worker.kill()
    _, stderr = build.communicate(timeout=HANG_GUARD)
    assert build.returncode == 1, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and "could not be built: its worker was killed by SIGKILL" in lines[0], stderr
    manifest_lists_exactly_the_committed_worlds(out)

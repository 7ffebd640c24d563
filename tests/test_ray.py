"""`--executor ray`: worlds built and audited as Ray tasks against a real local Ray instance (never a mock).

One Ray instance (`ray.init(num_cpus=2)`) serves the module: the in-process builds use it directly and the
installed command reaches it with `--address`. Every world is compared byte for byte with the same world of
the session's local build (`small_build`: seed 0, small, one worker, in-process); only timings.jsonl (wall
clock) is left out. Without Ray installed (a real import failure), the command exits 2 with the install hint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from worldgen.build import BuildConfig, run_build

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
HANG_GUARD = 300  # seconds; a hang guard, not a performance assertion
HINT = 'pip install -e ".[ray]"'


@pytest.fixture(scope="module")
def ray_address():
    """A local Ray instance for this module; its address, for the command's --address."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):  # .ci/run installs the ray extra: there a missing Ray is a failure
            raise
        pytest.skip(f"Ray is not installed ({HINT})")
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    for sig, handler in saved.items():  # ray.init takes SIGTERM in this process; give pytest's back
        signal.signal(sig, handler)
    yield context.address_info["address"]
    ray.shutdown()


def tree(root: Path, worlds: list[str] | None = None) -> dict[str, str]:
    """sha256 of every file and a marker for every directory under root (timings.jsonl left out)."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == "timings.jsonl":
            continue
        parts = rel.split("/")
        if worlds is not None and parts[0] == "worlds" and len(parts) > 1 and parts[1] not in worlds:
            continue
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[rel] = "not a regular file or directory"
        else:
            found[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def assert_same_as_local(out: Path, local: Path, n: int) -> None:
    """`out` holds worlds 0..n-1 of the local build, byte for byte, and the manifest of exactly those."""
    names = [json.loads(line)["world_id"] for line in (local / "manifest.jsonl").read_text().splitlines()][:n]
    got, want = tree(out), tree(local, names)
    want.pop("manifest.jsonl")
    got_manifest = got.pop("manifest.jsonl")
    assert sorted(got) == sorted(want), sorted(set(got) ^ set(want))[:10]
    assert [rel for rel in want if got[rel] != want[rel]] == []
    lines = (local / "manifest.jsonl").read_text().splitlines(keepends=True)[:n]
    assert got_manifest == hashlib.sha256("".join(lines).encode()).hexdigest()


def live_scratch() -> list[Path]:
    """Task scratch directories (worldgen-ray-<pid>-...) of processes still running."""
    found = []
    for path in Path(tempfile.gettempdir()).glob("worldgen-ray-*-*"):
        pid = path.name.removeprefix("worldgen-ray-").split("-")[0]
        if pid.isdigit() and psutil.pid_exists(int(pid)):
            found.append(path)
    return found


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([WORLDGEN, *args], capture_output=True, text=True, timeout=HANG_GUARD, **kw)


def test_a_build_on_ray_is_byte_identical_to_the_local_build_and_resumes(ray_address, small_build, tmp_path):
    out = tmp_path / "out"
    cfg = BuildConfig(n=2, out=out, size="small", executor="ray", workers=2)
    first = run_build(cfg)
    assert (first.built, first.skipped) == (2, 0)
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    assert all(t["commit"] >= 0 and t["audit"] > 0 for t in timings), "stage timings come back from the tasks"
    again = run_build(BuildConfig(n=3, out=out, size="small", executor="ray"))  # resume: only world 2 is new
    assert (again.built, again.skipped) == (1, 2)
    assert_same_as_local(out, small_build, 3)
    assert not live_scratch(), "a task removes its scratch directory"


def test_the_command_audits_on_ray_with_the_same_verdicts_and_bytes(ray_address, small_build, tmp_path):
    good = tmp_path / "good"
    shutil.copytree(small_build / "worlds" / sorted(os.listdir(small_build / "worlds"))[0], good)
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    observed = sorted((bad / "observed").iterdir())[0]
    observed.write_bytes(observed.read_bytes()[: observed.stat().st_size // 2])  # truncated: a check must fail
    twin = tmp_path / "twin"
    shutil.copytree(bad, twin)
    before = tree(good)
    done = cli("audit", str(good), str(bad), "--json", "--executor", "ray", "--address", ray_address)
    assert done.returncode == 1, done.stderr  # one world fails its audit
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["verdict"] for r in rows] == ["pass", "fail"]
    assert tree(good) == before, "an agreeing world's audit.json keeps its bytes"
    local = cli("audit", str(twin), "--json")
    assert local.returncode == 1
    assert [json.loads(line)["failing"] for line in local.stdout.splitlines() if line.startswith("{")] == [
        rows[1]["failing"]
    ]
    assert (bad / "audit.json").read_text().replace(str(bad), "W") == (twin / "audit.json").read_text().replace(
        str(twin), "W"
    ), "the failing world's audit.json is the local audit's, its reasons naming the user's path"
    missing = cli("audit", str(tmp_path / "nope"), "--executor", "ray", "--address", ray_address)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def _ray_tasks(name: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if cmdline.startswith(f"ray::{name}"):
            found.append(p)
    return found


def test_a_ray_worker_killed_mid_world_is_retried_and_an_interrupt_keeps_whole_worlds(
    ray_address, small_build, tmp_path
):
    """SIGKILL a task's worker (what an out-of-memory kill does): Ray reruns the world, the bytes are the same.
    Then Ctrl-C: exit 130, one line, only whole worlds listed; re-running resumes to the local build's bytes."""
    out = tmp_path / "out"
    command = ["build", "--n", "2", "--size", "small", "--out", str(out), "--executor", "ray", "--workers", "1"]
    build = subprocess.Popen(
        [WORLDGEN, *command, "--address", ray_address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + HANG_GUARD
    while not (victims := _ray_tasks("build_task")):
        assert build.poll() is None, build.stderr.read() if build.stderr else ""
        assert time.monotonic() < deadline, "no Ray task started"
        time.sleep(0.05)
    for victim in victims:
        victim.kill()
    while not (out / "worlds").is_dir() or not [n for n in os.listdir(out / "worlds") if not n.startswith(".")]:
        assert build.poll() is None, build.stderr.read() if build.stderr else ""
        assert time.monotonic() < deadline, "no world committed"
        time.sleep(0.05)
    os.killpg(build.pid, signal.SIGINT)  # Ctrl-C reaches the command's whole process group
    _, stderr = build.communicate(timeout=HANG_GUARD)
    assert build.returncode == 130, stderr
    assert stderr.count("\n") == 1 and "interrupted by SIGINT" in stderr, stderr
    listed = [json.loads(line)["world_id"] for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(listed) == sorted(os.listdir(out / "worlds")), "only whole worlds, all of them listed"
    assert len(listed) == 1
    deadline = time.monotonic() + 30
    while _ray_tasks("build_task"):  # the world in flight was cancelled, not left running on the cluster
        assert time.monotonic() < deadline, "the cancelled task is still running"
        time.sleep(0.1)
    resumed = cli(*command, "--address", ray_address)
    assert resumed.returncode == 0 and "built 1 world(s), skipped 1" in resumed.stdout, resumed.stderr
    assert_same_as_local(out, small_build, 2)


def test_without_ray_the_executor_is_one_line_with_the_install_hint(tmp_path):
    """A real import failure: a `ray` module first on the path that raises ImportError, as a missing one does."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "ray.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "out"
    for args in (
        ["build", "--n", "1", "--size", "small", "--out", str(out), "--executor", "ray"],
        ["audit", str(tmp_path), "--executor", "ray"],
    ):
        done = cli(*args, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and HINT in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not out.exists(), "nothing is written before the executor is known to work"


def test_workers_default_to_the_available_cores():
    from worldgen.build import available_cores, default_workers
    from worldgen.cli import _parser

    assert _parser().parse_args(["build", "--n", "1"]).workers is None
    assert available_cores() == len(os.sched_getaffinity(0))
    assert 1 <= default_workers("small") <= available_cores()
    assert default_workers("small") == available_cores()  # a development machine fits small worlds on every core


def test_packed_worlds_cannot_leave_their_directory(tmp_path):
    from worldgen.executors import pack_dir, unpack_dir

    (tmp_path / "w" / "sub").mkdir(parents=True)
    (tmp_path / "w" / "sub" / "a.csv").write_bytes(b"x,y\n1,2\n")
    (tmp_path / "w" / "link.csv").symlink_to("sub/a.csv")
    packed = pack_dir(tmp_path / "w")
    assert packed == [("sub", None), ("link.csv", "sub/a.csv"), ("sub/a.csv", b"x,y\n1,2\n")]
    unpack_dir(packed, tmp_path / "copy")
    assert (tmp_path / "copy" / "link.csv").read_bytes() == b"x,y\n1,2\n"
    for evil in ("../escape", "/abs", "a/../../b"):
        with pytest.raises(OSError):
            unpack_dir([(evil, b"!")], tmp_path / f"x{abs(hash(evil))}")

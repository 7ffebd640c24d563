"""The installed `worldgen` command, end to end, and every kind of bad input refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WORLDGEN, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def test_installed_command_builds_resumes_and_lists_domains(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".keep").touch()  # as the repository's output/ holds it: a placeholder, not data
    first = run("build", "--n", "2", "--seed", "3", "--size", "small", "--out", str(out), "--workers", "2")
    assert first.returncode == 0, first.stderr
    assert "built 2 world(s)" in first.stdout
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert [m["index"] for m in manifest] == [0, 1] and all(
        (out / m["path"] / "world.json").is_file() for m in manifest
    )
    again = run("build", "--n", "3", "--seed", "3", "--size", "small", "--out", str(out))
    assert again.returncode == 0 and "built 1 world(s), skipped 2" in again.stdout
    assert (out / ".keep").is_file() and (out / ".keep").stat().st_size == 0, "the placeholder is left as it was"
    domains = run("domains")
    assert domains.returncode == 0 and len(domains.stdout.splitlines()) >= 16


def _corrupt_manifest(tmp: Path) -> list[str]:
    from worldgen.build import BuildConfig, _build_record, validate_config

    out = tmp / "m"
    out.mkdir()
    cfg = BuildConfig(n=1, size="small", out=out)
    (out / "build.json").write_text(json.dumps(_build_record(cfg, validate_config(cfg))))
    (out / "manifest.jsonl").write_text('{"index": 0}\n[1]\n')
    return ["build", "--n", "1", "--size", "small", "--out", str(out)]


def _other_settings(tmp: Path) -> list[str]:
    out = tmp / "s"
    assert run("build", "--n", "1", "--size", "small", "--seed", "1", "--out", str(out)).returncode == 0
    return ["build", "--n", "1", "--size", "small", "--seed", "2", "--out", str(out)]


def _bad_personas(tmp: Path) -> list[str]:
    path = tmp / "p.jsonl"
    path.write_text('{"id": "x", "domain": "food_delivery", "role": "r", "organisation": "o", "region": "r"}\n')
    return ["build", "--n", "1", "--personas", str(path), "--out", str(tmp / "o")]


def _unwritable(tmp: Path) -> list[str]:
    blocker = tmp / "file"
    blocker.write_text("i am a file")
    return ["build", "--n", "1", "--out", str(blocker / "out")]


BAD = {
    "negative-n": (lambda t: ["build", "--n", "-1", "--out", str(t / "o")], "--n must be a positive integer"),
    "non-integer-n": (lambda t: ["build", "--n", "many"], "invalid int value"),
    "unknown-flag": (lambda t: ["build", "--n", "1", "--wrokers", "2"], "unrecognized arguments"),
    "unknown-domain": (
        lambda t: ["build", "--n", "1", "--domains", "food_delivry", "--out", str(t / "o")],
        "did you mean 'food_delivery'",
    ),
    "unknown-size": (lambda t: ["build", "--n", "1", "--size", "huge", "--out", str(t / "o")], "--size 'huge'"),
    "zero-workers": (lambda t: ["build", "--n", "1", "--workers", "0", "--out", str(t / "o")], "--workers"),
    "negative-seed": (
        lambda t: ["build", "--n", "1", "--seed", "-4", "--out", str(t / "o")],
        "seed must be an integer",
    ),
    "unwritable-out": (_unwritable, "cannot write to --out"),
    "corrupt-manifest": (_corrupt_manifest, "line 2 is not a manifest entry"),
    "other-settings": (_other_settings, "holds a build with different seed"),
    "malformed-personas": (_bad_personas, "record 1: field 'concern'"),
    "missing-personas": (
        lambda t: ["build", "--n", "1", "--personas", str(t / "none.jsonl"), "--out", str(t / "o")],
        "cannot read persona file",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_half_written(tmp_path, case):
    make, expected = BAD[case]
    args = make(tmp_path)
    before = {p for p in tmp_path.rglob("*")}
    result = run(*args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    created = {p for p in tmp_path.rglob("*")} - before
    assert not [p for p in created if "worlds/" in p.as_posix() and p.parent.name == "worlds"], created


def test_python_module_entry_point_matches():
    result = subprocess.run(
        [sys.executable, "-m", "worldgen", "--version"], capture_output=True, text=True, env=os.environ
    )
    assert result.returncode == 0 and result.stdout.startswith("worldgen ")

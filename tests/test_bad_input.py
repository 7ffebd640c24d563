"""Every bad input gets its documented exit code, one stderr line, no traceback, no side effect, in bounded time.

The cases live in tests/badinput/ (one module per command). Each runs in-process through
`worldgen.cli.main` (fast, and faithful: the same code path as the console script, stderr captured,
SystemExit caught), and those marked `installed` also through the installed `worldgen` command.
Hypothesis then throws generated JSON at every JSON-reading entry point.
"""

from __future__ import annotations

import importlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.badinput import COMMANDS
from tests.badinput.build_cases import release_locks
from tests.badinput.harness import (
    Case,
    Sandbox,
    Sources,
    changed,
    check_result,
    run_in_process,
    run_installed,
    snapshot,
)

CASES: dict[str, list[Case]] = {
    command: importlib.import_module(f"tests.badinput.{command}_cases").CASES for command in COMMANDS
}
ALL = [(command, case) for command in COMMANDS for case in CASES[command]]
IDS = [f"{command}-{case.id}" for command, case in ALL]
INSTALLED = [(command, case) for command, case in ALL if case.installed]


def test_the_suite_covers_every_command_with_enough_cases():
    assert len(ALL) >= 100
    assert len(set(IDS)) == len(IDS), "case ids must be unique"
    for command in ("build", "audit", "grade"):
        assert len(CASES[command]) >= 20, command
    assert len(INSTALLED) >= 10


@pytest.fixture(scope="session")
def sources(world_dirs) -> Sources:
    world = next(
        w for w in world_dirs if json.loads((w / "world.json").read_text())["status"] == "pass"
    )  # a sound world: any refusal is about the bad input, not the world
    task = sorted((world / "tasks").glob("*-cause-*.json"))[0]
    return Sources(world=world, task=task)


def _run(case: Case, sources: Sources, root: Path, installed: bool) -> None:
    reason = case.skip()
    if reason:
        pytest.skip(reason)
    sandbox = Sandbox(root, sources)
    source_before = snapshot(sources.world)
    try:
        args = case.make(sandbox)
        before = snapshot(root)
        result = run_installed(args, cwd=root) if installed else run_in_process(args)
        after = snapshot(root)
    finally:
        release_locks()
    check_result(result, case, before, after)
    assert not changed(source_before, snapshot(sources.world)), "the shared source world was touched"


@pytest.mark.parametrize(("command", "case"), ALL, ids=IDS)
def test_bad_input_in_process(command, case, sources, tmp_path):
    _run(case, sources, tmp_path, installed=False)


@pytest.mark.parametrize(("command", "case"), INSTALLED, ids=[f"{command}-{case.id}" for command, case in INSTALLED])
def test_bad_input_through_the_installed_command(command, case, sources, tmp_path):
    _run(case, sources, tmp_path, installed=True)


# --- generated JSON ---------------------------------------------------------------------------------------

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)
DEEP = st.integers(min_value=60, max_value=5_000).map(lambda depth: "[" * depth + "]" * depth)
TEXTS = JSON_VALUES.map(json.dumps) | DEEP | st.text(max_size=50) | st.binary(max_size=50)
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _fuzz(sources: Sources, prepare, allowed_codes: set[int], may_change: tuple[str, ...] = ()) -> None:
    """Run one generated input: any allowed code, at most one stderr line, no traceback, no side effect."""
    root = Path(tempfile.mkdtemp(prefix="wg-fuzz-"))
    try:
        args = prepare(Sandbox(root, sources))
        before = snapshot(root)
        result = run_in_process(args)
        after = snapshot(root)
        assert result.code in allowed_codes, (result.code, result.stderr[:300])
        assert len(result.stderr.splitlines()) <= 1 and "Traceback" not in result.stderr, result.stderr[:300]
        if result.code == 2:
            assert len(result.stderr.splitlines()) == 1
        assert not [p for p in changed(before, after) if p not in may_change]
    finally:
        shutil.rmtree(root, ignore_errors=True)


@FUZZ
@given(text=TEXTS)
def test_generated_answers(sources, text):
    _fuzz(sources, lambda sb: ["grade", str(sb.copy_task()), str(sb.write("answer.json", text))], {0, 2})


@FUZZ
@given(value=JSON_VALUES, key=st.sampled_from(["answer_schema", "rubric", "expected_answer", "kind", "files"]))
def test_generated_task_fields(sources, value, key):
    def prepare(sb: Sandbox) -> list[str]:
        task = sb.task_json() | {key: value}
        return ["grade", str(sb.json("task.json", task)), str(sb.json("answer.json", task["expected_answer"]))]

    _fuzz(sources, prepare, {0, 2})


@FUZZ
@given(text=TEXTS)
def test_generated_tasks(sources, text):
    _fuzz(sources, lambda sb: ["grade", str(sb.write("task.json", text)), str(sb.json("a.json", {}))], {2})


@FUZZ
@given(text=TEXTS)
def test_generated_persona_files(sources, text):
    def prepare(sb: Sandbox) -> list[str]:
        return ["build", "--n", "1", "--size", "small", "--personas", str(sb.write("p.jsonl", text))]

    _fuzz(sources, prepare, {2})


@FUZZ
@given(text=TEXTS)
def test_generated_build_records(sources, text):
    def prepare(sb: Sandbox) -> list[str]:
        out = sb.owned_out()
        sb.write("out/build.json", text)
        return ["build", "--n", "1", "--size", "small", "--out", str(out)]

    _fuzz(sources, prepare, {2})


@FUZZ
@given(text=TEXTS)
def test_generated_manifests(sources, text):
    def prepare(sb: Sandbox) -> list[str]:
        out = sb.owned_out()
        sb.write("out/manifest.jsonl", text + (b"\n" if isinstance(text, bytes) else "\n") + text)
        (out / "worlds").rmdir()
        sb.write("out/worlds/" + sb.world_id(0), "a file where a world should be")  # stop before building
        return ["build", "--n", "1", "--size", "small", "--out", str(out)]

    _fuzz(sources, prepare, {2})


@FUZZ
@given(value=JSON_VALUES | DEEP)
def test_generated_world_manifests(sources, value):
    def prepare(sb: Sandbox) -> list[str]:
        world = sb.copy_world()
        (world / "world.json").write_text(value if isinstance(value, str) else json.dumps(value))
        return ["audit", str(world)]

    _fuzz(sources, prepare, {2})


@FUZZ
@given(value=JSON_VALUES | DEEP)
def test_generated_contracts(sources, value):
    """A contract that is JSON but not a contract is a failed audit (exit 1), written to audit.json only."""

    def prepare(sb: Sandbox) -> list[str]:
        world = sb.copy_world()
        (world / "contract.json").write_text(value if isinstance(value, str) else json.dumps(value))
        return ["audit", str(world)]

    _fuzz(sources, prepare, {1, 2}, may_change=("world/audit.json",))

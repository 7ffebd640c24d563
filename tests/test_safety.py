"""What `build`, `audit` and `grade` promise about users' files, beyond refusing bad input (tests/badinput/)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from contracts.errors import BuildError
from contracts.safeio import atomic_write, json_depth, loads
from tests.badinput.harness import run_in_process, snapshot
from worldgen.build import MANIFEST_FILE, BuildConfig, run_build

# --- safeio -----------------------------------------------------------------------------------------------


def test_atomic_write_replaces_a_link_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's data\n")
    link = tmp_path / "audit.json"
    link.symlink_to(victim)
    atomic_write(link, "ours\n")
    assert victim.read_text() == "the user's data\n"
    assert not link.is_symlink() and link.read_text() == "ours\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "victim.txt"], "no temporary file is left"


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "]]"]', 1),
        ('"\\"[["', 0),
        ("[" * 70 + "]" * 70, 70),
    ],
)
def test_json_depth_counts_brackets_outside_strings(text, depth):
    assert json_depth(text.encode()) == depth


def test_the_depth_cap_leaves_room_for_every_reader_below_it():
    """A document just under the cap parses, validates and serialises without recursion trouble."""
    from contracts.safeio import MAX_DEPTH

    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = loads(nested, where="x")
    json.dumps(value)
    import jsonschema

    jsonschema.Draft202012Validator({"type": "object"}).is_valid(value)


# --- audit ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sound_world(world_dirs) -> Path:
    return next(w for w in world_dirs if json.loads((w / "world.json").read_text())["status"] == "pass")


def test_an_agreeing_world_keeps_its_audit_bytes_and_a_link_is_replaced_not_followed(sound_world, tmp_path):
    world = tmp_path / "world"
    shutil.copytree(sound_world, world)
    original = (world / "audit.json").read_bytes()
    (world / "notes.txt").write_text("kept")  # a file inside the world, behind a link named audit.json
    (world / "audit.json").unlink()
    (world / "audit.json").symlink_to("notes.txt")
    result = run_in_process(["audit", str(world)])
    assert result.code == 1, result.stderr  # notes.txt is not in world.json: the ledger check says so
    assert (world / "notes.txt").read_text() == "kept"
    assert not (world / "audit.json").is_symlink()
    (world / "notes.txt").unlink()
    result = run_in_process(["audit", str(world)])
    assert result.code == 0, result.stdout
    assert (world / "audit.json").read_bytes() == original, "re-auditing a world never changes its audit.json"


def test_a_world_whose_recorded_verdict_disagrees_fails_with_the_reason(sound_world, tmp_path):
    """The overlapping-builds symptom: world.json says 'fail' while the files pass."""
    world = tmp_path / "world"
    shutil.copytree(sound_world, world)
    meta = json.loads((world / "world.json").read_text())
    meta["status"] = "fail"
    meta["audit"] = {"verdict": "fail", "failing": ["edges"]}
    (world / "world.json").write_text(json.dumps(meta, indent=2))
    result = run_in_process(["audit", str(world), "--json"])
    assert result.code == 1
    report = json.loads(result.stdout.splitlines()[0])
    assert report["failing"] == ["recorded_verdict"]
    written = json.loads((world / "audit.json").read_text())
    reason = next(c["reason"] for c in written["checks"] if c["name"] == "recorded_verdict")
    assert "world.json records status 'fail'" in reason and "this audit finds 'pass'" in reason


# --- build ------------------------------------------------------------------------------------------------


def _copy_build(small_build: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(small_build, out, symlinks=True)
    return out


def test_a_lost_manifest_is_rebuilt_byte_for_byte_from_the_worlds(small_build, tmp_path):
    out = _copy_build(small_build, tmp_path)
    (out / MANIFEST_FILE).unlink()
    summary = run_build(BuildConfig(n=6, out=out, size="small"))
    assert summary.built == 0 and summary.skipped == 6
    assert (out / MANIFEST_FILE).read_bytes() == (small_build / MANIFEST_FILE).read_bytes()


def test_a_build_made_before_the_marker_is_recognised_and_upgraded(small_build, tmp_path):
    out = _copy_build(small_build, tmp_path)
    record = json.loads((out / "build.json").read_text())
    legacy = {k: v for k, v in record.items() if k not in ("format", "format_version")}
    (out / "build.json").write_text(json.dumps(legacy, indent=2) + "\n")
    (out / "build.lock").unlink()
    run_build(BuildConfig(n=6, out=out, size="small"))
    assert (out / "build.json").read_bytes() == (small_build / "build.json").read_bytes()
    assert snapshot(out).keys() == snapshot(small_build).keys()


def test_only_this_builds_own_temporary_worlds_are_removed(small_build, tmp_path):
    out = _copy_build(small_build, tmp_path)
    world = sorted((out / "worlds").iterdir())[0]
    leftover = out / "worlds" / f".tmp-{world.name}"
    shutil.copytree(world, leftover)  # what a crashed run leaves: its own half-written world
    os.rename(world, tmp_path / "moved")  # ... and the world itself not yet committed
    run_build(BuildConfig(n=6, out=out, size="small"))
    assert not leftover.exists() and world.is_dir()
    assert (out / MANIFEST_FILE).read_bytes() == (small_build / MANIFEST_FILE).read_bytes()


def test_a_world_that_cannot_be_built_stops_the_build_with_one_line_and_keeps_the_others(
    small_build, tmp_path, monkeypatch
):
    out = _copy_build(small_build, tmp_path)
    built = sorted((out / "worlds").iterdir())
    for victim in built[-2:]:
        shutil.rmtree(victim)

    def broken(*args, **kwargs):
        raise RuntimeError("a generator bug\nwith a second line")

    monkeypatch.setattr("worldgen.build.build_world", broken)
    with pytest.raises(BuildError) as caught:
        run_build(BuildConfig(n=len(built), out=out, size="small"))
    assert "could not be built: RuntimeError: a generator bug\\nwith a second line" in str(caught.value)
    manifest = [json.loads(line) for line in (out / MANIFEST_FILE).read_text().splitlines()]
    assert len(manifest) == len(built) - 2 and not [p for p in (out / "worlds").iterdir() if p.name.startswith(".")]


# --- grade ------------------------------------------------------------------------------------------------


def test_repeated_entries_are_reported_in_a_bounded_list(sound_world, tmp_path):
    task_file = sorted((sound_world / "tasks").glob("*-cause-*.json"))[0]
    answer = json.loads(task_file.read_text())["expected_answer"]
    answer["drivers"] = answer["drivers"] + [answer["drivers"][0]] * 290
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer))
    result = run_in_process(["grade", str(task_file), str(path)])
    assert result.code == 0, result.stderr
    graded = json.loads(result.stdout)
    assert graded["score"] == 1.0, "the first entry of a variable counts, repeats are dropped"
    assert len(graded["schema_problems"]) <= 21 and "and 270 more problem(s)" in graded["schema_problems"][-1]
    assert len(result.stdout) < 20_000


def test_a_build_killed_while_stamping_its_directory_can_start_again(tmp_path):
    """Killed between taking the lock and renaming build.json into place: only our own files are there."""
    from personas import builtin_personas
    from worldgen.build import inspect_out

    out = tmp_path / "out"
    out.mkdir()
    (out / "build.lock").write_text("12345\n")
    (out / ".build.json.12345-0123abcd.tmp").write_text('{"format": "worldgen-bu')
    state = inspect_out(BuildConfig(n=1, out=out, size="small"), sorted(builtin_personas(), key=lambda p: p.id))
    assert state.stale == [out / ".build.json.12345-0123abcd.tmp"] and not state.done
    (out / "notes.txt").write_text("a user's file")
    with pytest.raises(Exception, match="not a worldgen build"):
        inspect_out(BuildConfig(n=1, out=out, size="small"), sorted(builtin_personas(), key=lambda p: p.id))


def test_a_refused_build_names_a_holder_that_writes_its_pid_a_moment_late(tmp_path):
    """The holder takes the lock, then writes its pid: a build refused in between waits to read it."""
    import fcntl
    import threading

    from worldgen.build import LOCK_FILE, _locked_error

    lock = tmp_path / LOCK_FILE
    lock.write_bytes(b"")
    holder = os.open(lock, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    late = threading.Timer(0.1, lambda: os.pwrite(holder, b"4242\n", 0))
    late.start()
    reader = os.open(lock, os.O_RDONLY)
    try:
        assert "(pid 4242)" in str(_locked_error(tmp_path, reader))
        os.ftruncate(holder, 0)  # a holder that never writes: named unknown, after a bounded wait
        assert "(pid unknown)" in str(_locked_error(tmp_path, reader))
    finally:
        late.join()
        os.close(reader)
        os.close(holder)


def test_a_users_audit_json_is_synced_a_world_in_the_making_is_not(sound_world, tmp_path, monkeypatch):
    """Re-auditing a finished world replaces its audit.json durably (fsync before the rename); a build's
    own audit writes into a temporary world directory, none of whose files is synced, and does not wait on
    the disk for that one file (the same bytes either way)."""
    import os

    from auditors import audit_world

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    world = tmp_path / "world"
    shutil.copytree(sound_world, world)
    original = (world / "audit.json").read_bytes()
    audit_world(world)
    assert len(synced) == 1 and (world / "audit.json").read_bytes() == original
    audit_world(world, durable=False)
    assert len(synced) == 1 and (world / "audit.json").read_bytes() == original

    from worldgen.build import BuildConfig, run_build

    run_build(BuildConfig(n=1, seed=0, out=tmp_path / "build", workers=1))
    built = next((tmp_path / "build" / "worlds").iterdir())
    assert (built / "audit.json").is_file()
    assert len(synced) == 3, "a build syncs only build.json and its manifest, not the world's audit.json"

"""A build's worker hands a committed world's file pages back to the kernel (`build._CacheRelease`): every
file of the world just committed (its write-out starts) and of the one before (its pages dropped), nothing
outside the worlds, and no byte changes."""

from __future__ import annotations

import os
import sys

import pytest

from worldgen import build

# /proc/self/fd names each advised file
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="posix_fadvise and /proc are Linux's")


def _world(root, name: str, files: int = 3):
    world = root / name
    (world / "observed").mkdir(parents=True)
    for i in range(files):
        (world / "observed" / f"f{i}.csv").write_bytes(b"a,b\n1,2\n" * (i + 1))
    (world / "world.json").write_text("{}")
    return world


def test_a_world_is_advised_when_committed_and_again_with_the_next(tmp_path, monkeypatch):
    advised: list[str] = []
    real = os.posix_fadvise

    def spy(fd, offset, length, advice):
        assert (offset, length, advice) == (0, 0, os.POSIX_FADV_DONTNEED)
        advised.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    first, second = _world(tmp_path, "a-s0-00000"), _world(tmp_path, "a-s0-00001")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    release = build._CacheRelease()
    release(first)
    assert sorted(advised) == sorted(str(p) for p in first.rglob("*") if p.is_file())
    advised.clear()
    release(second)
    assert sorted(advised) == sorted(str(p) for p in [*first.rglob("*"), *second.rglob("*")] if p.is_file())
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_nothing_outside_the_world_is_advised(tmp_path, monkeypatch):
    advised: list[str] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, *_: advised.append(os.readlink(f"/proc/self/fd/{fd}")))
    outside = tmp_path / "users"
    outside.mkdir()
    (outside / "notes.txt").write_text("mine")
    world = _world(tmp_path, "a-s0-00000", files=1)
    (world / "observed" / "link.txt").symlink_to(outside / "notes.txt")
    (world / "linked_dir").symlink_to(outside, target_is_directory=True)
    build._CacheRelease()(world)
    assert advised and all(not a.startswith(str(outside)) for a in advised)
    assert (outside / "notes.txt").read_text() == "mine"


def test_a_fifo_or_a_vanished_world_neither_hangs_nor_fails(tmp_path):
    world = _world(tmp_path, "a-s0-00000", files=1)
    os.mkfifo(world / "observed" / "pipe")  # opening it for reading would wait for a writer
    release = build._CacheRelease()
    release(world)
    release(tmp_path / "a-s0-00001")  # never written
    release(tmp_path / "a-s0-00002")


def test_an_in_process_build_advises_exactly_its_committed_worlds(tmp_path, monkeypatch):
    advised: list[str] = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, *_: advised.append(os.readlink(f"/proc/self/fd/{fd}")))
    (tmp_path / "mine.txt").write_text("a user's file beside the output")
    out = tmp_path / "out"
    build.run_build(build.BuildConfig(n=2, seed=0, out=out, workers=1, size="small"))
    worlds = sorted(p for p in (out / build.WORLDS_DIR).iterdir() if p.is_dir())
    assert len(worlds) == 2
    files = {str(p) for w in worlds for p in w.rglob("*") if p.is_file()}
    assert set(advised) == files  # every file of both worlds, nothing else (the manifest, the user's file)

"""Paths are paths, never globs: polars expands `*`, `?` and `[...]` in a path it is given, so a world
under `runs[1]/` would read as missing and a file named `x*.parquet` would read its siblings too."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl

from auditors import audit_world
from auditors.worldio import read_ndjson, read_parquet


def test_a_world_under_a_directory_with_glob_characters_audits_as_it_does_elsewhere(world_dirs, tmp_path):
    source = world_dirs[0]
    moved = shutil.copytree(source, tmp_path / "runs[1]" / "w?*" / source.name)
    (moved / "audit.json").unlink()
    report = audit_world(moved, write=False)
    expected = json.loads((source / "audit.json").read_text())
    assert report.verdict == expected["verdict"]
    assert [(c.name, c.status) for c in report.checks] == [(c["name"], c["status"]) for c in expected["checks"]]


def test_a_file_named_like_a_glob_reads_only_itself(tmp_path: Path):
    own = pl.DataFrame({"a": [1]})
    sibling = pl.DataFrame({"a": [5, 6, 7]})
    own.write_parquet(tmp_path / "x*.parquet")
    sibling.write_parquet(tmp_path / "xy.parquet")
    own.write_ndjson(tmp_path / "n[y].jsonl")
    sibling.write_ndjson(tmp_path / "ny.jsonl")
    assert read_parquet(tmp_path / "x*.parquet", None).equals(own)
    assert read_ndjson(tmp_path / "n[y].jsonl").equals(own)

"""Reading a build for export: its settings, its worlds in index order, and each world's public and hidden parts.

Only files on disk are read (build.json, manifest.jsonl, each world's world.json, contract.json, audit.json,
projection.json and tasks/), so any build in the world format can be exported.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from contracts.errors import WorldgenError
from contracts.hashing import file_sha256
from rubrics.grade import load_task
from rubrics.model import Task
from worldgen.export import ExportError

STRUCTURAL_CHECKS = ("contract", "ledger", "invariants", "projection")  # the files really are X + recorded defects


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path}: cannot read ({exc})") from None


@dataclass
class World:
    """One world of a build, read lazily."""

    path: Path
    world_id: str
    index: int
    domain: str

    @cached_property
    def meta(self) -> dict:
        return _read_json(self.path / "world.json")

    @cached_property
    def contract(self) -> dict:
        return _read_json(self.path / "contract.json")

    @cached_property
    def audit(self) -> dict:
        path = self.path / "audit.json"
        return _read_json(path) if path.is_file() else {"verdict": "missing", "checks": []}

    @cached_property
    def checks(self) -> dict[str, str]:
        return {c["name"]: c["status"] for c in self.audit.get("checks", [])}

    def passes(self, names: tuple[str, ...] | None = None) -> bool:
        """Every named audit check passed (all checks, and the verdict, when `names` is None)."""
        if names is None:
            return (
                self.audit.get("verdict") == "pass"
                and bool(self.checks)
                and all(s == "pass" for s in self.checks.values())
            )
        return all(self.checks.get(n) == "pass" for n in names)

    @cached_property
    def tasks(self) -> list[Task]:
        try:
            return [load_task(p) for p in sorted((self.path / "tasks").glob("*.json"))]
        except WorldgenError as exc:
            raise ExportError(str(exc)) from None

    @cached_property
    def layer_of(self) -> dict[str, int]:
        """Variable -> its layer (longest-path depth) in the contract: a task's depth."""
        return {v["name"]: int(v["layer"]) for v in self.contract["variables"]}

    @cached_property
    def observed(self) -> list[str]:
        """The analyst-visible file names, sorted."""
        return sorted(p.name for p in (self.path / "observed").iterdir() if p.is_file())

    @cached_property
    def observed_sha256(self) -> dict[str, str]:
        recorded = self.meta.get("files", {})
        return {
            name: recorded.get(f"observed/{name}") or file_sha256(self.path / "observed" / name)
            for name in self.observed
        }

    @cached_property
    def hidden_files(self) -> list[Path]:
        """Every file of the world an analyst must never see (all but observed/)."""
        return sorted(
            p for p in self.path.rglob("*") if p.is_file() and p.relative_to(self.path).parts[0] != "observed"
        )

    @cached_property
    def hidden_sha256(self) -> dict[str, str]:
        return {file_sha256(p): str(p.relative_to(self.path)) for p in self.hidden_files}

    @cached_property
    def projection(self) -> dict:
        return _read_json(self.path / "projection.json")

    @cached_property
    def systems(self) -> dict[str, str]:
        """Observed file -> the business system it comes from."""
        return {f["file"]: f["system"] for f in self.contract.get("deliverables", [])}

    @cached_property
    def defect_kinds(self) -> list[str]:
        return sorted({d["kind"] for f in self.projection.get("files", []) for d in f.get("defects", [])})

    @property
    def formats(self) -> list[str]:
        return sorted({name.rsplit(".", 1)[-1] for name in self.observed})

    @property
    def observed_digest(self) -> str:
        """One hash of the world's observed files: names and contents."""
        return hashlib.sha256(
            "".join(f"{n}\0{h}\n" for n, h in sorted(self.observed_sha256.items())).encode()
        ).hexdigest()

    def depth(self, task: Task) -> int:
        return self.layer_of[task.variable]


@dataclass
class Build:
    path: Path
    settings: dict
    worlds: list[World] = field(default_factory=list)


def open_build(path: Path) -> Build:
    """The build at `path` (build.json, manifest.jsonl, worlds/); anything else is an ExportError."""
    if not path.is_dir():
        raise ExportError(f"--from {path}: no such build directory")
    for required in ("build.json", "manifest.jsonl", "worlds"):
        if not (path / required).exists():
            raise ExportError(f"--from {path}: not a build (no {required}); make one with `worldgen build`")
    settings = _read_json(path / "build.json")
    worlds = []
    for number, line in enumerate((path / "manifest.jsonl").read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            world = World(path / entry["path"], entry["world_id"], int(entry["index"]), entry["domain"])
        except (ValueError, KeyError, TypeError):
            raise ExportError(f"{path / 'manifest.jsonl'}: line {number} is not a manifest entry") from None
        if world.path.resolve().parent != (path / "worlds").resolve():
            raise ExportError(f"{path / 'manifest.jsonl'}: line {number}: {entry['path']!r} is not under worlds/")
        if (world.path / "world.json").is_file():
            worlds.append(world)
    if not worlds:
        raise ExportError(f"--from {path}: the build holds no finished world")
    return Build(path, settings, sorted(worlds, key=lambda w: w.index))

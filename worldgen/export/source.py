"""Reading a build for export: its settings, its worlds in index order, and each world's public and hidden parts.

Only files on disk are read (build.json, manifest.jsonl, each world's world.json, contract.json, audit.json,
projection.json and tasks/), so any build in the world format can be exported.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from contracts.hashing import file_sha256
from rubrics import scoring
from rubrics.model import TASK_SCHEMA_VERSION, Task
from worldgen.export import ExportError

STRUCTURAL_CHECKS = ("contract", "ledger", "invariants", "projection")  # the files really are X + recorded defects


def load_task(path: Path) -> Task:
    """A task as rubrics.grade.load_task reads it (with the schema check cached: every task of a kind shares
    one schema shape), refusing answer-schema keywords the exported grader (rubrics/scoring.py) lacks."""
    raw = _read_json(path)
    if not isinstance(raw, dict) or raw.get("schema_version") != TASK_SCHEMA_VERSION:
        raise ExportError(f"{path}: not a task of schema_version {TASK_SCHEMA_VERSION!r}")
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ExportError(f"{path}: not a task: field {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    text = json.dumps(task.answer_schema, sort_keys=True)
    problem = _schema_problem(text)
    if problem:
        raise ExportError(f"{path}: {problem}")
    return task


@lru_cache(maxsize=256)
def _schema_problem(schema_text: str) -> str:
    if "$ref" in schema_text or "$dynamicRef" in schema_text:
        return "answer_schema may not reference other documents"
    schema = json.loads(schema_text)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"answer_schema is not a valid JSON Schema: {exc.message[:120]}"
    unsupported = scoring.unsupported_keywords(schema)
    if unsupported:
        return (
            f"answer_schema uses {', '.join(unsupported)}, which the exported grader (rubrics/scoring.py) does not "
            "implement; add it there (and to its test against jsonschema) before exporting"
        )
    return ""


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
    def task_index(self) -> list[dict]:
        """Each task's id, kind, variable and reference score, read without validation (for selection)."""
        index = []
        for path in sorted((self.path / "tasks").glob("*.json")):
            raw = _read_json(path)
            try:
                index.append({k: raw[k] for k in ("task_id", "kind", "variable", "reference_score")} | {"path": path})
            except (KeyError, TypeError):
                raise ExportError(f"{path}: not a task") from None
        return index

    def task(self, task_id: str) -> Task:
        """One task, validated as `worldgen grade` validates it, and gradable by the exported grader."""
        path = next((r["path"] for r in self.task_index if r["task_id"] == task_id), None)
        if path is None:
            raise ExportError(f"{self.path}: no task {task_id!r}")
        return load_task(path)

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

    def depth(self, task: Task | dict) -> int:
        variable = task.variable if isinstance(task, Task) else task["variable"]
        if variable not in self.layer_of:
            raise ExportError(f"{self.path}: task variable {variable!r} is not in contract.json")
        return self.layer_of[variable]


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

"""One world, top to bottom: persona -> skeleton -> contract -> canonical -> observed -> written world.

`build_world` is the whole method in one readable function. Each stage draws from its own named seed
stream, so a stage's output depends only on (root seed, world index, stage) and on the stages before it.
The world is written under a temporary name and renamed into place only when complete.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from auditors import audit_world
from contracts.hashing import column_sha256, file_sha256
from contracts.model import SCHEMA_VERSION, Contract, Persona
from worldgen import canonical, observe, skeleton
from worldgen.contract import build_contract
from worldgen.observe import DefectSettings
from worldgen.packs import DomainPack
from worldgen.seeding import rng_for, seed_record
from worldgen.tasks import build_tasks, write_tasks
from worldgen.write import dump_json, dump_jsonl, write_observed, write_parquet


@dataclass
class WorldResult:
    world_id: str
    index: int
    path: Path
    entry: dict
    timings: dict[str, float] = field(default_factory=dict)


def world_id_for(seed: int, index: int, domain: str) -> str:
    return f"{domain}-s{seed}-{index:05d}"


def build_world(
    seed: int,
    index: int,
    persona: Persona,
    pack: DomainPack,
    size: str,
    worlds_dir: Path,
    settings: DefectSettings = DefectSettings(),
) -> WorldResult:
    """Build, validate and atomically commit world `index` of the build rooted at `seed`."""
    world_id = world_id_for(seed, index, pack.domain)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = round(now - clock, 6)
        clock = now

    dag = skeleton.sample_skeleton(pack, rng_for(seed, index, "skeleton"), persona.focus)
    lap("dag")
    contract = build_contract(
        world_id, seed, size, pack, persona, dag, rng_for(seed, index, "contract"), rng_for(seed, index, "plan")
    )
    lap("contract")
    state = canonical.generate(
        contract,
        pack,
        rng_for_step=lambda step: rng_for(seed, index, "canonical", step),
        seed_of=lambda step: seed_record(seed, index, "canonical", step),
    )
    contract = canonical.seal(contract, state)
    lap("canonical")
    observed = observe.project(contract, pack, state, rng_for(seed, index, "defects"), settings)
    lap("projection")
    final = worlds_dir / world_id
    tmp = worlds_dir / f".tmp-{world_id}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        entry = _write_world(tmp, contract, state, observed, seed, index, settings)
        lap("write")
        report = audit_world(tmp)  # the independent auditor reads the finished files, nothing in memory
        entry["status"] = report["verdict"]
        lap("audit")
        task_list = build_tasks(contract, report, rng_for(seed, index, "tasks"))
        write_tasks(task_list, tmp / "tasks")
        entry["tasks"] = len(task_list)
        _record_verdict(tmp / "world.json", report, [t.task_id for t in task_list])
        lap("tasks")
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    entry["path"] = f"worlds/{world_id}"
    return WorldResult(world_id, index, final, entry, timings)


def _record_verdict(meta_path: Path, report: dict, task_ids: list[str]) -> None:
    meta = json.loads(meta_path.read_text())
    meta["status"] = report["verdict"]
    meta["audit"] = {"verdict": report["verdict"], "failing": report["failing"]}
    meta["tasks"] = task_ids
    dump_json(meta_path, meta)


def _write_world(
    root: Path,
    contract: Contract,
    state: canonical.CanonicalState,
    observed: list[observe.ObservedFile],
    seed: int,
    index: int,
    settings: DefectSettings,
) -> dict:
    (root / "canonical").mkdir(parents=True)
    (root / "observed").mkdir()
    (root / "tasks").mkdir()
    dump_json(root / "contract.json", contract.model_dump(mode="json"))
    for table, columns in state.tables.items():
        write_parquet(
            pl.DataFrame({k: v for k, v in columns.items()}, strict=False), root / "canonical" / f"{table}.parquet"
        )
    projection = {
        "schema_version": SCHEMA_VERSION,
        "world_id": contract.world_id,
        "settings": {"defect_scale": settings.scale},
        "seed": seed_record(seed, index, "defects"),
        "files": [],
    }
    for f in observed:
        d = f.deliverable
        sheets_by = next((c.name for c in d.columns if c.source == "units.region"), None) if d.sheets else None
        write_observed(f.rendered(contract), root / "observed" / d.file, d.format, d.system, sheets_by)
        conventions = {c.name: {"source": c.source, "format": c.format} for c in d.columns if c.format}
        projection["files"].append(
            {
                "file": d.file,
                "system": d.system,
                "rows_clean": f.clean.height,
                "rows_observed": f.frame.height,
                "conventions": conventions,
                "defects": f.records,
            }
        )
    dump_json(root / "projection.json", projection, indent=None)  # row lists make an indented file huge
    observed_hashes = {
        f"observed/{f.deliverable.file}": file_sha256(root / "observed" / f.deliverable.file) for f in observed
    }
    ledger = list(state.ledger)
    ledger.append(
        {
            "step": len(ledger),
            "name": "projection",
            "variables": [],
            "seed": seed_record(seed, index, "defects"),
            "inputs": {
                f"{t}.{c}": column_sha256(v)
                for t, cols in sorted(state.tables.items())
                for c, v in sorted(cols.items())
            },
            "outputs": observed_hashes,
            "rows": {f.deliverable.file: f.frame.height for f in observed},
            "checks": {"defects_recorded": sum(len(f.records) for f in observed), "canonical_unchanged": True},
        }
    )
    dump_jsonl(root / "ledger.jsonl", ledger)
    files = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        files[path.relative_to(root).as_posix()] = file_sha256(path)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "world_id": contract.world_id,
        "seed": seed,
        "index": index,
        "domain": contract.domain,
        "persona_id": contract.persona.id,
        "size": contract.size,
        "status": "built",
        "sizes": {e.table: e.count for e in contract.entities}
        | {
            "panel": len(state.column("panel", "day")),
            "variables": len(contract.variables),
            "edges": len(contract.edges),
            "systems": len({d.system for d in contract.deliverables}),
            "files": len(contract.deliverables),
        },
        "files": files,
    }
    dump_json(root / "world.json", manifest)
    return {"world_id": contract.world_id, "seed": seed, "index": index, "domain": contract.domain, "status": "built"}

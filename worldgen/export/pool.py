"""`worldgen export pool`: every non-bench world's tasks as RL rows, with the worlds' observed files beside them.

    export_pool(PoolConfig(source=BUILD, out=DIR, format="verl", exclude=(BENCH_DIR,)))

reads as: open the build -> drop the worlds of every excluded bench (by id, and refuse any world whose
observed files are a bench world's) -> keep the worlds whose files are sound (audit's structural checks; all
checks with --strict) and the tasks the reference analysis solves -> copy each world's observed files to
data/<world_id>/ -> one row per task in the format's shape -> scan prompts and data for hidden truth ->
pool.json -> rename into place. Same build and arguments give byte-identical output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from contracts.errors import did_you_mean
from worldgen import __version__
from worldgen.export import ExportError, leaks
from worldgen.export import files as fs
from worldgen.export.rows import FORMATS, Example
from worldgen.export.select import MIN_REFERENCE_SCORE
from worldgen.export.source import STRUCTURAL_CHECKS, World, open_build
from worldgen.export.text import pool_context, pool_prompt

POOL_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True)
class PoolConfig:
    source: Path
    out: Path
    format: str
    exclude: tuple[Path, ...] = ()
    strict: bool = False


@dataclass
class PoolSummary:
    out: Path
    rows: int
    worlds: int
    excluded: int
    skipped: dict[str, int] = field(default_factory=dict)


def read_bench(path: Path) -> dict:
    """An exported bench's splits.json (test world ids and their content hashes)."""
    try:
        splits = json.loads((path / "splits.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ExportError(f"--exclude {path}: not a bench exported by worldgen (no readable splits.json)") from None
    if not isinstance(splits, dict) or splits.get("export") != "bench" or not isinstance(splits.get("test"), list):
        raise ExportError(f"--exclude {path}: splits.json is not a worldgen bench split")
    return splits


def export_pool(cfg: PoolConfig) -> PoolSummary:
    if cfg.format not in FORMATS:
        raise ExportError(
            f"--format {cfg.format!r} is not one of {', '.join(FORMATS)}{did_you_mean(cfg.format, FORMATS)}"
        )
    build = open_build(cfg.source)
    benches = [read_bench(p) for p in cfg.exclude]
    test_ids = {w["world_id"] for b in benches for w in b["test"]}
    test_content = {w.get("observed_sha256"): w["world_id"] for b in benches for w in b["test"]}
    fs.refuse_inside(cfg.out, cfg.source, "--from")
    for bench in cfg.exclude:
        fs.refuse_inside(cfg.out, bench, "--exclude")
    skipped = {"bench": 0, "audit": 0, "unsolved_tasks": 0}
    worlds: list[tuple[World, list]] = []
    for world in build.worlds:
        if world.world_id in test_ids:
            skipped["bench"] += 1
            continue
        if world.observed_digest in test_content:
            raise ExportError(
                f"the bench overlaps the pool: {world.world_id} has the same observed files as bench world "
                f"{test_content[world.observed_digest]}"
            )
        if not world.passes(None if cfg.strict else STRUCTURAL_CHECKS):
            skipped["audit"] += 1
            continue
        tasks = [world.task(t["task_id"]) for t in world.task_index if t["reference_score"] >= MIN_REFERENCE_SCORE]
        skipped["unsolved_tasks"] += len(world.task_index) - len(tasks)
        if tasks:
            worlds.append((world, tasks))
    if not worlds:
        raise ExportError(f"--from {cfg.source}: no world is left for the pool once the bench and audit filters apply")
    build_row, write, filename = FORMATS[cfg.format]
    with fs.atomic_dir(cfg.out, "pool") as tmp:
        examples, problems = [], []
        for world, tasks in worlds:
            for name in world.observed:
                fs.place(world.path / "observed" / name, tmp / "data" / world.world_id / name)
            data = sorted((tmp / "data" / world.world_id).iterdir())
            problems += leaks.scan_data(data, world, f"data/{world.world_id}")
            hidden = leaks.world_needles(world)
            for task in tasks:
                example = _example(len(examples), world, task)
                problems += leaks.scan_text(
                    example.prompt, hidden | leaks.task_needles(task), f"prompt of {task.task_id}"
                )
                problems += leaks.scan_listing(example.prompt, world, task, f"prompt of {task.task_id}")
                examples.append(example)
        if problems:
            raise ExportError(f"refusing to finish: {len(problems)} hidden-truth problem(s): {'; '.join(problems[:5])}")
        write([build_row(e) for e in examples], tmp / filename)
        fs.write_json(tmp / "pool.json", _manifest(cfg, build, worlds, benches, examples, filename, skipped))
    return PoolSummary(cfg.out, len(examples), len(worlds), skipped["bench"], skipped)


def grading_spec(task) -> str:
    """The row's ground truth: what compute_score grades against, as a canonical JSON string."""
    dumped = task.model_dump(mode="json")
    spec = {k: dumped[k] for k in ("task_id", "answer_schema", "rubric", "expected_answer")}
    return json.dumps(spec, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _example(index: int, world: World, task) -> Example:
    data_dir = f"data/{world.world_id}"
    return Example(
        index=index,
        world_id=world.world_id,
        task_id=task.task_id,
        domain=world.domain,
        kind=task.kind,
        variable=task.variable,
        depth=world.depth(task),
        audit=world.audit.get("verdict", "missing"),
        prompt=pool_prompt(task, world.observed),
        question=task.prompt,
        context=pool_context(task, world.observed),
        data_dir=data_dir,
        data_files=list(world.observed),
        ground_truth=grading_spec(task),
        expected_answer=task.expected_answer,
        answer_schema=task.answer_schema,
        reference_score=task.reference_score,
    )


# size: the pool's manifest records every input of the export, so each is passed by name
def _manifest(cfg, build, worlds, benches, examples, filename: str, skipped: dict) -> dict:
    return {
        "export": "pool",
        "schema_version": POOL_SCHEMA_VERSION,
        "worldgen_version": __version__,
        "format": cfg.format,
        "file": filename,
        "rows": len(examples),
        "build": build.settings,
        "filter": {
            "audit": "every check" if cfg.strict else f"structural checks ({', '.join(STRUCTURAL_CHECKS)})",
            "min_reference_score": MIN_REFERENCE_SCORE,
            "skipped": skipped,
        },
        "excluded_benches": [
            {"name": b.get("name"), "bench_sha256": b.get("bench_sha256"), "worlds": len(b["test"])} for b in benches
        ],
        "worlds": [
            {
                "world_id": w.world_id,
                "index": w.index,
                "domain": w.domain,
                "audit": w.audit.get("verdict"),
                "observed_sha256": w.observed_digest,
                "tasks": len(tasks),
            }
            for w, tasks in worlds
        ],
    }

"""`worldgen export bench`: a DataWorld-Bench style test split as Harbor task directories.

    export_bench(BenchConfig(source=BUILD, out=DIR, worlds=50, seed=0, name="worldgen/dataworld-bench"))

reads as: open the build -> eligible worlds -> choose N spread over domains -> one cause and one consequence
task directory per world -> scan everything an agent can read for hidden truth -> manifests, dataset.toml,
splits.json, README.md -> rename into place. Same build and arguments give byte-identical output.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from worldgen import __version__
from worldgen.export import ExportError, leaks
from worldgen.export import files as fs
from worldgen.export.datasheet import readme
from worldgen.export.harbor import task_toml, toml_value, write_task
from worldgen.export.select import KINDS, MIN_REFERENCE_SCORE, Pick, choose, eligible
from worldgen.export.source import Build, World, open_build

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")
PREFIX = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
BENCH_SCHEMA_VERSION = "1.0"
DATASET_VERSION = "1.0"


@dataclass(frozen=True)
class BenchConfig:
    source: Path
    out: Path
    worlds: int = 50
    seed: int = 0
    name: str = "worldgen/dataworld-bench"
    prefix: str = "dataworld"


@dataclass
class BenchSummary:
    out: Path
    worlds: int
    tasks: int
    eligible: int
    records: list[dict] = field(default_factory=list)


def validate(cfg: BenchConfig) -> None:
    if isinstance(cfg.worlds, bool) or not isinstance(cfg.worlds, int) or cfg.worlds < 1:
        raise ExportError(f"--worlds must be a positive integer, got {cfg.worlds!r}")
    if not NAME.match(cfg.name):
        raise ExportError(f"--name {cfg.name!r} must look like org/name (lower case letters, digits, . _ -)")
    if not PREFIX.match(cfg.prefix):
        raise ExportError(f"--prefix {cfg.prefix!r} must be lower case letters, digits and dashes")


def world_tokens(world_ids: list[str]) -> dict[str, str]:
    """A short stable token per world: 'p' + the first hex digits of sha256(world id), 6 unless that collides."""
    digests = {w: hashlib.sha256(w.encode()).hexdigest() for w in world_ids}
    for width in range(6, 65):
        tokens = {w: "p" + d[:width] for w, d in digests.items()}
        if len(set(tokens.values())) == len(tokens):
            return tokens
    raise ExportError("duplicate world ids in the build")  # identical ids are the only way to get here


def export_bench(cfg: BenchConfig) -> BenchSummary:
    validate(cfg)
    build = open_build(cfg.source)
    fs.refuse_inside(cfg.out, cfg.source, "--from")
    candidates = eligible(build.worlds)
    picks = choose(candidates, cfg.worlds, cfg.seed)
    tokens = world_tokens([p.world.world_id for p in picks])
    org = cfg.name.split("/")[0]
    with fs.atomic_dir(cfg.out, "bench") as tmp:
        records, problems = [], []
        for pick in picks:
            records += _write_world(tmp, pick, tokens[pick.world.world_id], org, cfg.prefix, build, problems)
        if problems:
            shown = "; ".join(problems[:5])
            raise ExportError(f"refusing to finish: {len(problems)} hidden-truth problem(s) in the export: {shown}")
        digests = {r["id"]: fs.harbor_digest(tmp / r["id"]) for r in records}
        fs.write_json(tmp / "sample_manifest.json", records)
        (tmp / "dataset.toml").write_text(dataset_toml(cfg, org, digests), encoding="utf-8")
        fs.write_json(tmp / "splits.json", splits(cfg, build, picks, tokens, records, digests, len(candidates)))
        (tmp / "README.md").write_text(readme(cfg, build, records, len(candidates)), encoding="utf-8")
    return BenchSummary(cfg.out, len(picks), len(records), len(candidates), records)


# size: one world's task directories need where they go, what they show and what they are checked against
def _write_world(tmp: Path, pick: Pick, token: str, org: str, prefix: str, build: Build, problems: list) -> list[dict]:
    world, records, first = pick.world, [], None
    hidden = leaks.world_needles(world)
    for k, task in enumerate(pick.tasks, start=1):
        dirname = f"{prefix}-{token}-{KINDS[k - 1]}-{k}"
        record = manifest_record(dirname, world, task, token)
        write_task(tmp / dirname, world, task, _toml(org, dirname, record, world, build), linked_from=first)
        first = first or tmp / dirname
        problems += scan_task(tmp / dirname, world, task, hidden)
        records.append(record)
    return records


def scan_task(task_dir: Path, world: World, task, world_needles: set[str]) -> list[str]:
    """The hidden-truth scan of what an agent can read in one exported task."""
    needles = world_needles | leaks.task_needles(task)
    where = task_dir.name
    problems = []
    for rel in ("instruction.md", "environment/Dockerfile"):
        text = (task_dir / rel).read_text(encoding="utf-8")
        problems += leaks.scan_text(text, needles, f"{where}/{rel}")
    problems += leaks.scan_listing((task_dir / "instruction.md").read_text(encoding="utf-8"), world, task, where)
    env = task_dir / "environment"
    data = sorted((env / "data").iterdir()) if (env / "data").is_dir() else []
    strays = [p for p in fs.tree_files(env) if p.parent != env / "data" and p != env / "Dockerfile"]
    problems += [f"{where}/{p.relative_to(task_dir)}: not an observed file" for p in strays]
    problems += leaks.scan_data(data, world, f"{where}/environment/data")
    if sorted(p.name for p in data) != world.observed:
        problems.append(f"{where}: environment/data does not hold exactly the world's observed files")
    return problems


def manifest_record(dirname: str, world: World, task, token: str) -> dict:
    systems = world.systems
    return {
        "id": dirname,
        "task": task.task_id,
        "world": world.world_id,
        "world_token": token,
        "domain": world.domain,
        "kind": task.kind,
        "variable": task.variable,
        "difficulty": world.depth(task),
        "systems": len({systems.get(f, f) for f in world.observed}),
        "files": len(world.observed),
        "task_systems": len({systems.get(f, f) for f in task.files}),
        "task_files": len(task.files),
        "formats": world.formats,
        "defect_kinds": world.defect_kinds,
        "rubric_items": len(task.rubric),
        "positive_items": sum(i.polarity == "positive" for i in task.rubric),
        "negative_items": sum(i.polarity == "negative" for i in task.rubric),
        "reference_score": task.reference_score,
    }


def _toml(org: str, dirname: str, record: dict, world: World, build: Build) -> str:
    label = record["variable"].replace("_", " ")
    question = (
        f"what drove the change in {label}?"
        if record["kind"] == "cause"
        else f"what does {label} affect, and how much?"
    )
    description = (
        f"{record['kind'].capitalize()} analysis, {question} Files from {record['systems']} business systems of a "
        f"{world.domain.replace('_', ' ')} organisation (worldgen world {world.world_id})."
    )
    metadata = {
        "domain": world.domain,
        "kind": record["kind"],
        "variable": record["variable"],
        "difficulty": record["difficulty"],
        "world": world.world_id,
        "world_token": record["world_token"],
        "source_task": record["task"],
        "persona": world.meta.get("persona_id", ""),
        "systems": record["systems"],
        "files": record["files"],
        "build_seed": build.settings.get("seed", 0),
        "build_size": build.settings.get("size", ""),
        "worldgen_version": __version__,
    }
    keywords = ["data-analysis", "worldgen", world.domain, record["kind"]]
    return task_toml(f"{org}/{dirname}", description, keywords, metadata)


def dataset_toml(cfg: BenchConfig, org: str, digests: dict[str, str]) -> str:
    lines = [
        "[dataset]",
        f"name = {toml_value(cfg.name)}",
        f"version = {toml_value(DATASET_VERSION)}",
        f"description = {toml_value(_description(cfg, len(digests)))}",
        f"keywords = {toml_value(['data-analysis', 'worldgen', 'dataworld-bench', 'causal-analysis'])}",
    ]
    for dirname, digest in sorted(digests.items()):
        lines += ["", "[[tasks]]", f"name = {toml_value(f'{org}/{dirname}')}", f"digest = {toml_value(digest)}"]
    return "\n".join(lines) + "\n"


def _description(cfg: BenchConfig, tasks: int) -> str:
    return (
        f"{tasks} data-analysis tasks over {tasks // 2} audited synthetic data worlds made by worldgen "
        f"{__version__}: one cause and one consequence question per world, graded by rubric."
    )


# size: splits.json records every input of the export, so each is passed by name
def splits(cfg, build: Build, picks: list[Pick], tokens, records: list[dict], digests, n_eligible: int) -> dict:
    test_ids = {p.world.world_id for p in picks}
    return {
        "export": "bench",
        "schema_version": BENCH_SCHEMA_VERSION,
        "name": cfg.name,
        "worldgen_version": __version__,
        "seed": cfg.seed,
        "worlds_requested": cfg.worlds,
        "build": build.settings,
        "selection": {
            "eligible_worlds": n_eligible,
            "rule": "audit passed every check; the deepest cause and consequence tasks whose reference answer "
            f"scores >= {MIN_REFERENCE_SCORE}; domains round-robin in a seeded order",
        },
        "test": [
            {
                "world_id": p.world.world_id,
                "index": p.world.index,
                "domain": p.world.domain,
                "token": tokens[p.world.world_id],
                "observed_sha256": p.world.observed_digest,
                "tasks": {r["id"]: digests[r["id"]] for r in records if r["world"] == p.world.world_id},
            }
            for p in picks
        ],
        "train": [w.world_id for w in build.worlds if w.world_id not in test_ids],
        "bench_sha256": hashlib.sha256("".join(f"{k}\0{v}\n" for k, v in sorted(digests.items())).encode()).hexdigest(),
    }

"""`worldgen build`: many worlds, in parallel, resumable, each committed atomically.

World k depends only on (seed, k, size, persona pool, defect settings), never on N, the worker count or
the order in which workers finish. `build.json` pins those settings for an output directory so that a
re-run resumes the same build instead of mixing two; `manifest.jsonl` is rewritten in world order.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from contracts.errors import InputError, WorldFormatError, did_you_mean
from contracts.model import SCHEMA_VERSION, Persona
from personas import builtin_personas, check_against_packs, load_persona_file
from worldgen.contract import SIZES, WorldSpec
from worldgen.observe import DefectSettings
from worldgen.packs import builtin_domains, builtin_packs, get_pack
from worldgen.pipeline import build_world
from worldgen.seeding import check_seed, rng_for
from worldgen.write import dump_json


@dataclass(frozen=True)
class BuildConfig:
    n: int
    seed: int = 0
    out: Path = Path("output")
    workers: int = 1
    size: str = "default"
    domains: tuple[str, ...] = ()
    personas_file: Path | None = None
    defect_scale: float = 1.0


@dataclass
class BuildSummary:
    built: int = 0
    skipped: int = 0
    entries: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)


def validate_config(cfg: BuildConfig) -> list[Persona]:
    """Check every flag before anything is written; return the persona pool."""
    if isinstance(cfg.n, bool) or not isinstance(cfg.n, int) or cfg.n < 1:
        raise InputError(f"--n must be a positive integer, got {cfg.n!r}")
    check_seed(cfg.seed)
    if cfg.workers < 1 or cfg.workers > 256:
        raise InputError(f"--workers must be between 1 and 256, got {cfg.workers}")
    if cfg.size not in SIZES:
        raise InputError(f"--size {cfg.size!r} is not one of {', '.join(SIZES)}{did_you_mean(cfg.size, SIZES)}")
    if not 0 <= cfg.defect_scale <= 5:
        raise InputError(f"--defect-scale must be in [0, 5], got {cfg.defect_scale}")
    domains = builtin_domains()
    for d in cfg.domains:
        if d not in domains:
            raise InputError(f"unknown domain {d!r}{did_you_mean(d, domains)}; known: {', '.join(domains)}")
    if cfg.personas_file is not None:
        pool = load_persona_file(cfg.personas_file)
        check_against_packs(pool, builtin_packs(), str(cfg.personas_file))
    else:
        pool = builtin_personas()
    if cfg.domains:
        pool = [p for p in pool if p.domain in cfg.domains]
        if not pool:
            raise InputError(f"no persona belongs to the domains {', '.join(cfg.domains)}")
    return sorted(pool, key=lambda p: p.id)


def persona_for(seed: int, index: int, pool: list[Persona]) -> Persona:
    return pool[int(rng_for(seed, index, "persona").integers(len(pool)))]


def _settings_fingerprint(cfg: BuildConfig, pool: list[Persona]) -> dict:
    personas_sha = hashlib.sha256("\n".join(p.model_dump_json() for p in pool).encode()).hexdigest()
    return {
        "schema_version": SCHEMA_VERSION,
        "seed": cfg.seed,
        "size": cfg.size,
        "domains": sorted(cfg.domains),
        "personas_sha256": personas_sha,
        "defect_scale": cfg.defect_scale,
    }


def prepare_out(cfg: BuildConfig, pool: list[Persona]) -> dict[int, dict]:
    """Create or resume the output directory; return the finished worlds' manifest entries by index."""
    worlds = cfg.out / "worlds"
    try:
        worlds.mkdir(parents=True, exist_ok=True)
        probe = cfg.out / f".write-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(f"cannot write to --out {cfg.out}: {exc.strerror or exc}") from None
    fingerprint = _settings_fingerprint(cfg, pool)
    build_file = cfg.out / "build.json"
    if build_file.exists():
        try:
            previous = json.loads(build_file.read_text())
        except ValueError:
            raise WorldFormatError(
                f"{build_file}: corrupt build settings (not JSON); remove it or use another --out"
            ) from None
        changed = sorted(k for k in fingerprint if previous.get(k) != fingerprint[k])
        if changed:
            raise InputError(
                f"--out {cfg.out} holds a build with different {', '.join(changed)}; use another --out to keep both"
            )
    else:
        dump_json(build_file, fingerprint)
    read_manifest(cfg.out / "manifest.jsonl")  # refuse a corrupt manifest before touching anything
    done: dict[int, dict] = {}  # the world directories, not the manifest, say what is finished
    for stale in worlds.glob(".tmp-*"):  # a crashed run's half-written world
        shutil.rmtree(stale, ignore_errors=True)
    for world in worlds.iterdir():
        meta = world / "world.json"
        if world.name.startswith(".") or not meta.is_file():
            continue
        try:
            info = json.loads(meta.read_text())
            done[int(info["index"])] = {k: info[k] for k in ("world_id", "seed", "index", "domain", "status")} | {
                "path": f"worlds/{world.name}"
            }
        except (ValueError, KeyError, TypeError):
            raise WorldFormatError(f"{meta}: corrupt world manifest; delete {world} to rebuild it") from None
    return done


def read_manifest(path: Path) -> dict[int, dict]:
    entries: dict[int, dict] = {}
    if not path.exists():
        return entries
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            entries[int(entry["index"])] = entry
        except (ValueError, KeyError, TypeError):
            raise WorldFormatError(
                f"{path}: line {number} is not a manifest entry; fix or delete the manifest"
            ) from None
    return entries


def _build_one(seed: int, index: int, persona: Persona, size: str, worlds: str, scale: float) -> tuple[dict, dict]:
    world = WorldSpec(seed=seed, index=index, size=size, persona=persona)
    result = build_world(world, get_pack(persona.domain), Path(worlds), DefectSettings(scale=scale))
    return result.entry, {"world_id": result.world_id, "index": index, **result.timings}


def run_build(cfg: BuildConfig, on_world: Callable[[dict], None] | None = None) -> BuildSummary:
    pool = validate_config(cfg)
    done = prepare_out(cfg, pool)
    summary = BuildSummary(skipped=sum(1 for k in done if k < cfg.n))
    todo = [k for k in range(cfg.n) if k not in done]
    jobs = [
        (cfg.seed, k, persona_for(cfg.seed, k, pool), cfg.size, str(cfg.out / "worlds"), cfg.defect_scale) for k in todo
    ]
    try:
        if cfg.workers == 1 or len(jobs) <= 1:
            for job in jobs:
                _record(summary, done, *_build_one(*job), on_world)
        else:
            # spawn, not fork: forking after polars has started its thread pool can deadlock the children.
            context = multiprocessing.get_context("spawn")
            # Worlds are the unit of parallelism: each worker gets cores // workers polars and BLAS threads (the
            # audit's regressions use BLAS), so K workers never oversubscribe the machine.
            threads = str(max(1, (os.cpu_count() or 1) // cfg.workers))
            for knob in ("POLARS_MAX_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ.setdefault(knob, threads)
            with ProcessPoolExecutor(max_workers=cfg.workers, mp_context=context) as pool_exec:
                futures = [pool_exec.submit(_build_one, *job) for job in jobs]
                for future in as_completed(futures):
                    _record(summary, done, *future.result(), on_world)
    finally:
        _write_manifest(cfg.out, done)
        _append_timings(cfg.out, summary.timings)
    summary.entries = [done[k] for k in sorted(done)]
    return summary


def _record(summary: BuildSummary, done: dict, entry: dict, timing: dict, on_world) -> None:
    entry["path"] = f"worlds/{entry['world_id']}"
    done[entry["index"]] = entry
    summary.built += 1
    summary.timings.append(timing)
    if on_world:
        on_world(entry)


def _write_manifest(out: Path, done: dict[int, dict]) -> None:
    tmp = out / "manifest.jsonl.tmp"
    with tmp.open("w") as f:
        for k in sorted(done):
            f.write(json.dumps(done[k], sort_keys=True) + "\n")
    tmp.replace(out / "manifest.jsonl")


def _append_timings(out: Path, timings: list[dict]) -> None:
    """Wall-clock timings stay outside the worlds, which must be byte-identical across runs."""
    if timings:
        with (out / "timings.jsonl").open("a") as f:
            for t in sorted(timings, key=lambda t: t["index"]):
                f.write(json.dumps(t) + "\n")

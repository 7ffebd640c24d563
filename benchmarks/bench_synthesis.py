"""CPU time of the synthesis stages before the projection, per world, in this process.

    python benchmarks/bench_synthesis.py --n 40
    ... --profile 10 --top 40        # cProfile over the first 10 worlds, the top lines by cumulative time

Runs `pipeline.synthesize`'s stages one by one (dag, contract, canonical = plant_trend, seal) for worlds
0..n-1 of a default build with seed 0 and reports the median and total CPU seconds (user + system,
`time.process_time`) of each. `--digest` also prints a digest of every sealed contract and canonical table,
a quick check (not a substitute for diffing a build) that a change left the worlds' bytes alone. Wall time
is not reported: on a shared machine it is noise. Polars and BLAS run one thread each, as in a build's
worker on a machine it fills: an idle BLAS thread spins, and on a busy machine that spinning reads as six
times the sealing stage's CPU.
"""

from __future__ import annotations

# ruff: noqa: E402 - the thread knobs are set before numpy and polars are imported
import os

for _knob in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_knob, "1")  # before numpy and polars are imported: they read these once

import argparse
import cProfile
import hashlib
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's worldgen, not the installed one

from contracts.hashing import column_sha256
from worldgen import phenomena, skeleton
from worldgen.build import BuildConfig, persona_for, validate_config
from worldgen.contract import WorldSpec, build_contract
from worldgen.observe import DefectSettings
from worldgen.packs import get_pack
from worldgen.pipeline import plant_trend
from worldgen.seeding import Streams

STAGES = ("dag", "contract", "canonical", "seal")


def synthesize_timed(world: WorldSpec) -> tuple[dict[str, float], str]:
    """CPU seconds per stage of one world, and a digest of its sealed contract and canonical tables."""
    pack, laps = get_pack(world.persona.domain), {}
    clock = time.process_time()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.process_time()
        laps[stage] = now - clock
        clock = now

    streams = Streams(world.seed, world.index)
    dag = skeleton.sample_skeleton(pack, streams.rng("skeleton"), world.persona.focus)
    lap("dag")
    draft = build_contract(world, pack, dag, streams)
    lap("contract")
    draft.attempt, state = plant_trend(draft, streams)
    lap("canonical")
    contract = phenomena.seal(draft, state, DefectSettings().rows_lost())  # as pipeline.synthesize seals
    lap("seal")
    digest = hashlib.sha256(contract.model_dump_json().encode())
    for name in sorted(state.tables):
        for column in sorted(state.tables[name]):
            digest.update(f"{name}.{column}:{column_sha256(state.tables[name][column])}".encode())
    return laps, digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", default="default")
    parser.add_argument("--profile", type=int, default=0, help="cProfile the first K worlds instead")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--digest", action="store_true")
    args = parser.parse_args()
    pool = validate_config(BuildConfig(n=args.n, seed=args.seed, size=args.size))
    worlds = [WorldSpec(args.seed, k, args.size, persona_for(args.seed, k, pool)) for k in range(args.n)]
    get_pack(worlds[0].persona.domain)  # warm the pack cache outside the first world's figures
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for world in worlds[: args.profile]:
            synthesize_timed(world)
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(args.sort).print_stats(args.top)
        print(out.getvalue())
        return
    per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
    for world in worlds:
        laps, digest = synthesize_timed(world)
        for stage in STAGES:
            per_stage[stage].append(laps[stage])
        if args.digest:
            print(world.world_id, digest)
    totals = [sum(laps) for laps in zip(*per_stage.values(), strict=True)]
    print(f"{'stage':<10} {'median':>8} {'mean':>8} {'total':>8}  (CPU-s, {args.n} worlds)")
    for stage, values in [*per_stage.items(), ("all", totals)]:
        print(f"{stage:<10} {statistics.median(values):8.3f} {statistics.fmean(values):8.3f} {sum(values):8.2f}")


if __name__ == "__main__":
    main()

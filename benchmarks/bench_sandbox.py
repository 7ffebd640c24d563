"""Benchmark the agents' sandbox and the scripted agents.

    python benchmarks/bench_sandbox.py --build output/ --workers 2          # an existing build
    python benchmarks/bench_sandbox.py --n 20 --size default --workers 2    # builds one first

Reports: sandbox start (until the interpreter answers) and per-step overhead (round trip of an empty cell,
and of a state snapshot), median over repeats, in ms; then the reference and naive agents over every task
of the build: mean score, how many tasks whose stored reference score is >= 0.95 the reference agent also
brings to >= 0.95, and episodes per minute with K parallel episodes. Results go to
benchmarks/results/bench_sandbox.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from worldgen.agents.runner import RunConfig, run_agent
from worldgen.sandbox import Session
from worldgen.tasksource import find_tasks


def overhead(data: Path, repeats: int) -> dict:
    starts, steps, states = [], [], []
    for _ in range(repeats):
        tick = time.perf_counter()
        session = Session(data)
        starts.append(time.perf_counter() - tick)
        for _ in range(20):
            tick = time.perf_counter()
            session.run("pass")
            steps.append(time.perf_counter() - tick)
        session.run("import polars as pl\nframe = pl.DataFrame({'a': list(range(1000))})")
        for _ in range(5):
            tick = time.perf_counter()
            session.state()
            states.append(time.perf_counter() - tick)
        isolated = session.isolated
        session.close()
    return {
        "isolated": isolated,
        "start_ms": round(1000 * statistics.median(starts), 1),
        "step_ms": round(1000 * statistics.median(steps), 2),
        "state_ms": round(1000 * statistics.median(states), 2),
    }


def agent_run(agent: str, build: Path, workers: int) -> dict:
    refs = find_tasks(build)
    out = Path(tempfile.mkdtemp(prefix=f"wg-bench-{agent}-"))
    started = time.perf_counter()
    summary = run_agent(RunConfig(agent=agent, tasks=refs, out=out, workers=workers))
    elapsed = time.perf_counter() - started
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/result.json")}
    eligible = [r for r in refs if r.task.reference_score >= 0.95]
    reached = [r for r in eligible if results[r.task_id]["status"] == "done" and results[r.task_id]["score"] >= 0.95]
    report = {
        "agent": agent,
        "tasks": len(refs),
        "errors": summary.errors,
        "mean_score": round(summary.mean, 4) if summary.mean is not None else None,
        "eligible": len(eligible),
        "eligible_reached_0.95": len(reached),
        "missed": sorted(r.task_id for r in eligible if r not in reached)[:20],
        "episodes_per_minute": round(60 * summary.ran / elapsed, 2),
        "median_wall_s": round(statistics.median(r["wall_seconds"] for r in results.values()), 2),
        "seconds": round(elapsed, 1),
    }
    shutil.rmtree(out, ignore_errors=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help="an existing build directory")
    parser.add_argument("--n", type=int, default=20, help="worlds to build when --build is not given")
    parser.add_argument("--size", default="default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2, help="parallel episodes")
    parser.add_argument("--repeats", type=int, default=10, help="sessions for the overhead figures")
    parser.add_argument("--agents", nargs="+", default=["reference", "naive"])
    args = parser.parse_args()
    build = args.build
    if build is None:
        build = Path(tempfile.mkdtemp(prefix="wg-bench-build-"))
        worldgen = str(Path(sys.executable).with_name("worldgen"))
        command = [worldgen, "build", "--n", str(args.n), "--seed", str(args.seed), "--size", args.size]
        subprocess.run([*command, "--workers", str(args.workers), "--out", str(build), "--quiet"], check=True)
    world = sorted((build / "worlds").iterdir())[0]
    report = {"build": str(build), "workers": args.workers, "overhead": overhead(world / "observed", args.repeats)}
    report["agents"] = [agent_run(agent, build, args.workers) for agent in args.agents]
    folder = Path(__file__).parent / "results"
    folder.mkdir(exist_ok=True)
    (folder / "bench_sandbox.json").write_text(json.dumps(report, indent=1) + "\n")
    o = report["overhead"]
    print(
        f"sandbox (isolated={o['isolated']}): start {o['start_ms']} ms, step {o['step_ms']} ms, state {o['state_ms']} ms"
    )
    print("\n| agent | tasks | mean score | ref>=0.95 tasks reaching 0.95 | errors | episodes/min | median s/episode |")
    print("|---|---|---|---|---|---|---|")
    for a in report["agents"]:
        print(
            f"| {a['agent']} | {a['tasks']} | {a['mean_score']} | {a['eligible_reached_0.95']}/{a['eligible']} | "
            f"{a['errors']} | {a['episodes_per_minute']} | {a['median_wall_s']} |"
        )


if __name__ == "__main__":
    main()

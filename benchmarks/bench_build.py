"""Benchmark `worldgen build` by n and size: wall time, worlds/s, stage medians, peak RSS, disk, cost model.

    python benchmarks/bench_build.py --n 50 200 1000 --sizes small default large
    python benchmarks/bench_build.py --n 50 --sizes default --workers 1 2          # scaling with workers
    python benchmarks/bench_build.py --n 200 --sizes default --executor ray        # a local Ray, or --address

Each configuration runs the installed `worldgen build` in a fresh output directory, from a fresh measuring
process, so that its figures are its own:
- wall time and worlds/s of the whole command (start-up included: that is what a user waits for);
- CPU-seconds per world: user + system time of the command and every process it waited for (its workers;
  with Ray, the task's own stage seconds instead, since Ray's workers are not the command's children);
- per-stage medians from the build's timings.jsonl (synthesis = dag .. write; then audit, tasks, and the
  driver's commit with Ray);
- peak RSS: the largest process exactly (ru_maxrss), and per role by sampling every process of the build
  every 0.2 s (the driver, and the largest worker);
- disk bytes per world (the files' sizes) and of the whole output.
The cost model (CPU-seconds and disk per world by size, and what a number of worlds costs on C cores) is
printed below the table; `--json` keeps every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SYNTHESIS = ("dag", "contract", "canonical", "projection", "write")
STAGES = (*SYNTHESIS, "audit", "tasks", "pack", "commit")  # pack, commit: Ray only (task packs, driver writes)
SAMPLE_SECONDS = 0.2
MIB = 1 << 20


class _Sampler(threading.Thread):
    """Peak RSS of the command and each of its descendants, sampled every SAMPLE_SECONDS: pid -> (role, bytes)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peaks: dict[int, tuple[str, int]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self.stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                try:
                    rss, cmd = p.memory_info().rss, " ".join(p.cmdline())
                except psutil.Error:
                    continue
                if rss > self.peaks.get(p.pid, ("", 0))[1]:
                    self.peaks[p.pid] = (_role(p.pid, self.pid, cmd), rss)
            self.stop.wait(SAMPLE_SECONDS)


def measure(spec: dict) -> dict:
    """One build, in this (fresh) process: figures of the command and its descendants only."""
    n, size, workers, executor = spec["n"], spec["size"], spec["workers"], spec["executor"]
    out = Path(tempfile.mkdtemp(prefix="wg-bench-"))
    command = [str(Path(sys.executable).with_name("worldgen")), "build", "--n", str(n), "--seed", str(spec["seed"])]
    command += ["--size", size, "--out", str(out), "--quiet"]
    if workers is not None:
        command += ["--workers", str(workers)]
    if executor == "ray":
        command += ["--executor", "ray"] + (["--address", spec["address"]] if spec["address"] else [])
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = _Sampler(process.pid)
    sampler.start()
    _, stderr = process.communicate()
    elapsed = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    peaks = sampler.peaks
    if process.returncode != 0:
        raise SystemExit(f"build failed ({process.returncode}): {stderr.strip()}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    metas = [json.loads((out / "worlds" / t["world_id"] / "world.json").read_text()) for t in timings]
    disk = [_bytes(out / "worlds" / t["world_id"]) for t in timings]
    stage_sum = [sum(t.get(s, 0.0) for s in STAGES if s != "commit") for t in timings]  # a task's seconds
    workers_rss = [rss for role, rss in peaks.values() if role == "worker"]
    result = {
        "n": n,
        "size": size,
        "workers": workers if workers is not None else "default",
        "executor": executor,
        "wall_s": round(elapsed, 2),
        "worlds_per_s": round(n / elapsed, 3),
        "cpu_s_per_world": round((usage.ru_utime + usage.ru_stime) / n, 3) if executor == "local" else None,
        "task_s_per_world": round(statistics.mean(stage_sum), 3),
        "stage_median_s": {s: round(statistics.median(t[s] for t in timings), 4) for s in STAGES if s in timings[0]},
        "synthesis_median_s": round(statistics.median(sum(t[s] for s in SYNTHESIS) for t in timings), 3),
        "median_events": int(statistics.median(m["sizes"]["events"] for m in metas)),
        "pass_rate": round(sum(m["status"] == "pass" for m in metas) / len(metas), 3),
        "largest_process_mib": round(usage.ru_maxrss / 1024, 1),  # exact: ru_maxrss of the largest descendant
        "worker_peak_mib": round(max(workers_rss) / MIB, 1) if workers_rss else None,  # sampled
        "driver_peak_mib": round(peaks.get(process.pid, ("", 0))[1] / MIB, 1),  # sampled
        "disk_bytes_per_world": int(statistics.mean(disk)),
        "disk_bytes_per_world_median": int(statistics.median(disk)),
        "disk_bytes_total": _bytes(out),
        "out": str(out) if spec["keep"] else None,
    }
    if not spec["keep"]:
        shutil.rmtree(out)
    return result


def _role(pid: int, driver: int, cmd: str) -> str:
    if pid == driver:
        return "driver"
    if "spawn_main" in cmd and "resource_tracker" not in cmd:
        return "worker"  # a local worker process
    if cmd.startswith("ray::") and not cmd.split()[0].endswith("Agent"):
        return "worker"  # a Ray worker (ray::build_task or ray::IDLE), when the command started Ray itself
    return "other"  # Ray's own services, multiprocessing's resource tracker


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def run_fresh(args: dict) -> dict:
    """measure() in a new Python process: ru_maxrss and CPU time of children only ever grow within one."""
    done = subprocess.run(
        [sys.executable, __file__, "--measure", json.dumps(args)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip() or f"measurement failed: {args}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    stages = [s for s in STAGES if any(s in r["stage_median_s"] for r in results)]
    head = ["n", "size", "workers", "wall s", "worlds/s", "CPU-s/world", *stages, "peak RSS/worker MiB"]
    head += ["largest process MiB", "disk MB/world", "events/world", "pass rate"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cpu = r["cpu_s_per_world"] if r["cpu_s_per_world"] is not None else f"{r['task_s_per_world']} (tasks)"
        cells = [r["n"], r["size"], r["workers"], r["wall_s"], r["worlds_per_s"], cpu]
        cells += [r["stage_median_s"].get(s, "-") for s in stages]
        cells += [r["worker_peak_mib"] or "-", r["largest_process_mib"], round(r["disk_bytes_per_world"] / 1e6, 2)]
        cells += [r["median_events"], r["pass_rate"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def cost_model(results: list[dict], worlds: int, cores: int) -> str:
    """Per size, from its largest run: CPU-seconds and disk per world, and `worlds` worlds on `cores` cores."""
    lines = [f"Cost model ({worlds:,} worlds on {cores} cores, linear in both; from the largest n per size):", ""]
    lines += [
        "| size | from n | CPU-s/world | disk MB/world | CPU-hours | wall on the cores | disk |",
        "|" + "---|" * 7,
    ]
    for size in ("small", "default", "large"):
        runs = [r for r in results if r["size"] == size]
        if not runs:
            continue
        r = max(runs, key=lambda r: (r["n"], r["executor"] == "local"))
        cpu = r["cpu_s_per_world"] if r["cpu_s_per_world"] is not None else r["task_s_per_world"]
        disk = r["disk_bytes_per_world"]
        hours = worlds * cpu / 3600
        lines.append(
            f"| {size} | {r['n']} | {cpu} | {disk / 1e6:.2f} | {hours:,.1f} | {_duration(hours * 3600 / cores)} "
            f"| {worlds * disk / 1e9:,.0f} GB |"
        )
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[50, 200, 1000])
    parser.add_argument("--sizes", nargs="+", default=["small", "default", "large"])
    parser.add_argument("--workers", type=int, nargs="+", default=None, help="default: the command's own default")
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cluster-worlds", type=int, default=100_000, help="worlds in the cost model")
    parser.add_argument("--cluster-cores", type=int, default=256, help="cores in the cost model")
    parser.add_argument("--keep", action="store_true", help="keep the output directories")
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the fresh measuring process
        print(json.dumps(measure(json.loads(args.measure))))
        return
    results = []
    for size in args.sizes:
        for n in args.n:
            for workers in args.workers or [None]:
                spec = {"n": n, "size": size, "workers": workers, "seed": args.seed}
                spec |= {"executor": args.executor, "address": args.address, "keep": args.keep}
                results.append(run_fresh(spec))
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(table(results))
    print(f"\ncores available: {len(os.sched_getaffinity(0))}; seed {args.seed}; executor {args.executor}\n")
    print(cost_model(results, args.cluster_worlds, args.cluster_cores))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

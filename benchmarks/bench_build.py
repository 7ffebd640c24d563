"""Benchmark `worldgen build`: per-stage time, worlds per second and peak RSS, for 1 and 2 workers.

    python benchmarks/bench_build.py --n 50 --size default --workers 1 2

Each configuration runs the installed `worldgen` command in a fresh output directory as a child process,
so peak RSS (ru_maxrss of the largest descendant: the builder or one of its workers) is measured per run.
Stage times come from the build's timings.jsonl (kept outside the worlds, which must stay byte-identical).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ("dag", "contract", "canonical", "projection", "write")  # synthesis; the audit is reported beside it


def run(n: int, size: str, workers: int, seed: int) -> dict:
    out = Path(tempfile.mkdtemp(prefix="wg-bench-"))
    worldgen = str(Path(sys.executable).with_name("worldgen"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(
        [
            worldgen,
            "build",
            "--n",
            str(n),
            "--seed",
            str(seed),
            "--size",
            size,
            "--workers",
            str(workers),
            "--out",
            str(out),
            "--quiet",
        ],
        check=True,
        capture_output=True,
    )
    elapsed = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    events = [
        json.loads((out / "worlds" / t["world_id"] / "world.json").read_text())["sizes"]["events"] for t in timings
    ]
    per_world = [sum(t[s] for s in STAGES) for t in timings]
    audits = [t.get("audit", 0.0) for t in timings]
    verdicts = [json.loads((out / "worlds" / t["world_id"] / "world.json").read_text())["status"] for t in timings]
    result = {
        "n": n,
        "size": size,
        "workers": workers,
        "wall_s": round(elapsed, 2),
        "worlds_per_s": round(n / elapsed, 3),
        "median_world_s": round(statistics.median(per_world), 3),
        "p95_world_s": round(sorted(per_world)[int(0.95 * (len(per_world) - 1))], 3),
        "stage_median_s": {s: round(statistics.median(t[s] for t in timings), 4) for s in STAGES},
        "median_events": int(statistics.median(events)),
        "median_audit_s": round(statistics.median(audits), 3),
        "pass_rate": round(sum(v == "pass" for v in verdicts) / len(verdicts), 3),
        "peak_rss_mib": round(max(peak_kib, before) / 1024, 1),
        "peak_rss_grew": peak_kib > before,
    }
    shutil.rmtree(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--size", default="default")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    results = [run(args.n, args.size, w, args.seed) for w in args.workers]
    base = results[0]["worlds_per_s"]
    print(
        "| workers | worlds/s (build+audit+tasks) | speed-up | median synthesis s/world | p95 | dag | contract | canonical "
        "| projection | write | median audit s/world | pass rate | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        st = r["stage_median_s"]
        cells = [
            r["workers"],
            r["worlds_per_s"],
            f"{r['worlds_per_s'] / base:.2f}x",
            r["median_world_s"],
            r["p95_world_s"],
            *(st[s] for s in STAGES),
            r["median_audit_s"],
            r["pass_rate"],
            r["peak_rss_mib"],
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(f"n={args.n} size={args.size} median events/world={results[0]['median_events']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()

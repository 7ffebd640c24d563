"""Peak memory per worker and per audit, by world size: the figures behind WORKER_PEAK_MIB and the README.

    python benchmarks/bench_memory.py --sizes small default large --worlds 1 3

For each size and each world count K, a fresh driver process runs `run_build` with one isolated worker that
builds (synthesis + audit + tasks) K worlds in a row; the driver reports the worker's peak RSS (ru_maxrss of
its waited-for children) and its own. A worker whose peak grows with K would hold memory across worlds.
Then a fresh process audits one world of that build alone (`auditors.audit_world`), reporting its peak RSS
and wall time, and a fresh process that only imports worldgen gives the fixed cost of the interpreter and
libraries. Every measurement is its own process, so no peak leaks into the next (ru_maxrss only grows).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DRIVER = r"""
import json, resource, sys, time
from pathlib import Path
from worldgen.build import BuildConfig, run_build
out, size, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
started = time.perf_counter()
run_build(BuildConfig(n=n, seed=0, out=out, size=size, workers=1, isolate=True))
print(json.dumps({
    "worker_peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    "parent_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "seconds": time.perf_counter() - started,
}))
"""

AUDIT = r"""
import json, resource, sys, time
from pathlib import Path
from auditors import audit_world
started = time.perf_counter()
report = audit_world(Path(sys.argv[1]), write=False)
print(json.dumps({
    "audit_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "audit_seconds": time.perf_counter() - started,
    "verdict": report["verdict"],
}))
"""

IMPORTS = r"""
import json, resource
import worldgen.build, auditors, rubrics  # noqa: F401
print(json.dumps({"imports_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def python(code: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(size: str, worlds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="wg-mem-") as tmp:
        out = Path(tmp) / "out"
        build = python(DRIVER, str(out), size, str(worlds))
        world = sorted(p for p in (out / "worlds").iterdir() if not p.name.startswith("."))[0]
        events = json.loads((world / "world.json").read_text())["sizes"]["events"]
        audit = python(AUDIT, str(world))
    return {"size": size, "worlds": worlds, "events_world0": events, **build, **audit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "default", "large"])
    parser.add_argument("--worlds", nargs="+", type=int, default=[1, 3], help="worlds built by the one worker")
    args = parser.parse_args()
    rows = [python(IMPORTS) | {"size": "(imports only)"}]
    print(json.dumps(rows[0]), flush=True)
    for size in args.sizes:
        for worlds in args.worlds:
            started = time.perf_counter()
            row = measure(size, worlds)
            row["bench_seconds"] = time.perf_counter() - started
            rows.append(row)
            print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    print()
    print(
        "| size | worlds per worker | events (world 0) | worker peak RSS MiB | build parent MiB | audit of one world MiB | audit s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows[1:]:
        print(
            f"| {r['size']} | {r['worlds']} | {r['events_world0']:,} | {r['worker_peak_mib']:.0f} | "
            f"{r['parent_peak_mib']:.0f} | {r['audit_peak_mib']:.0f} | {r['audit_seconds']:.1f} |"
        )
    print(f"\nimports alone: {rows[0]['imports_mib']:.0f} MiB")


if __name__ == "__main__":
    main()

"""CPU time of the auditor per world, single-threaded, on an existing build; optionally a profile.

    python benchmarks/bench_audit.py /tmp/build                      # CPU-s per world: median, mean, max
    python benchmarks/bench_audit.py /tmp/build --check              # and each report equals its audit.json
    python benchmarks/bench_audit.py /tmp/build --profile 25         # and the top 25 functions (own time)

Every world is audited in this one process with `write=False` (as a build worker audits many worlds in a
row); the first world is audited once before timing starts, so the schema compile and imports are not
charged to it. CPU time is user + system time of this process (resource.getrusage), which with one
thread per library is the audit's own work and does not depend on what else the machine is running.
With `--check` each report is serialised as `audit_world` writes it and compared byte for byte with the
world's audit.json (written by the build's own audit).
"""

from __future__ import annotations

import os

# One thread per library before numpy or polars start: CPU time then measures the work, not the spinning.
for _name in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import cProfile  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# The auditor of this checkout (an editable install may point at another one).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditors import audit_world  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worlds(build: Path) -> list[Path]:
    root = build / "worlds" if (build / "worlds").is_dir() else build
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path, help="a build directory (holding worlds/) or a directory of worlds")
    parser.add_argument("--check", action="store_true", help="compare each report with the world's audit.json")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N functions")
    parser.add_argument("--callers", help="with --profile: also print the callers of functions matching this")
    parser.add_argument("--json", type=Path, help="write per-world CPU seconds here")
    args = parser.parse_args()
    worlds = _worlds(args.build)
    audit_world(worlds[0], write=False)  # warm-up: imports, the schema's validator
    # Timed in CPU seconds: on a shared machine wall time would charge other processes' work to polars.
    profile = cProfile.Profile(time.process_time) if args.profile else None
    seconds, differ = {}, []
    for world in worlds:
        start = _cpu()
        if profile is not None:
            profile.enable()
        report = audit_world(world, write=False)
        if profile is not None:
            profile.disable()
        seconds[world.name] = _cpu() - start
        if args.check:
            text = json.dumps(report.to_json(), indent=1, allow_nan=False) + "\n"
            if text != (world / "audit.json").read_text():
                differ.append(world.name)
    values = list(seconds.values())
    print(
        f"{len(values)} worlds: audit CPU-s per world median {statistics.median(values):.3f}, "
        f"mean {statistics.mean(values):.3f}, max {max(values):.3f}, total {sum(values):.2f}"
    )
    if args.check:
        print(f"audit.json byte-identical: {len(values) - len(differ)}/{len(values)}", *differ[:10])
    if args.json:
        args.json.write_text(json.dumps(seconds, indent=1) + "\n")
    if profile is not None:
        stats = pstats.Stats(profile, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(args.profile)
        if args.callers:
            stats.print_callers(args.callers)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

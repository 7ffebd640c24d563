"""`worldgen export bench|pool|check`: arguments and handlers (registered in worldgen/cli_export.py's EXPORTS).

Each handler returns the exit code; user errors raise WorldgenError subclasses, which the CLI prints as one
line with exit code 2. Heavy imports happen inside the handlers, so `worldgen --help` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from worldgen.export import ExportError


def _oserror(exc: OSError) -> ExportError:
    where = f" {exc.filename}" if exc.filename else ""
    return ExportError(f"cannot write the export:{where}: {exc.strerror or exc}")


def add_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", type=Path, required=True, help="a build directory (worldgen build --out)")
    p.add_argument("--out", type=Path, required=True, help="the bench directory to write (new, empty or an old bench)")
    p.add_argument("--worlds", type=int, default=50, help="test worlds, two tasks each (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the world draw (default 0)")
    p.add_argument("--name", default="worldgen/dataworld-bench", help="dataset name org/name (default %(default)s)")
    p.add_argument("--prefix", default="dataworld", help="task directory prefix (default %(default)s)")


def run_bench(args: argparse.Namespace) -> int:
    from worldgen.export.bench import BenchConfig, export_bench

    cfg = BenchConfig(args.source, args.out, args.worlds, args.seed, args.name, args.prefix)
    try:
        summary = export_bench(cfg)
    except OSError as exc:
        raise _oserror(exc) from None
    print(
        f"exported {summary.tasks} task(s) from {summary.worlds} of {summary.eligible} eligible world(s) to "
        f"{summary.out}; check it with `worldgen export check {summary.out}`"
    )
    return 0


def add_pool(p: argparse.ArgumentParser) -> None:
    from worldgen.export.rows import FORMATS

    p.add_argument("--from", dest="source", type=Path, required=True, help="a build directory (worldgen build --out)")
    p.add_argument("--out", type=Path, required=True, help="the pool directory to write (new, empty or an old pool)")
    p.add_argument("--format", required=True, choices=sorted(FORMATS), help="row format")
    p.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="an exported bench whose worlds stay out of the pool (repeatable)",
    )
    p.add_argument("--strict", action="store_true", help="only worlds whose audit passed every check (as the bench)")


def run_pool(args: argparse.Namespace) -> int:
    from worldgen.export.pool import PoolConfig, export_pool

    cfg = PoolConfig(args.source, args.out, args.format, tuple(args.exclude), args.strict)
    try:
        summary = export_pool(cfg)
    except OSError as exc:
        raise _oserror(exc) from None
    skipped = ", ".join(f"{k} {v}" for k, v in summary.skipped.items() if v) or "none"
    print(
        f"exported {summary.rows} {args.format} row(s) from {summary.worlds} world(s) to {summary.out} "
        f"(left out: {skipped})"
    )
    return 0


def add_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("bench", type=Path, help="an exported bench directory")
    p.add_argument("--from", dest="source", type=Path, help="its build: also byte-compare data with the worlds")


def run_check(args: argparse.Namespace) -> int:
    from worldgen.export.check import check_bench, scoring_drift, task_dirs

    reports, problems = check_bench(args.bench, args.source)
    drifted = scoring_drift(task_dirs(args.bench))
    if drifted:
        print(
            f"note: {len(drifted)} task(s) grade with another version of rubrics/scoring.py than this worldgen's "
            f"(e.g. {drifted[0]}); their rewards are that version's"
        )
    failed = [r for r in reports if r.problems]
    for report in failed:
        for problem in report.problems:
            print(f"{report.name}: {problem}")
    for problem in problems:
        print(f"bench: {problem}")
    oracle = [r.oracle for r in reports if r.oracle is not None]
    low = min(oracle) if oracle else float("nan")
    print(f"{len(reports) - len(failed)}/{len(reports)} task(s) pass; lowest oracle reward {low:.3f}")
    return 1 if failed or problems else 0

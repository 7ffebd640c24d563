"""The `worldgen` command line. Every user error is one line on stderr and exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from contracts.errors import BuildInterrupted, WorldgenError
from contracts.safeio import kind_of, one_line
from worldgen import __version__
from worldgen.cli_agents import add_agent_commands
from worldgen.show.cli import add_show_command

# Commands added by other modules (run, eval, export): name -> handler(args) -> exit code.
HANDLERS: dict = {}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem (no usage dump), exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="worldgen", description="Mechanism-first synthetic data worlds for data-analysis agents.")
    parser.add_argument("--version", action="version", version=f"worldgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    b = sub.add_parser("build", help="build N worlds (resumable)")
    b.add_argument("--n", type=int, required=True, help="number of worlds")
    b.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    b.add_argument("--out", type=Path, default=Path("output"), help="output directory (default ./output)")
    b.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worlds built at once (default: the cores available to this process; with --executor ray, "
        "every CPU of the cluster)",
    )
    b.add_argument("--size", default="default", help="small | default | large (default: default)")
    b.add_argument("--domains", default="", help="comma-separated domains to draw personas from (default: all)")
    b.add_argument("--personas", type=Path, default=None, help="JSONL persona file to use instead of the library")
    b.add_argument("--defect-scale", type=float, default=1.0, help="multiply every defect rate (0 = clean files)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    _executor_options(b, "worlds")
    a = sub.add_parser("audit", help="audit world directories or whole builds; exit 1 if any world fails")
    a.add_argument("paths", nargs="+", type=Path, help="world directories or build directories (holding worlds/)")
    a.add_argument("--json", action="store_true", help="print one JSON line per world instead of a table")
    _executor_options(a, "audits")
    g = sub.add_parser("grade", help="score an answer against a task's rubric; prints JSON")
    g.add_argument("task", type=Path, help="tasks/<task_id>.json")
    g.add_argument("answer", type=Path, nargs="?", help="structured answer (JSON), for the rules judge")
    g.add_argument("--report", type=Path, help="free-text report (Markdown), for the anthropic judge")
    g.add_argument(
        "--judge", default="rules", choices=["rules", "anthropic"], help="rules (default, offline) or anthropic"
    )
    g.add_argument("--model", help="anthropic model (default: $WORLDGEN_JUDGE_MODEL or claude-sonnet-4-6)")
    g.add_argument("--base-url", help="Messages API base URL (default: $ANTHROPIC_BASE_URL or Anthropic's)")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    g.add_argument("--retries", type=int, default=3, help="retries per request (default 3)")
    g.add_argument("--cache", type=Path, help="decision cache directory (default ~/.cache/worldgen/judge)")
    sub.add_parser("domains", help="list the domain packs")
    HANDLERS.update(add_agent_commands(sub, _Parser))
    HANDLERS.update(add_show_command(sub, _Parser))
    return parser


def _executor_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--executor",
        default="local",
        choices=["local", "ray"],
        help=f'where {what} run: local (this machine) or ray (a Ray cluster; pip install -e ".[ray]")',
    )
    parser.add_argument(
        "--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray instance)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit codes: 0 done, 1 a world fails its audit or could not be built, 2 bad input,
    3 internal error, 128 + signal number when interrupted (130 SIGINT, 143 SIGTERM); always one stderr line.
    """
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            return _build(args)
        if args.command == "domains":
            return _domains()
        if args.command == "audit":
            return _audit(args)
        if args.command == "grade":
            return _grade(args)
        if args.command in HANDLERS:
            return HANDLERS[args.command](args)
    except WorldgenError as exc:
        _fail(f"worldgen: error: {exc}")
        return exc.exit_code
    except BuildInterrupted as exc:
        name = signal.Signals(exc.signum).name if exc.signum in signal.Signals._value2member_map_ else exc.signum
        _fail(
            f"worldgen: interrupted by {name}; {exc.committed} finished world(s) kept and listed in "
            f"{exc.manifest}; re-run the same command to resume"
        )
        return 128 + exc.signum
    except KeyboardInterrupt:
        _fail("worldgen: interrupted; finished worlds are kept, re-run to resume")
        return 130
    except BrokenPipeError:  # `worldgen audit ... | head`: the reader left; say nothing more
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except MemoryError:
        _fail("worldgen: error: out of memory")
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug still gets one line; WORLDGEN_DEBUG=1 shows the traceback
        if os.environ.get("WORLDGEN_DEBUG"):
            raise
        _fail(f"worldgen: internal error: {type(exc).__name__}: {exc} (please report it; WORLDGEN_DEBUG=1 shows where)")
        return 3
    return 0


def _fail(message: str) -> None:
    """One line on stderr, whatever the message holds (newlines in file names are escaped)."""
    print(one_line(message, 4000), file=sys.stderr)


def _build(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from worldgen.build import BuildConfig, run_build

    cfg = BuildConfig(
        n=args.n,
        seed=args.seed,
        out=args.out,
        workers=args.workers,
        size=args.size,
        domains=tuple(d.strip() for d in args.domains.split(",") if d.strip()),
        personas_file=args.personas,
        defect_scale=args.defect_scale,
        executor=args.executor,
        address=args.address,
        isolate=True,  # worlds are built in worker processes: Ctrl-C stops at once and never half-writes
    )
    started = time.perf_counter()
    progress = Progress(
        TextColumn("building worlds"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=args.quiet or not sys.stderr.isatty(),
        transient=True,
    )
    with progress:
        task = progress.add_task("build", total=args.n if isinstance(args.n, int) and args.n > 0 else None)
        summary = run_build(cfg, on_world=lambda entry: progress.advance(task))
        progress.update(task, completed=args.n)
    elapsed = time.perf_counter() - started
    rate = summary.built / elapsed if elapsed > 0 else 0.0
    print(
        f"built {summary.built} world(s), skipped {summary.skipped} already finished, in {elapsed:.1f}s "
        f"({rate:.2f} worlds/s); manifest: {cfg.out / 'manifest.jsonl'}"
    )
    return 0


def world_dirs(paths: list[Path]) -> list[Path]:
    """Expand build directories into their worlds; anything that is neither is a user error."""
    import stat

    from contracts.errors import WorldFormatError

    found: list[Path] = []
    for path in paths:
        if os.path.lexists(path / "world.json"):  # a world, even one whose world.json is a FIFO: load_world says so
            found.append(path)
        elif (path / "worlds").is_dir():
            for p in sorted((path / "worlds").iterdir()):
                mode = p.lstat().st_mode
                if p.name.startswith(".") or stat.S_ISREG(mode):
                    continue  # a build's .tmp- worlds in progress, or a stray file: not a world
                if not stat.S_ISDIR(mode):  # never follow a link out of the build, never open a FIFO
                    raise WorldFormatError(f"{one_line(p)}: a world must be a directory, not {kind_of(mode)}")
                found.append(p)
        elif not path.exists():
            raise WorldFormatError(f"{path}: no such file or directory")
        else:
            raise WorldFormatError(f"{path}: neither a world (no world.json) nor a build directory (no worlds/)")
    if not found:
        raise WorldFormatError(f"no worlds under {', '.join(map(str, paths))}")
    return found


def _audit(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from auditors import audit_world
    from worldgen.build import check_executor

    check_executor(args.executor, args.address)  # before anything is read: Ray missing is one line, exit 2
    worlds = world_dirs(args.paths)
    if args.executor == "ray":
        from worldgen.executors import audit_on_ray

        reports = audit_on_ray(worlds, args.address)
    else:
        reports = [audit_world(w) for w in worlds]  # a malformed world raises WorldFormatError -> exit 2
    if args.json:
        for r in reports:
            print(
                json.dumps({"world_id": r.world_id, "verdict": r.verdict, "failing": r.failing, "seconds": r.seconds})
            )
    else:
        table = Table("world", "verdict", "failing checks", "seconds")
        for r in reports:
            colour = "green" if r.verdict == "pass" else "red"
            table.add_row(
                escape(one_line(r.world_id, 80)),
                f"[{colour}]{r.verdict}[/]",
                ", ".join(r.failing) or "-",
                f"{r.seconds:.2f}",
            )
        Console(width=140).print(table)
    failed = sum(r.verdict != "pass" for r in reports)
    print(f"{len(reports) - failed}/{len(reports)} world(s) pass")
    return 1 if failed else 0


def _grade(args: argparse.Namespace) -> int:
    import json

    from contracts.safeio import read_text
    from rubrics.grade import MAX_REPORT_BYTES, GradeError, grade, load_answer, load_task

    task = load_task(args.task)
    answer = load_answer(args.answer) if args.answer else None
    report = None
    if args.report:
        report = read_text(args.report, max_bytes=MAX_REPORT_BYTES, what="report", error=GradeError)
    options = {}
    if args.judge == "anthropic":
        options = {
            "model": args.model,
            "base_url": args.base_url,
            "timeout": args.timeout,
            "max_retries": args.retries,
            "cache_dir": args.cache,
        }
    print(json.dumps(grade(task, answer, judge=args.judge, report=report, **options), indent=1))
    return 0


def _domains() -> int:
    from personas import builtin_personas
    from worldgen.packs import builtin_packs

    counts: dict[str, int] = {}
    for p in builtin_personas():
        counts[p.domain] = counts.get(p.domain, 0) + 1
    for name, pack in sorted(builtin_packs().items()):
        print(
            f"{name:20s} {len(pack.variables):3d} variables {len(pack.edges):3d} edges {counts.get(name, 0):3d} personas  {pack.title}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

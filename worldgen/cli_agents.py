"""The agent commands of the CLI: `worldgen run`, `worldgen eval` and `worldgen export` (see cli_export)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from worldgen.cli_export import add_export_command, run_export


def add_agent_commands(
    sub, parser_class: type[argparse.ArgumentParser]
) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add run, eval and export to the CLI's sub-parsers; returns command name -> handler."""
    r = sub.add_parser("run", help="play tasks with an agent in the sandbox (resumable)")
    r.add_argument("agent", help="reference | naive | anthropic")
    r.add_argument("--tasks", type=Path, required=True, help="a build directory, a world directory or a task file")
    r.add_argument("--out", type=Path, required=True, help="runs directory (RUNS/<task_id>/...)")
    r.add_argument("--workers", type=int, default=1, help="episodes played in parallel (default 1)")
    r.add_argument("--max-steps", type=int, default=20, help="actions per episode (default 20)")
    r.add_argument("--time-budget", type=float, default=1800.0, help="seconds per episode (default 1800)")
    r.add_argument("--step-timeout", type=float, default=120.0, help="seconds per code cell (default 120)")
    r.add_argument("--memory-mb", type=int, default=4096, help="sandbox address-space limit (default 4096)")
    r.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "none"], help="isolation (default auto)")
    r.add_argument("--no-state", action="store_true", help="do not record session state around each step")
    r.add_argument("--model", help="anthropic: model (default $WORLDGEN_AGENT_MODEL or claude-sonnet-4-6)")
    r.add_argument("--base-url", help="anthropic: Messages API base URL (default $ANTHROPIC_BASE_URL)")
    r.add_argument("--timeout", type=float, default=120.0, help="anthropic: seconds per request (default 120)")
    r.add_argument("--retries", type=int, default=3, help="anthropic: retries per request (default 3)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    e = sub.add_parser("eval", help="score tables of a runs directory, with bootstrap intervals")
    e.add_argument("runs", type=Path, help="a runs directory written by `worldgen run`")
    e.add_argument("--json", action="store_true", help="print the report as JSON")
    e.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    e.add_argument("--html", type=Path, help="also write the report as a page: intervals, negatives, episodes")
    add_export_command(sub, parser_class)
    return {"run": _run, "eval": _eval, "export": run_export}


def _run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from worldgen.agents.runner import RunConfig, run_agent
    from worldgen.sandbox import Limits
    from worldgen.tasksource import find_tasks

    options = {}
    if args.agent == "anthropic":
        options = {"model": args.model, "base_url": args.base_url, "timeout": args.timeout, "max_retries": args.retries}
    config = RunConfig(
        agent=args.agent,
        tasks=args.tasks,
        out=args.out,
        workers=args.workers,
        max_steps=args.max_steps,
        time_budget_s=args.time_budget,
        limits=Limits(step_timeout_s=args.step_timeout, memory_mb=args.memory_mb),
        isolation=args.sandbox,
        record_state=not args.no_state,
        agent_options=options,
    )
    total = len(find_tasks(args.tasks))
    started = time.perf_counter()
    progress = Progress(
        TextColumn(f"{args.agent} episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=args.quiet or not sys.stderr.isatty(),
        transient=True,
    )
    with progress:
        bar = progress.add_task("run", total=total)
        summary = run_agent(config, on_episode=lambda result: progress.advance(bar))
    elapsed = time.perf_counter() - started
    mean = "n/a" if summary.mean is None else f"{summary.mean:.3f}"
    print(
        f"played {summary.ran} episode(s) ({summary.errors} errored), skipped {summary.skipped} finished, "
        f"in {elapsed:.1f}s; mean score of this run's episodes {mean}; results in {args.out}"
    )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from worldgen.evaluate import evaluate, load_results, render

    results, errors = load_results(args.runs)
    if args.html is not None:
        from worldgen.show.output import check_out_file

        check_out_file(args.html, "--html")  # before any work: a refused --html writes nothing
    report = evaluate(results, errors, seed=args.seed)
    print(json.dumps(report, indent=1) if args.json else render(report))
    if args.html is not None:
        from worldgen.show import write_eval_page

        size = write_eval_page(report, results, args.runs, args.html)
        if not args.json:
            print(f"wrote the report page to {args.html} ({size / 1024:.0f} KiB)")
    return 0

"""`worldgen export KIND ...`: one sub-command per export kind, registered in EXPORTS.

Adding a kind is one entry: `EXPORTS["bench"] = Export(help, configure, run)`, where `configure(parser)`
adds its arguments and `run(args) -> int` does the work (raising WorldgenError on bad input).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Export:
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _transitions_args(p: argparse.ArgumentParser) -> None:
    from worldgen.transitions import FORMATS

    p.add_argument("--runs", type=Path, required=True, help="a runs directory written by `worldgen run`")
    p.add_argument("--out", type=Path, required=True, help="output directory (writes <format>.jsonl)")
    p.add_argument("--format", default="dsworld", choices=FORMATS, help="dsworld (default) | mle-world | jsonl")


def _transitions(args: argparse.Namespace) -> int:
    from worldgen.transitions import export_transitions

    path, count = export_transitions(args.runs, args.out, args.format)
    print(f"wrote {count} {args.format} record(s) to {path}")
    return 0


def _bench_pool_check() -> dict[str, Export]:
    from worldgen.export import cli as export_cli

    return {
        "bench": Export("a held-out test split as Harbor task directories", export_cli.add_bench, export_cli.run_bench),
        "pool": Export(
            "training worlds' tasks as RL rows (verl, SkyRL, OpenRLHF, DSGym, JSONL)",
            export_cli.add_pool,
            export_cli.run_pool,
        ),
        "check": Export(
            "validate an exported bench without Docker; exit 1 if a task fails",
            export_cli.add_check,
            export_cli.run_check,
        ),
    }


EXPORTS: dict[str, Export] = _bench_pool_check() | {
    "transitions": Export("step records of agent runs, for world models", _transitions_args, _transitions),
}


def add_export_command(sub, parser_class: type[argparse.ArgumentParser]) -> None:
    e = sub.add_parser("export", help="export worlds or runs: " + ", ".join(EXPORTS))
    kinds = e.add_subparsers(dest="export_kind", required=True, parser_class=parser_class)
    for name, export in EXPORTS.items():
        export.configure(kinds.add_parser(name, help=export.help))


def run_export(args: argparse.Namespace) -> int:
    return EXPORTS[args.export_kind].run(args)

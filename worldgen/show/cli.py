"""`worldgen show WORLD|BUILD`: the command line of the pages (registered in worldgen/cli.py)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")


def add_show_command(
    sub, parser_class: type[argparse.ArgumentParser]
) -> dict[str, Callable[[argparse.Namespace], int]]:
    s = sub.add_parser("show", help="pages to look at: a world's card or a build's overview (self-contained HTML)")
    s.add_argument("path", type=Path, help="a world directory, or a build directory (holding worlds/)")
    s.add_argument(
        "--out",
        type=Path,
        help="world: the card's file (default ./<world directory name>.html); "
        "build: the directory for index.html and worlds/*.html (default BUILD/show)",
    )
    s.add_argument("--png", type=Path, help="world only: also a full-page screenshot of the card (needs Chromium)")
    s.add_argument("--png-height", type=int, help="with --png: only the top N pixels of the page (default: all)")
    return {"show": run_show}


def run_show(args: argparse.Namespace) -> int:
    from contracts.errors import InputError, WorldFormatError
    from contracts.safeio import one_line

    path: Path = args.path
    if os.path.lexists(path / "world.json"):
        return _world(args)
    if (path / "worlds").is_dir():
        if args.png is not None or args.png_height is not None:
            raise InputError("--png is for a world's card; give a world directory (BUILD/worlds/<world_id>)")
        return _build(args)
    if not os.path.lexists(path):
        raise WorldFormatError(f"{one_line(path)}: no such file or directory")
    raise WorldFormatError(f"{one_line(path)}: neither a world (no world.json) nor a build directory (no worlds/)")


def _world(args: argparse.Namespace) -> int:
    from worldgen.show.api import show_world

    name = args.path.resolve().name
    out = args.out or Path(f"{name if _PLAIN.match(name) else 'card'}.html")
    summary = show_world(args.path, out, args.png, args.png_height)
    line = f"wrote the card of {args.path} to {summary.out} ({summary.bytes / 1024:.0f} KiB)"
    if summary.png is not None:
        line += f" and its screenshot to {summary.png} ({summary.png_bytes / 1024:.0f} KiB)"
    print(line)
    return 0


def _build(args: argparse.Namespace) -> int:
    from contracts.safeio import one_line
    from worldgen.show.api import show_build

    out = args.out or args.path / "show"
    summary = show_build(args.path, out)
    print(f"wrote the overview of {summary.worlds} world(s) and their cards to {summary.out / 'index.html'}")
    if summary.unreadable:
        print(
            one_line(f"worldgen: {summary.unreadable} world(s) could not be read; the overview lists why", 4000),
            file=sys.stderr,
        )
        return 1
    return 0

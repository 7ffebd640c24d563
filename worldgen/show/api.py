"""The three things `worldgen show` and `worldgen eval --html` do, callable from Python."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.errors import InputError
from worldgen.show import browser, output
from worldgen.show.card import card_context
from worldgen.show.evalpage import render_eval
from worldgen.show.overview import SiteSummary, build_site
from worldgen.show.pages import render
from worldgen.show.world import read_world

PNG_WIDTH = 1280  # CSS pixels: the width a maintainer's laptop shows the card at


@dataclass
class CardSummary:
    out: Path
    bytes: int
    png: Path | None = None
    png_bytes: int = 0


def show_world(world: Path, out: Path, png: Path | None = None, png_height: int | None = None) -> CardSummary:
    """Write one world's card to `out` (and a screenshot of it to `png`); nothing is written on bad input."""
    if png_height is not None and png is None:
        raise InputError("--png-height needs --png")
    if png_height is not None and (isinstance(png_height, bool) or png_height < 1):
        raise InputError(f"--png-height must be a positive number of pixels, got {png_height!r}")
    output.check_out_file(out, "--out")
    if png is not None:
        output.check_out_file(png, "--png")
        if png.absolute() == out.absolute():
            raise InputError("--png and --out name the same file")
        if browser.find_browser() is None:
            browser.screenshot(out)  # raises the one-line 'needs Chromium' error before anything is written
    page = render("card.html.j2", card_context(read_world(world)))
    output.write_file(out, page, "--out")
    summary = CardSummary(out, len(page.encode("utf-8")))
    if png is not None:
        shot = output.mark_png(browser.screenshot(out, PNG_WIDTH, png_height))
        output.write_file(png, shot, "--png")
        summary.png, summary.png_bytes = png, len(shot)
    return summary


def show_build(build: Path, out: Path) -> SiteSummary:
    """Write the overview of a build and every world's card into the directory `out`."""
    return build_site(build, out)


def write_eval_page(report: dict[str, Any], results: list[dict[str, Any]], runs: Path, out: Path) -> int:
    """Write the eval report page; returns its size in bytes."""
    output.check_out_file(out, "--html")
    page = render_eval(report, results, runs)
    output.write_file(out, page, "--html")
    return len(page.encode("utf-8"))

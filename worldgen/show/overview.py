"""The build overview: what a maintainer looks at before releasing a build, with every world's card a click away.

`build_site(build, out)` reads every finished world of a build once, writes its card to
`out/worlds/<world_id>.html` and `out/index.html`: worlds per domain, pass rate per audit check, systems,
files and formats per world, defect kinds, tasks and rubric sizes, synthesis and audit time per world
(timings.jsonl), and a table of every world. A world that cannot be read is listed with the reason (and no
card); the command then exits 1, as `worldgen audit` does for a failing world.
"""

from __future__ import annotations

import re
import stat
import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.audit import CHECKS
from contracts.errors import WorldgenError
from contracts.safeio import MIB, iter_jsonl, lstat_or_none, one_line
from worldgen import __version__
from worldgen.show import svg
from worldgen.show.card import card_context
from worldgen.show.output import site, site_record
from worldgen.show.pages import render
from worldgen.show.world import WorldFiles, read_world

STAGES = ("dag", "contract", "canonical", "projection", "write")  # synthesis, as in benchmarks/bench_build.py
MAX_TIMINGS_BYTES = 256 * MIB
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")
TIME_BINS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)  # seconds: synthesis ~0.26 s and audit ~1.2 s per world


@dataclass
class Entry:
    """One world of the build, read or not."""

    path: Path
    card: str = ""  # file name under worlds/ (empty when the world could not be read)
    world: WorldFiles | None = None
    error: str = ""


@dataclass
class SiteSummary:
    out: Path
    worlds: int
    unreadable: int


def world_paths(build: Path) -> list[Path]:
    from worldgen.cli import world_dirs  # the same expansion as `worldgen audit BUILD`

    return world_dirs([build])


def build_site(build: Path, out: Path) -> SiteSummary:
    paths = world_paths(build)
    entries = []
    for path in paths:
        try:
            entries.append(Entry(path, world=read_world(path)))
        except WorldgenError as exc:
            entries.append(Entry(path, error=one_line(exc, 300)))
    entries.sort(key=lambda e: (e.world is None, e.world.contract.index if e.world else 0, e.path.name))
    _name_cards(entries)
    timings = _timings(build)
    with site(out) as tmp:
        (tmp / "worlds").mkdir()
        for e in entries:
            if e.world is not None:
                context = card_context(e.world) | {"back": "../index.html"}
                (tmp / "worlds" / e.card).write_text(render("card.html.j2", context), encoding="utf-8")
        (tmp / "index.html").write_text(
            render("build.html.j2", overview_context(build, entries, timings)), encoding="utf-8"
        )
        (tmp / "show.json").write_text(
            site_record(build=build.name, worlds=len(entries), version=__version__), encoding="utf-8"
        )
    return SiteSummary(out, len(entries), sum(e.world is None for e in entries))


def _name_cards(entries: list[Entry]) -> None:
    """A file name per card: the world id when it is a plain name, else world-<index>; never two alike."""
    taken: set[str] = set()
    for e in entries:
        if e.world is None:
            continue
        world_id = e.world.contract.world_id
        stem = world_id if _SAFE_NAME.match(world_id) else f"world-{e.world.contract.index:05d}"
        name, k = f"{stem}.html", 1
        while name.lower() in taken:
            k += 1
            name = f"{stem}-{k}.html"
        taken.add(name.lower())
        e.card = name


def _timings(build: Path) -> dict[str, dict[str, float]]:
    """world id -> stage -> seconds, from the build's timings.jsonl (the last line of a world wins)."""
    path = build / "timings.jsonl"
    info = lstat_or_none(path)
    if info is None or not stat.S_ISREG(info.st_mode):
        return {}
    out = {}
    for _, record in iter_jsonl(path, max_bytes=MAX_TIMINGS_BYTES, what="timings"):
        if isinstance(record, dict) and isinstance(record.get("world_id"), str):
            out[record["world_id"]] = {
                k: float(v) for k, v in record.items() if isinstance(v, int | float) and not isinstance(v, bool)
            }
    return out


def _synthesis(t: dict[str, float]) -> float | None:
    return sum(t[s] for s in STAGES) if all(s in t for s in STAGES) else None


# size: one context for one page, each chart a few lines, read top to bottom as the page reads
def overview_context(build: Path, entries: list[Entry], timings: dict[str, dict[str, float]]) -> dict[str, Any]:
    worlds = [e.world for e in entries if e.world is not None]
    rows = [_row(e, timings) for e in entries]
    passed = sum(r["verdict"] == "pass" for r in rows)
    charts = [
        {"title": "Worlds per domain", "svg": _domains(rows)},
        {"title": "Audit checks passed", "svg": _checks(worlds)},
        {"title": "Systems per world", "svg": _columns([r["systems"] for r in rows if r["read"]], "systems")},
        {"title": "Observed files per world", "svg": _columns([r["files"] for r in rows if r["read"]], "files")},
        {"title": "Files by format", "svg": _formats(worlds)},
        {"title": "Defects by kind", "svg": _defect_kinds(worlds)},
        {"title": "Tasks per world", "svg": _columns([r["tasks"] for r in rows if r["read"]], "tasks")},
        {
            "title": "Rubric items per task",
            "svg": _columns([len(t.rubric) for w in worlds for t in w.tasks], "rubric items"),
        },
    ]
    synth = [r["synthesis"] for r in rows if r["synthesis"] is not None]
    audit = [r["audit"] for r in rows if r["audit"] is not None]
    for title, values in (("Synthesis time per world", synth), ("Audit time per world", audit)):
        if values:
            charts.append(
                {
                    "title": f"{title} (median {_s(statistics.median(values))}, max {_s(max(values))})",
                    "svg": svg.column_chart(svg.bins(values, TIME_BINS, " s"), title, "seconds"),
                }
            )
    settings = worlds[0].meta if worlds else {}
    return {
        "title": f"build overview: {build.name}",
        "build": build.name,
        "settings": {k: settings.get(k) for k in ("seed", "size") if k in settings},
        "counts": {
            "worlds": len(rows),
            "pass": passed,
            "fail": sum(r["verdict"] == "fail" for r in rows),
            "unreadable": sum(not r["read"] for r in rows),
        },
        "domains": len({r["domain"] for r in rows if r["read"]}),
        "charts": charts,
        "rows": rows,
        "version": __version__,
    }


def _row(e: Entry, timings: dict[str, dict[str, float]]) -> dict[str, Any]:
    if e.world is None:
        return {
            "read": False,
            "name": e.path.name,
            "error": e.error,
            "verdict": "unreadable",
            "domain": "",
            "synthesis": None,
            "audit": None,
        }
    w, c = e.world, e.world.contract
    t = timings.get(c.world_id, {})
    return {
        "read": True,
        "name": c.world_id,
        "card": f"worlds/{e.card}",
        "index": c.index,
        "domain": c.domain,
        "persona": c.persona.id,
        "verdict": w.audit.verdict if w.audit else "not audited",
        "failing": w.audit.failing if w.audit else [],
        "variables": len(c.variables),
        "edges": len(c.edges),
        "layers": len(c.layers),
        "systems": len({d.system for d in c.deliverables}),
        "files": len(c.deliverables),
        "defects": sum(
            len(f.get("defects", []))
            for f in w.projection["files"]
            if isinstance(f, dict) and isinstance(f.get("defects"), list)
        ),
        "phenomena": len(c.phenomena),
        "tasks": len(w.tasks),
        "rubric": sum(len(t.rubric) for t in w.tasks),
        "synthesis": _synthesis(t),
        "audit": t.get("audit"),
        "synthesis_text": _s(_synthesis(t)),
        "audit_text": _s(t.get("audit")),
    }


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


def _domains(rows: list[dict]) -> str:
    by: dict[str, Counter] = {}
    for r in rows:
        if r["read"]:
            by.setdefault(r["domain"], Counter())[r["verdict"]] += 1
    bars = [
        svg.Bar(
            domain,
            tuple(
                (float(c[v]), css, f"{domain}: {c[v]} {v}")
                for v, css in (("pass", "pass"), ("fail", "fail"), ("not audited", "skip"))
                if c[v]
            ),
            f"{c['pass']}/{sum(c.values())} pass",
        )
        for domain, c in sorted(by.items())
    ]
    return svg.bar_chart(bars, "worlds per domain, passing and failing")


def _checks(worlds: list[WorldFiles]) -> str:
    audited = [w.audit for w in worlds if w.audit is not None]
    bars = []
    for name in CHECKS:
        status = Counter(c.status for a in audited for c in a.checks if c.name == name)
        total = sum(status.values())
        segments = tuple(
            (float(status[s]), s, f"{name}: {status[s]} {s}") for s in ("pass", "fail", "skip") if status[s]
        )
        bars.append(
            svg.Bar(
                name, segments, f"{status['pass']}/{total} ({svg.pct(status['pass'] / total if total else None, 0)})"
            )
        )
    return svg.bar_chart(bars, "audit checks passed per world", scale_max=len(audited))


def _columns(values: list[int], axis: str) -> str:
    if not values:
        return ""
    counts = Counter(values)
    return svg.column_chart([(str(k), counts[k]) for k in range(min(values), max(values) + 1)], axis, axis)


def _formats(worlds: list[WorldFiles]) -> str:
    files = Counter(d.format for w in worlds for d in w.contract.deliverables)
    having = Counter(f for w in worlds for f in {d.format for d in w.contract.deliverables})
    bars = [
        svg.Bar(f, ((float(files[f]), "neutral", f"{files[f]} {f} files"),), f"{files[f]} files in {having[f]} worlds")
        for f in sorted(files)
    ]
    return svg.bar_chart(bars, "observed files by format")


def _defect_kinds(worlds: list[WorldFiles]) -> str:
    records = Counter()
    having = Counter()
    for w in worlds:
        kinds = [
            d.get("kind")
            for f in w.projection["files"]
            if isinstance(f, dict)
            for d in f.get("defects", [])
            if isinstance(d, dict)
        ]
        records.update(str(k) for k in kinds)
        having.update({str(k) for k in kinds})
    bars = [
        svg.Bar(
            k, ((float(records[k]), "neutral", f"{records[k]} {k} records"),), f"{records[k]} in {having[k]} worlds"
        )
        for k in sorted(records)
    ]
    return svg.bar_chart(bars, "defect records by kind")

"""The build overview: what a maintainer looks at before releasing a build, with every world's card a click away.

`build_site(build, out)` reads the build's worlds one at a time (memory stays at one world, whatever the
build's size), writes each card to `out/worlds/<world directory>.html` and keeps a small summary of it; then
`out/index.html`: worlds per domain, pass rate per audit check, systems, files and formats per world, defect
kinds, tasks and rubric sizes, synthesis and audit time per world (timings.jsonl), and a table of every
world. A world that cannot be read is listed with the reason (and no card); the command then exits 1, as
`worldgen audit` does for a failing world.
"""

from __future__ import annotations

import re
import stat
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

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


@dataclass
class Summary:
    """What the overview keeps of one world once its card is written."""

    row: dict[str, Any]
    checks: dict[str, str] = field(default_factory=dict)
    formats: list[str] = field(default_factory=list)
    defect_kinds: list[str] = field(default_factory=list)
    rubric_sizes: list[int] = field(default_factory=list)


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
    timings = _timings(build)
    summaries = []
    with site(out) as tmp:
        (tmp / "worlds").mkdir()
        for k, path in enumerate(paths):
            try:
                world = read_world(path)
            except WorldgenError as exc:
                summaries.append(Summary({"read": False, "name": path.name, "error": one_line(exc, 300)}))
                continue
            card = f"{path.name if _SAFE_NAME.match(path.name) else f'world-{k:05d}'}.html"
            page = render("card.html.j2", card_context(world) | {"back": "../index.html"})
            (tmp / "worlds" / card).write_text(page, encoding="utf-8")
            summaries.append(summarise(world, f"worlds/{card}", timings))
        summaries.sort(key=lambda s: (not s.row["read"], s.row.get("index", 0), s.row["name"]))
        index = render("build.html.j2", overview_context(build, summaries))
        (tmp / "index.html").write_text(index, encoding="utf-8")
        record = site_record(build=build.name, worlds=len(summaries), version=__version__)
        (tmp / "show.json").write_text(record, encoding="utf-8")
    return SiteSummary(out, len(summaries), sum(not s.row["read"] for s in summaries))


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


def summarise(world: WorldFiles, card: str, timings: dict[str, dict[str, float]]) -> Summary:
    c = world.contract
    t = timings.get(c.world_id, {})
    synthesis = sum(t[s] for s in STAGES) if all(s in t for s in STAGES) else None
    defects = [
        str(d.get("kind"))
        for f in world.projection["files"]
        if isinstance(f, dict) and isinstance(f.get("defects"), list)
        for d in f["defects"]
        if isinstance(d, dict)
    ]
    row = {
        "read": True,
        "name": c.world_id,
        "card": card,
        "index": c.index,
        "domain": c.domain,
        "seed": c.seed,
        "size": c.size,
        "persona": c.persona.id,
        "verdict": world.audit.verdict if world.audit else "not audited",
        "failing": world.audit.failing if world.audit else [],
        "dag": f"{len(c.variables)} / {len(c.edges)} / {len(c.layers)}",
        "systems": len({d.system for d in c.deliverables}),
        "files": len(c.deliverables),
        "defects": len(defects),
        "phenomena": len(c.phenomena),
        "tasks": len(world.tasks),
        "rubric": sum(len(task.rubric) for task in world.tasks),
        "synthesis": synthesis,
        "audit": t.get("audit"),
    }
    return Summary(
        row=row,
        checks={ch.name: ch.status for ch in world.audit.checks} if world.audit else {},
        formats=[d.format for d in c.deliverables],
        defect_kinds=defects,
        rubric_sizes=[len(task.rubric) for task in world.tasks],
    )


def overview_context(build: Path, summaries: list[Summary]) -> dict[str, Any]:
    read = [s for s in summaries if s.row["read"]]
    rows = [s.row for s in summaries]
    charts = [
        ("Worlds per domain", _domains(read)),
        ("Audit checks passed", _checks(read)),
        ("Systems per world", _columns([s.row["systems"] for s in read], "systems")),
        ("Observed files per world", _columns([s.row["files"] for s in read], "files")),
        ("Files by format", _counted([s.formats for s in read], "files", "observed files by format")),
        ("Defects by kind", _counted([s.defect_kinds for s in read], "records", "defect records by kind")),
        ("Tasks per world", _columns([s.row["tasks"] for s in read], "tasks")),
        ("Rubric items per task", _columns([n for s in read for n in s.rubric_sizes], "rubric items")),
    ]
    for key, title in (("synthesis", "Synthesis time per world"), ("audit", "Audit time per world")):
        values = [s.row[key] for s in read if s.row[key] is not None]
        if values:
            spread = f"median {_s(statistics.median(values))}, max {_s(max(values))}"
            figure = svg.column_chart(svg.bins(values, svg.nice_edges(values), " s"), title, "seconds")
            charts.append((f"{title} ({spread})", figure))
    for r in rows:
        r["synthesis_text"], r["audit_text"] = _s(r.get("synthesis")), _s(r.get("audit"))
    verdicts = Counter(r.get("verdict") for r in rows)
    return {
        "title": f"build overview: {build.name}",
        "build": build.name,
        "counts": {"worlds": len(rows), "pass": verdicts["pass"], "fail": verdicts["fail"]},
        "unreadable": len(rows) - len(read),
        "settings": {k: ", ".join(sorted({str(s.row[k]) for s in read})) for k in ("seed", "size")},
        "domains": len({s.row["domain"] for s in read}),
        "charts": [{"title": title, "svg": Markup(chart)} for title, chart in charts if chart],
        "rows": rows,
    }


def _s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


def _domains(read: list[Summary]) -> str:
    by: dict[str, Counter] = {}
    for s in read:
        by.setdefault(s.row["domain"], Counter())[s.row["verdict"]] += 1
    kinds = (("pass", "pass"), ("fail", "fail"), ("not audited", "skip"))
    bars = [
        svg.Bar(
            domain,
            tuple((float(c[v]), css, f"{domain}: {c[v]} {v}") for v, css in kinds if c[v]),
            f"{c['pass']}/{sum(c.values())} pass",
        )
        for domain, c in sorted(by.items())
    ]
    return svg.bar_chart(bars, "worlds per domain, passing and failing")


def _checks(read: list[Summary]) -> str:
    audited = [s.checks for s in read if s.checks]
    bars = []
    for name in CHECKS:
        status = Counter(checks[name] for checks in audited if name in checks)
        total = sum(status.values())
        segments = tuple(
            (float(status[s]), s, f"{name}: {status[s]} {s}") for s in ("pass", "fail", "skip") if status[s]
        )
        share = svg.pct(status["pass"] / total if total else None, 0)
        bars.append(svg.Bar(name, segments, f"{status['pass']}/{total} ({share})"))
    return svg.bar_chart(bars, "audit checks passed per world", scale_max=len(audited))


def _columns(values: list[int], axis: str) -> str:
    if not values:
        return ""
    counts = Counter(values)
    return svg.column_chart([(str(k), counts[k]) for k in range(min(values), max(values) + 1)], axis, axis)


def _counted(per_world: list[list[str]], unit: str, label: str) -> str:
    """How many of each thing over all worlds, and in how many worlds it appears."""
    total = Counter(x for items in per_world for x in items)
    having = Counter(x for items in per_world for x in set(items))
    bars = [
        svg.Bar(k, ((float(total[k]), "neutral", f"{total[k]} {k} {unit}"),), f"{total[k]} in {having[k]} worlds")
        for k in sorted(total)
    ]
    return svg.bar_chart(bars, label)

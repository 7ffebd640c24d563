"""`worldgen eval RUNS --html report.html`: the eval report as a page, charts and tables from one report.

The numbers are those of `worldgen eval` (worldgen/evaluate.py: stratified bootstrap intervals with a fixed
seed), so the page and the text table always agree: score, computation and insight with their intervals;
score by task kind and by domain with intervals; how many negative items each trajectory triggered and which
kinds of error they were; every episode in a table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from markupsafe import Markup

from worldgen.show import svg
from worldgen.show.pages import render


def _interval(label: str, s: dict[str, Any], note: str = "") -> svg.Interval:
    low, high = s.get("ci95") or [None, None]
    return svg.Interval(label, s.get("mean"), low, high, note or f"{svg.fmt(s.get('mean'))} (n={s['n']})")


def _negatives_by_type(results: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(type, times triggered, episodes where the rubric had it) per negative item type (the id before ':')."""
    triggered, present = Counter(), Counter()
    for r in results:
        for item in r.get("items", []):
            if item.get("polarity") != "negative":
                continue
            kind = str(item.get("id", "")).split(":", 1)[0]
            present[kind] += 1
            triggered[kind] += bool(item.get("decision"))
    return [(k, triggered[k], present[k]) for k in sorted(present, key=lambda k: (-triggered[k], k))]


def eval_context(report: dict[str, Any], results: list[dict[str, Any]], runs: Path) -> dict[str, Any]:
    overall = [_interval(k, report[k]) for k in ("score", "computation", "insight")]
    kinds = [_interval(k, v) for k, v in report["by_kind"].items()]
    domains = [
        _interval(k, v, f"{svg.fmt(v['mean'])} ({svg.fmt(v['offset'])} vs all, n={v['n']})")
        for k, v in report["domain_offsets"].items()
    ]
    histogram = report["negatives_triggered"]
    total = sum(histogram.values()) or 1
    negatives = [
        svg.Bar(k, ((float(v), "fail", f"{v} trajectories"),), f"{v} ({svg.pct(v / total, 0)})")
        for k, v in histogram.items()
    ]
    types = [
        svg.Bar(k, ((float(t), "fail", f"{t} of {p}"),), f"{t} of {p} ({svg.pct(t / p if p else None, 0)})")
        for k, t, p in _negatives_by_type(results)
    ]
    episodes = [
        {
            "task": r.get("task_id", ""),
            "domain": r.get("domain", ""),
            "kind": r.get("kind", ""),
            "score": svg.fmt(r.get("score")),
            "negatives": sum(1 for i in r.get("items", []) if i.get("polarity") == "negative" and i.get("decision")),
            "steps": r.get("steps", ""),
            "end": r.get("end_reason", ""),
        }
        for r in sorted(results, key=lambda r: str(r.get("task_id")))
    ]
    charts = [
        {
            "title": "Score, computation and insight (mean, 95% interval)",
            "svg": svg.interval_chart(overall, "overall scores"),
        },
        {"title": "Score by task kind", "svg": svg.interval_chart(kinds, "score by kind")},
        {"title": "Score by domain", "svg": svg.interval_chart(domains, "score by domain")},
        {
            "title": "Negative items triggered per trajectory",
            "svg": svg.bar_chart(negatives, "negative items per trajectory"),
        },
    ]
    if types:
        charts.append(
            {
                "title": "Negative items by type (triggered of offered)",
                "svg": svg.bar_chart(types, "negative items by type"),
            }
        )
    return {
        "title": f"eval report: {runs.name}",
        "runs": runs.name,
        "agents": sorted({str(r.get("agent")) for r in results}),
        "report": report,
        "charts": [{"title": c["title"], "svg": Markup(c["svg"])} for c in charts],
        "episodes": episodes,
    }


def render_eval(report: dict[str, Any], results: list[dict[str, Any]], runs: Path) -> str:
    return render("eval.html.j2", eval_context(report, results, runs))

"""The world card: what a maintainer reviewing a world before release wants on one page.

`card_context(world)` turns the files of one world (worldgen/show/world.py) into the template's context:
persona and question, the DAG (worldgen/show/dag.py), systems and files, defects, the timeline strip
(worldgen/show/timeline.py), phenomena against the audit's estimates, the audit's checks and the tasks.
Everything is sorted or kept in the contract's order, so the same world gives the same page.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from markupsafe import Markup

from contracts.keys import template as key_template
from contracts.model import DATE_STYLES, Contract, Deliverable, structural_edges
from rubrics.model import Task
from worldgen.show import dag, timeline
from worldgen.show.svg import fmt, gauge, pct
from worldgen.show.world import WorldFiles

# How an edge label shows each statistic's planted value (see worldgen/mechanisms.py::statistic).
STATISTIC_LABELS = {
    "slope": "{v}",
    "log_slope": "log {v}",
    "threshold_location": "at {v}",
    "half_saturation": "half {v}",
    "lag_periods": "{v} d",
    "interaction_coefficient": "{v}",
    "seasonal_amplitude": "amp {v}",
    "level_shift_range": "range {v}",
    "per_capacity_slope": "{v}/cap",
}
_SAFE_TEMPLATE = re.compile(r"^(?:[^{}]|\{(?:P|p|PP)\}|\{n(?::0[1-9]d)?\})*$")  # key templates we can render
EXAMPLE_NUMBER = 12


def card_context(world: WorldFiles) -> dict[str, Any]:
    c = world.contract
    start = dt.date.fromisoformat(c.timeline.start)
    nodes, edges = _graph(world)
    return {
        "title": f"world card: {c.world_id}",
        "world": _header(world, start),
        "persona": c.persona.model_dump(),
        "dag_svg": Markup(dag.draw(nodes, edges)),
        "edges": [
            {"edge": f"{e.parent} → {e.child}", "kind": e.kind, "detail": e.title.split(": ", 1)[1]} for e in edges
        ],
        "unidentified": [u.model_dump() for u in c.unidentified],
        "files": _files(world, start),
        "defects": _defects(world, start),
        "timeline_svg": Markup(timeline.draw(_strip(world, start))),
        "phenomena": _phenomena(world),
        "checks": _checks(world),
        "tasks": [_task(t) for t in sorted(world.tasks, key=lambda t: (t.kind, t.variable, t.task_id))],
    }


def _header(world: WorldFiles, start: dt.date) -> dict[str, Any]:
    c, meta = world.contract, world.meta
    end = start + dt.timedelta(days=c.timeline.periods - 1)
    sizes = meta.get("sizes") if isinstance(meta.get("sizes"), dict) else {}
    return {
        "id": c.world_id,
        "domain": c.domain,
        "size": c.size,
        "seed": c.seed,
        "index": c.index,
        "persona_id": c.persona.id,
        "verdict": world.audit.verdict if world.audit else "not audited",
        "failing": world.audit.failing if world.audit else [],
        "period": f"{start.isoformat()} to {end.isoformat()} ({c.timeline.periods} days)",
        "change": f"day {c.timeline.change_day} ({(start + dt.timedelta(days=c.timeline.change_day)).isoformat()})",
        "sizes": [(k, sizes[k]) for k in sorted(sizes) if isinstance(sizes[k], int | float)],
        "counts": {
            "variables": len(c.variables),
            "edges": len(c.edges),
            "layers": len(c.layers),
            "systems": len({d.system for d in c.deliverables}),
            "files": len(c.deliverables),
            "phenomena": len(c.phenomena),
            "tasks": len(world.tasks),
        },
    }


def _graph(world: WorldFiles) -> tuple[list[dag.Node], list[dag.Edge]]:
    c = world.contract
    tags: dict[str, list[str]] = {}
    for t in sorted(world.tasks, key=lambda t: t.kind):
        tags.setdefault(t.variable, []).append(f"{t.kind} task")
    if c.persona.focus:
        tags.setdefault(c.persona.focus, []).append("focus")
    nodes = [
        dag.Node(
            name=v.name,
            layer=v.layer,
            sub=f"{v.grain} · {v.system}",
            tags=tuple(dict.fromkeys(tags.get(v.name, []))),
            css=f"grain-{v.grain}" + (" policy" if v.pattern == "policy" else ""),
            title=f"{v.name}: {v.description} [{v.unit or 'no unit'}]; {v.grain} grain, {v.observe} in "
            f"{v.system}; layer {v.layer}" + ("; a management lever" if v.pattern == "policy" else ""),
        )
        for v in c.variables
    ]
    effects = {ph.edge: ph for ph in c.phenomena if ph.kind == "edge_effect" and ph.edge}
    unidentified = {u.edge: u for u in c.unidentified}
    edges = []
    for e in c.edges:
        key = f"{e.parent}->{e.child}"
        ph = effects.get(key)
        if ph is not None and ph.target is not None:
            value = STATISTIC_LABELS.get(ph.statistic, ph.statistic + " {v}").format(v=fmt(ph.target))
            planted = f"{ph.statistic} = {fmt(ph.target, 4)} ± {fmt(ph.tolerance, 3)}"
            css = ""
        else:
            value, css = "n.i.", "unidentified"
            reason = unidentified[key].reason if key in unidentified else "no phenomenon"
            planted = f"not identified: {reason}"
        title = f"{e.parent} → {e.child}: {e.kind} ({e.sign}); {planted}; {e.note}"
        edges.append(dag.Edge(e.parent, e.child, e.kind, f"{e.kind} {value}", title, css))
    causal = {(e.parent, e.child) for e in c.edges}
    for parent, child in sorted(set(structural_edges(c.variables)) - causal):
        title = f"{parent} → {child}: structural (drawn once {parent}'s events or trials exist)"
        edges.append(dag.Edge(parent, child, "structural", "", title))
    return nodes, edges


def _example_key(template: str, prefix: str) -> str:
    if not _SAFE_TEMPLATE.match(template):
        return template
    return template.format(P=prefix.upper(), p=prefix.lower(), PP=(prefix.upper() * 2)[:3], n=EXAMPLE_NUMBER)


def _keys_and_dates(c: Contract, d: Deliverable, start: dt.date) -> tuple[list[str], list[str]]:
    prefixes = {e.table: e.prefix for e in c.entities}
    keys, dates = [], []
    for col in d.columns:
        fmt_ = col.format or ""
        table, _, column = col.source.partition(".")
        if column in ("unit_id", "party_id", "event_id"):
            entity = {"event_id": "events", "party_id": "parties"}.get(column, "units")
            template = key_template(col)
            if template is not None:
                shown = f"{col.name}: {_example_key(template, prefixes.get(entity, ''))}"
            else:
                shown = f"{col.name}: {fmt_ or 'number'}"
            keys.append(shown + ("" if column == "event_id" or table == "units" else f" (→ {entity})"))
        elif fmt_ in DATE_STYLES:
            dates.append(f"{col.name}: {fmt_} ({start.strftime(DATE_STYLES[fmt_])})")
    return keys, dates


def _files(world: WorldFiles, start: dt.date) -> list[dict[str, Any]]:
    c = world.contract
    rows = {f.get("file"): f for f in world.projection["files"] if isinstance(f, dict)}
    out = []
    for d in sorted(c.deliverables, key=lambda d: (d.system, d.grain == "dictionary", d.file)):
        record = rows.get(d.file, {})
        keys, dates = _keys_and_dates(c, d, start)
        defects = record.get("defects") if isinstance(record.get("defects"), list) else []
        out.append(
            {
                "system": d.system,
                "file": d.file,
                "format": d.format,
                "grain": d.grain,
                "rows": record.get("rows_observed"),
                "columns": len(d.columns),
                "sheets": len(d.sheets),
                "keys": keys,
                "dates": dates,
                "defects": len(defects),
            }
        )
    return out


def _count(record: dict, key: str) -> int:
    value = record.get(key)
    return len(value) if isinstance(value, list) else 0


def _ranges(record: dict) -> int:
    ranges = record.get("row_ranges")
    if not isinstance(ranges, list):
        return 0
    return sum(int(r[1]) - int(r[0]) for r in ranges if isinstance(r, list) and len(r) == 2)


def _on(day: object, start: dt.date) -> str:
    if not isinstance(day, int):
        return "?"
    return f"day {day} ({(start + dt.timedelta(days=day)).isoformat()})"


# size: one summary per defect kind, each a line of the table, kept together so the table reads as one
def _defect_row(record: dict, rows_observed: int, start: dt.date) -> tuple[str, str, str]:
    """(column, where, parameters) of one projection record, summarised for people."""
    kind = record.get("kind")
    column = str(record.get("column", ""))
    share = (lambda k: f" ({pct(k / rows_observed)})") if rows_observed else (lambda k: "")
    if kind == "missing":
        k = _count(record, "rows")
        return column, f"{k:,} rows{share(k)}", "values blanked"
    if kind == "duplicates":
        k = _count(record, "inserted_at")
        return "(whole rows)", f"{k:,} rows{share(k)}", "re-sent copies of earlier rows"
    if kind == "delay":
        days = (
            [d for d in record.get("days", []) if isinstance(d, int | float)]
            if isinstance(record.get("days"), list)
            else []
        )
        k = _count(record, "rows")
        spread = f"{fmt(min(days))}-{fmt(max(days))} days late" if days else ""
        return column, f"{k:,} rows{share(k)}", spread
    if kind == "unit_drift":
        k = _ranges(record)
        params = f"{record.get('unit_from')} → {record.get('unit_to')} (×{fmt(record.get('factor'), 6)})"
        return column, f"from {_on(record.get('from_day'), start)}, {k:,} rows", params
    if kind == "schema_drift":
        k = _ranges(record)
        return column, f"from {_on(record.get('from_day'), start)}, {k:,} rows", f"renamed {record.get('new_column')}"
    if kind == "id_variants":
        changes = record.get("changes") if isinstance(record.get("changes"), list) else []
        shown = [c for c in changes if isinstance(c, list) and len(c) >= 2][:2]
        examples = "; ".join(f"{c[0]} → {c[1]}" for c in shown)
        return column, f"{len(changes)} names", f"spelled differently, e.g. {examples}" if examples else ""
    keys = ", ".join(sorted(k for k in record if k != "kind"))
    return column, "", f"fields: {keys}"


def _defects(world: WorldFiles, start: dt.date) -> list[dict[str, str]]:
    out = []
    for f in sorted((f for f in world.projection["files"] if isinstance(f, dict)), key=lambda f: str(f.get("file"))):
        rows = f.get("rows_observed") if isinstance(f.get("rows_observed"), int) else 0
        for record in f.get("defects", []) if isinstance(f.get("defects"), list) else []:
            if isinstance(record, dict):
                column, where, params = _defect_row(record, rows, start)
                out.append(
                    {
                        "kind": str(record.get("kind")),
                        "file": str(f.get("file")),
                        "column": column,
                        "where": where,
                        "params": params,
                    }
                )
    return out


def _strip(world: WorldFiles, start: dt.date) -> timeline.Strip:
    switches, drift = [], []
    for f in world.projection["files"]:
        for record in f.get("defects", []) if isinstance(f, dict) and isinstance(f.get("defects"), list) else []:
            if not isinstance(record, dict) or not isinstance(record.get("from_day"), int):
                continue
            day, name, column = record["from_day"], f.get("file"), record.get("column")
            if record.get("kind") == "unit_drift":
                label = f"{name}: {column} {record.get('unit_from')}→{record.get('unit_to')}"
                switches.append(timeline.Mark(day, label, f"{label} from {_on(day, start)}"))
            elif record.get("kind") == "schema_drift":
                label = f"{name}: {column}→{record.get('new_column')}"
                drift.append(timeline.Mark(day, label, f"{label} from {_on(day, start)}"))
    c = world.contract
    return timeline.Strip(
        start=start,
        periods=c.timeline.periods,
        change_day=c.timeline.change_day,
        policies=world.policy_changes,
        unit_switches=sorted(switches, key=lambda m: (m.day, m.label)),
        schema_drift=sorted(drift, key=lambda m: (m.day, m.label)),
    )


def _phenomena(world: WorldFiles) -> list[dict[str, Any]]:
    found = {
        e.id: e
        for e in (
            world.audit.check("recoverability").estimates if world.audit and world.audit.check("recoverability") else []
        )
    }
    raw = world.audit.raw_estimates if world.audit else {}
    out = []
    for ph in world.contract.phenomena:
        est = found.get(ph.id)
        out.append(
            {
                "id": ph.id,
                "kind": ph.kind,
                "statistic": ph.statistic,
                "target": fmt(ph.target, 4),
                "tolerance": fmt(ph.tolerance, 3),
                "estimate": fmt(est.estimate, 4) if est else "n/a",
                "within": None if est is None else est.within,
                "raw": fmt(raw.get(ph.id), 4) if ph.id in raw else "n/a",
                "files": len(ph.files),
                "description": ph.description,
                "gauge": Markup(gauge(ph.target, ph.tolerance, est.estimate if est else None, raw.get(ph.id))),
            }
        )
    return out


def _checks(world: WorldFiles) -> list[dict[str, Any]]:
    if world.audit is None:
        return []
    return [
        {"name": c.name, "status": c.status, "reason": c.reason, "problems": c.problems[:5]} for c in world.audit.checks
    ]


def _task(t: Task) -> dict[str, Any]:
    def points(polarity: str) -> float:
        return sum(i.points for i in t.rubric if i.polarity == polarity)

    return {
        "id": t.task_id,
        "kind": t.kind,
        "variable": t.variable,
        "files": t.files,
        "items": len(t.rubric),
        "positive": sum(i.polarity == "positive" for i in t.rubric),
        "negative": sum(i.polarity == "negative" for i in t.rubric),
        "positive_points": fmt(points("positive")),
        "negative_points": fmt(points("negative")),
        "computation": sum(i.kind == "computation" for i in t.rubric),
        "insight": sum(i.kind == "insight" for i in t.rubric),
        "reference_score": fmt(t.reference_score),
        "prompt": t.prompt,
        "rubric": [
            {"id": i.id, "polarity": i.polarity, "kind": i.kind, "points": fmt(i.points), "criterion": i.criterion}
            for i in t.rubric
        ],
    }

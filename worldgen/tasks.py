"""Audited world -> tasks: cause and consequence questions with rubrics grounded on the generation record.

Selection (`phenomena.task_nodes`): per depth bucket, the largest in-degree node gets a *cause* task and the
largest out-degree node a *consequence* task. Every rubric item is backed by a contract phenomenon that the
audit recovered from the observed files; items whose phenomenon was not recovered are left out, and a task
whose core finding was not recovered is not emitted. Expected answers come from the contract's targets,
reference answers from the auditor's blind analysis of the observed files.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import jinja2
import networkx as nx
import numpy as np

from contracts.audit import AuditReport
from contracts.model import Contract, Edge, Phenomenon
from rubrics.grade import grade_rules
from rubrics.model import Check, RubricItem, Task
from worldgen.mechanisms import MECHANISMS
from worldgen.phenomena import task_nodes

PROMPTS = {
    "cause": [
        "{{ intro }} Average {{ label }} changed between the first and the second half of the period covered by "
        "the attached files. What drove that change, and how much of it does each driver explain?",
        "{{ intro }} I need to explain the shift in {{ label }} from H1 to H2 to my leadership team. Work out how "
        "much it moved, which factors caused the move, and each factor's share of it.",
        "{{ intro }} Something changed in {{ label }} half-way through the period. Using the files from our "
        "systems, quantify the change and attribute it to its causes, with each cause's contribution.",
    ],
    "consequence": [
        "{{ intro }} I want to understand what {{ label }} affects. Which other measures in the attached files "
        "does it move, in which direction, and by how much?",
        "{{ intro }} Before we change anything about {{ label }}, tell me what it drives downstream: the measures "
        "it influences, the direction of each effect, and the size of each effect.",
        "{{ intro }} Map the consequences of {{ label }}: for every measure it changes, say whether it pushes it up "
        "or down and quantify the effect.",
    ],
}
INTRO = "I'm the {{ role }} at {{ organisation }} ({{ region }}).{% if concern %} We're worried that {{ concern }}.{% endif %}"
ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


def label(name: str) -> str:
    return name.replace("_", " ")


def _direction(edge: Edge) -> str | None:
    return MECHANISMS[edge.kind].direction(edge.params)


@dataclass(frozen=True)
class World:
    """What a task builder reads: the sealed contract, its DAG, and what the audit recovered from E."""

    contract: Contract
    graph: nx.DiGraph
    edges: dict[str, Edge]  # "parent->child" -> edge
    phenomena: dict[str, Phenomenon]
    recovered: dict[str, float]  # phenomenon id -> the blind estimate from the cleaned files
    raw: dict[str, float]  # phenomenon id -> what the uncleaned files give
    directions: dict[str, float]  # edge id -> sign of the effect the blind analysis found

    @classmethod
    def of(cls, contract: Contract, audit: AuditReport) -> World:
        return cls(
            contract=contract,
            graph=nx.DiGraph([(e.parent, e.child) for e in contract.edges]),
            edges={f"{e.parent}->{e.child}": e for e in contract.edges},
            phenomena={ph.id: ph for ph in contract.phenomena},
            recovered=audit.recovered,
            raw=audit.raw_estimates,
            directions=audit.directions,
        )


def build_tasks(contract: Contract, audit: AuditReport, rng: np.random.Generator) -> list[Task]:
    """Every task the audited world supports, in selection order."""
    world = World.of(contract, audit)
    tasks = []
    for kind, node in task_nodes(contract):
        builder = _cause if kind == "cause" else _consequence
        built = builder(world, node)
        if built is None:
            continue
        rubric, expected, reference, files = built
        persona = contract.persona
        concern = persona.concern if node == persona.focus else ""
        intro = ENV.from_string(INTRO).render(
            role=persona.role, organisation=persona.organisation, region=persona.region, concern=concern
        )
        template = PROMPTS[kind][int(rng.integers(len(PROMPTS[kind])))]
        task = Task(
            task_id=f"{contract.world_id}-{kind}-{node}",
            world_id=contract.world_id,
            kind=kind,
            variable=node,
            prompt=ENV.from_string(template).render(intro=intro, label=label(node)),
            files=sorted(files),
            answer_schema=answer_schema(kind, [v.name for v in contract.variables]),
            rubric=rubric,
            expected_answer=expected,
            reference_answer=reference,
            reference_score=0.0,
        )
        task.reference_score = grade_rules(task, reference)["score"]
        tasks.append(task)
    return tasks


# size: the cause rubric in one place until issue 7 reworks it into one helper per item family
def _cause(world: World, node: str):
    graph, edges, phenomena, recovered, raw = world.graph, world.edges, world.phenomena, world.recovered, world.raw
    change_id = f"change:{node}"
    if change_id not in recovered:
        return None
    change = phenomena[change_id]
    files = set(change.files)
    rubric = [
        _item(
            "positive",
            "computation",
            "change",
            2.0,
            f"States that mean {label(node)} changed by {change.target:+.1%} from H1 to H2 (within {change.tolerance:.0%} points).",
            Check(kind="number", path="change.relative_change", expected=change.target, tolerance=change.tolerance),
            change_id,
        )
    ]
    expected = {"variable": node, "change": {"relative_change": change.target}, "drivers": []}
    reference = {"variable": node, "change": {"relative_change": recovered[change_id]}, "drivers": []}
    for parent in sorted(graph.predecessors(node)):
        share_id, edge_id = f"share:{parent}->{node}", f"edge:{parent}->{node}"
        if edge_id not in recovered:
            continue
        files |= set(phenomena[edge_id].files)
        share = phenomena.get(share_id)
        if share is not None and share_id in recovered and abs(share.target) < share.tolerance:
            # A cause of the level that explains none of the change: no item either way.
            expected["drivers"].append({"variable": parent, "direction": "+", "share": share.target})
            reference["drivers"].append({"variable": parent, "direction": "+", "share": recovered[share_id]})
        elif share is not None and share_id in recovered:
            direction = "+" if share.target * change.target > 0 else "-"
            ref_direction = "+" if recovered[share_id] * recovered[change_id] > 0 else "-"
            pushed = "up" if direction == "+" else "down"
            rubric.append(
                _item(
                    "positive",
                    "insight",
                    f"driver:{parent}",
                    1.0,
                    f"Names {label(parent)} as a driver that pushed {label(node)} {pushed}.",
                    _named("drivers", parent, direction),
                    share_id,
                )
            )
            rubric.append(
                _item(
                    "positive",
                    "computation",
                    f"share:{parent}",
                    1.0,
                    f"Attributes {share.target:.0%} of the change to {label(parent)} (within {share.tolerance:.0%} points).",
                    _entry_number("drivers", parent, "share", share),
                    share_id,
                )
            )
            expected["drivers"].append({"variable": parent, "direction": direction, "share": share.target})
            reference["drivers"].append({"variable": parent, "direction": ref_direction, "share": recovered[share_id]})
        else:  # the change is immaterial or its drivers cancel: naming the causes is the finding
            rubric.append(
                _item(
                    "positive",
                    "insight",
                    f"driver:{parent}",
                    1.0,
                    f"Names {label(parent)} as a cause of {label(node)}.",
                    _named("drivers", parent),
                    edge_id,
                )
            )
            expected["drivers"].append(
                {
                    "variable": parent,
                    "direction": _direction(edges[f"{parent}->{node}"]) or "+",
                }
            )
            reference["drivers"].append({"variable": parent, "direction": expected["drivers"][-1]["direction"]})
    for child in sorted(nx.descendants(graph, node)):
        rubric.append(
            _item(
                "negative",
                "insight",
                f"downstream:{child}",
                2.0,
                f"Names {label(child)} as a driver, although it is downstream of {label(node)} (an effect, not a cause).",
                _named("drivers", child),
            )
        )
    parents = set(graph.predecessors(node))
    ancestors = set(nx.ancestors(graph, node))
    siblings = {c for p in parents for c in graph.successors(p)} - {node} - ancestors - set(nx.descendants(graph, node))
    for sibling in sorted(siblings):
        rubric.append(
            _item(
                "negative",
                "insight",
                f"confounded:{sibling}",
                1.0,
                f"Names {label(sibling)} as a driver: it moves with {label(node)} only because they share a cause.",
                _named("drivers", sibling),
            )
        )
    related = ancestors | set(nx.descendants(graph, node)) | siblings | {node}
    rubric.append(_unrelated_item("drivers", sorted(related), f"a cause of {label(node)}"))
    if abs(change.target) > change.tolerance:
        rubric.append(
            _item(
                "negative",
                "computation",
                "wrong-direction",
                2.0,
                f"Says {label(node)} moved {'down' if change.target > 0 else 'up'}: the wrong direction.",
                Check(kind="sign", path="change.relative_change", expected=-change.target),
                change_id,
            )
        )
    raw_value = raw.get(change_id)
    if raw_value is not None and math.isfinite(raw_value) and abs(raw_value - change.target) > 2 * change.tolerance:
        rubric.append(
            _item(
                "negative",
                "computation",
                "uncleaned-change",
                2.0,
                f"Reports a change of {raw_value:+.1%}, the figure the files give before duplicates, unit switches and renamed "
                "columns are cleaned.",
                Check(
                    kind="number",
                    path="change.relative_change",
                    expected=raw_value,
                    tolerance=change.tolerance,
                    unless=change.target,
                ),
                change_id,
            )
        )
    return rubric, expected, reference, files


# size: the consequence rubric in one place until issue 7 reworks it into one helper per item family
def _consequence(world: World, node: str):
    graph, edges, phenomena, recovered = world.graph, world.edges, world.phenomena, world.recovered
    rubric, effects, ref_effects, files = [], [], [], set()
    for child in sorted(graph.successors(node)):
        edge_id = f"edge:{node}->{child}"
        if edge_id not in recovered:
            continue
        edge, ph = edges[f"{node}->{child}"], phenomena[edge_id]
        files |= set(ph.files)
        direction = _direction(edge)
        ref_sign = world.directions.get(f"{node}->{child}")
        ref_direction = None if ref_sign is None else ("+" if ref_sign > 0 else "-")
        moves = f", pushed {'up' if direction == '+' else 'down'} as {label(node)} rises." if direction else "."
        rubric.append(
            _item(
                "positive",
                "insight",
                f"effect:{child}",
                1.0,
                f"Names {label(child)} as affected by {label(node)}{moves}",
                _named("effects", child, direction),
                edge_id,
            )
        )
        rubric.append(
            _item(
                "positive",
                "computation",
                f"magnitude:{child}",
                1.0,
                f"Quantifies the effect on {label(child)}: {ph.statistic.replace('_', ' ')} {ph.target:.4g} (+- {ph.tolerance:.3g}).",
                _entry_number("effects", child, "magnitude", ph),
                edge_id,
            )
        )
        if direction:
            opposite = "-" if direction == "+" else "+"
            rubric.append(
                _item(
                    "negative",
                    "insight",
                    f"reversed:{child}",
                    1.0,
                    f"Says {label(node)} pushes {label(child)} {'down' if direction == '+' else 'up'}: the wrong direction.",
                    _named("effects", child, opposite),
                    edge_id,
                )
            )

        for out, sign, magnitude in (
            (effects, direction, ph.target),
            (ref_effects, ref_direction or direction, recovered[edge_id]),
        ):
            out.append(
                {
                    "variable": child,
                    "direction": sign or "+",
                    "mechanism": edge.kind,
                    "statistic": ph.statistic,
                    "magnitude": magnitude,
                }
            )
    if len(effects) < 1:
        return None
    related = set(nx.ancestors(graph, node)) | set(nx.descendants(graph, node)) | {node}
    rubric.append(_unrelated_item("effects", sorted(related), f"affected by {label(node)}"))
    for parent in sorted(nx.ancestors(graph, node)):
        rubric.append(
            _item(
                "negative",
                "insight",
                f"upstream:{parent}",
                2.0,
                f"Names {label(parent)} as affected by {label(node)}, although it is upstream (a cause, not an effect).",
                _named("effects", parent),
            )
        )
    return rubric, {"variable": node, "effects": effects}, {"variable": node, "effects": ref_effects}, files


# size: one keyword per RubricItem field
def _item(
    polarity: str, kind: str, id: str, points: float, criterion: str, check: Check, phenomenon: str | None = None
) -> RubricItem:
    return RubricItem(
        id=id, polarity=polarity, kind=kind, points=points, criterion=criterion, check=check, phenomenon=phenomenon
    )


def _named(path: str, variable: str, direction: str | None = None) -> Check:
    return Check(kind="named", path=path, variable=variable, direction=direction)


def _entry_number(path: str, variable: str, field: str, ph: Phenomenon) -> Check:
    return Check(
        kind="entry_number", path=path, variable=variable, field=field, expected=ph.target, tolerance=ph.tolerance
    )


def _unrelated_item(path: str, related: list[str], role: str) -> RubricItem:
    """One penalty for naming, as {role}, any variable with no causal path to the question's variable."""
    return _item(
        "negative",
        "insight",
        "unrelated",
        2.0,
        f"Names as {role} a variable that has no causal connection to it (listing everything is not an analysis).",
        Check(kind="named_outside", path=path, allowed=related),
    )


def answer_schema(kind: str, variables: list[str]) -> dict:
    entry = {
        "type": "object",
        "required": ["variable"],
        "properties": {"variable": {"type": "string", "enum": variables}, "direction": {"enum": ["+", "-"]}},
    }
    if kind == "cause":
        entry["properties"]["share"] = {
            "type": "number",
            "description": "share of the H1->H2 change this driver explains",
        }
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["variable", "change", "drivers"],
            "properties": {
                "variable": {"type": "string"},
                "change": {
                    "type": "object",
                    "required": ["relative_change"],
                    "properties": {
                        "relative_change": {"type": "number", "description": "(mean H2 - mean H1) / mean H1"}
                    },
                },
                "drivers": {"type": "array", "items": entry},
            },
        }
    entry["properties"] |= {
        "mechanism": {
            "type": "string",
            "description": "shape of the effect: linear, log, step, saturating, delayed, seasonal, by category, per capacity",
        },
        "statistic": {"type": "string"},
        "magnitude": {
            "type": "number",
            "description": (
                "the effect's characteristic number: slope per unit (of log1p for log effects, per capacity unit for per-capacity "
                "effects, per moderator sd for interactions), the parent level of a step or of half a saturating rise, the delay "
                "in days, the seasonal swing as a share of the slope, or the spread between category levels"
            ),
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["variable", "effects"],
        "properties": {"variable": {"type": "string"}, "effects": {"type": "array", "items": entry}},
    }


def write_tasks(tasks: list[Task], folder: Path) -> None:
    for task in tasks:
        (folder / f"{task.task_id}.json").write_text(json.dumps(task.model_dump(mode="json"), indent=1) + "\n")

"""Audited world -> tasks: cause and consequence questions with rubrics grounded on the generation record.

Selection (`phenomena.task_nodes`): per depth bucket, a *cause* task for a variable that changed materially
and whose drivers' shares are known, and a *consequence* task for a variable whose effects are at most half
of those the domain finds plausible. Every positive item is backed by a phenomenon the audit recovered
from the observed files. Numbers weigh more than names (a name earns 1, a number 2), and every plausible
hypothesis this world does not have costs a point when named: reciting the domain pack does not pay.
Expected answers come from the contract's targets, reference answers from the auditor's blind analysis.
"""

from __future__ import annotations

import functools
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
from worldgen.write import json_text

NAME_POINTS = 1.0  # naming a driver or an effect (with its direction)
NUMBER_POINTS = 2.0  # a share, a magnitude or the change: the computation is the analysis
DOWNSTREAM_POINTS = 2.0  # an effect named as a cause (or a cause as an effect): a clear error
ABSENT_POINTS = 1.5  # a plausible hypothesis this world does not have, named as if it held (worse than a miss)
CONFOUNDED_POINTS = 1.0  # a variable that only shares a cause with the question's variable
UNRELATED_POINTS = 2.0  # any variable with no causal connection at all (charged once)
REVERSED_POINTS = 1.0  # a real driver or effect named with the wrong direction
WRONG_CHANGE_POINTS = 2.0  # the change reported in the wrong direction
UNCLEANED_POINTS = 2.0  # the change as the uncleaned files give it
MIN_EFFECTS = 2  # a consequence task asks for effects, plural: one lucky guess must not answer it

PROMPTS = {
    "cause": [
        "{{ intro }} Average {{ label }} changed between the first and the second half of the period covered by "
        "the attached files. What drove that change, and how much of it does each driver explain?",
        "{{ intro }} I need to explain the shift in {{ label }} from the first to the second half of the period to "
        "my leadership team. Work out how much it moved, which factors caused the move, and each factor's share of it.",
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
INTRO = (
    "I'm the {{ role }} at {{ organisation }} ({{ region }})."
    "{% if worry %} We're worried that {{ worry }}.{% elif question %} {{ question }}.{% endif %}"
)
HOW = {
    "cause": (
        "Answer with the change as relative_change = (mean over the second half - mean over the first half) / "
        "mean over the first half (0.12 means +12%; the halves split the days the files cover into two equal "
        "runs). For each driver give its direction ('+' if it pushed {{ label }} up over the period, '-' if down) "
        "and its share: its part of the change explained by all the drivers (shares sum to 1; a driver working "
        "against the change has a negative share)."
    ),
    "consequence": (
        "For each measure {{ label }} affects, give the direction ('+' if the measure rises when {{ label }} "
        "rises, '-' if it falls; none for an effect that differs by category) and the magnitude: the effect's "
        "characteristic number in the units of the cleaned files, as the answer schema defines it for the shape "
        "of the effect."
    ),
}
ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


@functools.cache
def _template(source: str) -> jinja2.Template:
    """The compiled template of a constant text: compiling costs ~20x a render, and every world renders the same
    few texts (`ENV.from_string` compiles anew on every call)."""
    return ENV.from_string(source)


def label(name: str) -> str:
    return name.replace("_", " ")


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
    candidates: nx.DiGraph  # every plausible edge of the domain, realised or not

    @classmethod
    def of(cls, contract: Contract, audit: AuditReport) -> World:
        graph = nx.DiGraph()
        graph.add_nodes_from(v.name for v in contract.variables)
        graph.add_edges_from((e.parent, e.child) for e in contract.edges)
        plausible = nx.DiGraph()
        plausible.add_edges_from((c.parent, c.child) for c in contract.candidates)
        return cls(
            contract=contract,
            graph=graph,
            edges={f"{e.parent}->{e.child}": e for e in contract.edges},
            phenomena={ph.id: ph for ph in contract.phenomena},
            recovered=audit.recovered,
            raw=audit.raw_estimates,
            directions=audit.directions,
            candidates=plausible,
        )

    def plausible_parents(self, node: str) -> set[str]:
        return set(self.candidates.predecessors(node)) if node in self.candidates else set()

    def plausible_children(self, node: str) -> set[str]:
        return set(self.candidates.successors(node)) if node in self.candidates else set()


def build_tasks(contract: Contract, audit: AuditReport, rng: np.random.Generator) -> list[Task]:
    """Every task the audited world supports, in selection order."""
    world = World.of(contract, audit)
    tasks = []
    for kind, node in task_nodes(contract):
        built = _cause(world, node) if kind == "cause" else _consequence(world, node)
        if built is None:
            continue
        rubric, expected, reference, files = built
        template = PROMPTS[kind][int(rng.integers(len(PROMPTS[kind])))]
        prompt = _template(template).render(intro=_intro(world, node), label=label(node))
        prompt += "\n\n" + _template(HOW[kind]).render(label=label(node))
        task = Task(
            task_id=f"{contract.world_id}-{kind}-{node}",
            world_id=contract.world_id,
            kind=kind,
            variable=node,
            prompt=prompt,
            files=sorted(files),
            answer_schema=answer_schema(kind, contract),
            rubric=rubric,
            expected_answer=expected,
            reference_answer=reference,
            reference_score=0.0,
        )
        task.reference_score = grade_rules(task, reference)["score"]
        tasks.append(task)
    return tasks


def _intro(world: World, node: str) -> str:
    """The persona's voice; its concern only when it is about this variable and the world agrees with it."""
    persona = world.contract.persona
    concern = persona.concern if node == persona.focus else ""
    change = world.phenomena.get(f"change:{node}")
    if concern and persona.trend is not None and (change is None or change.target is None):
        concern = ""
    elif concern and persona.trend is not None and (change.target > 0) != (persona.trend == "up"):
        concern = ""  # the world did not move the way the persona fears: say nothing rather than mislead
    # A concern with a direction is a worry; a neutral one ("we want to know what drives X") is a question.
    worry = concern if persona.trend is not None else ""
    question = concern[:1].upper() + concern[1:] if concern and persona.trend is None else ""
    return _template(INTRO).render(
        role=persona.role, organisation=persona.organisation, region=persona.region, worry=worry, question=question
    )


def _direction(edge: Edge) -> str | None:
    return MECHANISMS[edge.kind].direction(edge.params)


def _cause(world: World, node: str):
    graph, phenomena, recovered, raw = world.graph, world.phenomena, world.recovered, world.raw
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
            NUMBER_POINTS,
            f"States that mean {label(node)} changed by {change.target:+.1%} from the first to the second half "
            f"(within {change.tolerance:.1%} points).",
            Check(kind="number", path="change.relative_change", expected=change.target, tolerance=change.tolerance),
            change_id,
        )
    ]
    expected = {"variable": node, "change": {"relative_change": change.target}, "drivers": []}
    reference = {"variable": node, "change": {"relative_change": recovered[change_id]}, "drivers": []}
    for parent in sorted(graph.predecessors(node)):
        share_id = f"share:{parent}->{node}"
        share = phenomena.get(share_id)
        if share is None or share_id not in recovered:
            continue
        files |= set(share.files)
        direction = "+" if share.target * change.target > 0 else "-"
        reference_direction = "+" if recovered[share_id] * recovered[change_id] > 0 else "-"
        expected["drivers"].append({"variable": parent, "direction": direction, "share": share.target})
        reference["drivers"].append(
            {"variable": parent, "direction": reference_direction, "share": recovered[share_id]}
        )
        if abs(share.target) < share.tolerance:  # a cause of the level that explains none of the change
            continue
        rubric += _driver_items(node, parent, direction, share, sorted(graph.predecessors(node)))
    if not any(i.id.startswith("share:") for i in rubric):
        return None  # no driver's share is a finding: the question has no answer worth grading
    rubric += _cause_negatives(world, node, change, raw.get(change_id))
    return rubric, expected, reference, files


def _driver_items(node: str, parent: str, direction: str, share: Phenomenon, causes: list[str]) -> list[RubricItem]:
    pushed = "up" if direction == "+" else "down"
    opposite = "-" if direction == "+" else "+"
    return [
        _item(
            "positive",
            "insight",
            f"driver:{parent}",
            NAME_POINTS,
            f"Names {label(parent)} as a driver that pushed {label(node)} {pushed}.",
            _named("drivers", parent, direction),
            share.id,
        ),
        _item(
            "positive",
            "computation",
            f"share:{parent}",
            NUMBER_POINTS,
            f"Attributes {share.target:.0%} of the change to {label(parent)} (within {share.tolerance:.0%} points), "
            f"giving no more than {share.tolerance:.0%} to any variable that is not a cause of {label(node)}.",
            _entry_number("drivers", parent, "share", share, allowed=causes),
            share.id,
        ),
        _item(
            "negative",
            "insight",
            f"reversed:{parent}",
            REVERSED_POINTS,
            f"Says {label(parent)} pushed {label(node)} {'down' if direction == '+' else 'up'}: the wrong direction.",
            _named("drivers", parent, opposite),
            share.id,
        ),
    ]


def _cause_negatives(world: World, node: str, change: Phenomenon, raw_value: float | None) -> list[RubricItem]:
    """Everything a cause answer can get wrong: effects, absent hypotheses, confounded or unrelated
    variables named as drivers, and a change in the wrong direction or from uncleaned files."""
    return _wrong_drivers(world, node) + _change_negatives(change, node, raw_value)


def _wrong_drivers(world: World, node: str) -> list[RubricItem]:
    graph = world.graph
    ancestors, descendants = set(nx.ancestors(graph, node)), set(nx.descendants(graph, node))
    parents = set(graph.predecessors(node))
    absent = world.plausible_parents(node) - parents - ancestors - descendants - {node}
    siblings = {c for p in parents for c in graph.successors(p)} - {node} - ancestors - descendants - absent
    related = ancestors | descendants | siblings | absent | {node}
    wrong = [
        (f"downstream:{child}", DOWNSTREAM_POINTS, f"Names {label(child)} as a driver, although it is downstream of "
         f"{label(node)} (an effect, not a cause).", child)
        for child in sorted(descendants)
    ]  # fmt: skip
    wrong += [
        (f"absent:{other}", ABSENT_POINTS, f"Names {label(other)} as a driver: a plausible cause of {label(node)}, "
         "but not one this data supports.", other)
        for other in sorted(absent)
    ]  # fmt: skip
    wrong += [
        (f"confounded:{sibling}", CONFOUNDED_POINTS, f"Names {label(sibling)} as a driver: it moves with "
         f"{label(node)} only because they share a cause.", sibling)
        for sibling in sorted(siblings)
    ]  # fmt: skip
    items = [_item("negative", "insight", id, points, text, _named("drivers", v)) for id, points, text, v in wrong]
    return items + [_unrelated_item("drivers", sorted(related), f"a cause of {label(node)}")]


def _change_negatives(change: Phenomenon, node: str, raw_value: float | None) -> list[RubricItem]:
    items = []
    target = change.target or 0.0
    if abs(target) > change.tolerance:
        items.append(
            _item(
                "negative",
                "computation",
                "wrong-direction",
                WRONG_CHANGE_POINTS,
                f"Says {label(node)} moved {'down' if target > 0 else 'up'}: the wrong direction.",
                Check(kind="sign", path="change.relative_change", expected=-target),
                change.id,
            )
        )
    if raw_value is not None and math.isfinite(raw_value) and abs(raw_value - target) > 2 * change.tolerance:
        items.append(
            _item(
                "negative",
                "computation",
                "uncleaned-change",
                UNCLEANED_POINTS,
                f"Reports a change of {raw_value:+.1%}, the figure the files give before duplicates, unit switches "
                "and renamed columns are cleaned.",
                Check(
                    kind="number",
                    path="change.relative_change",
                    expected=raw_value,
                    tolerance=change.tolerance,
                    unless=target,
                ),  # fmt: skip
                change.id,
            )
        )
    return items


def _consequence(world: World, node: str):
    graph, edges, phenomena, recovered = world.graph, world.edges, world.phenomena, world.recovered
    rubric: list[RubricItem] = []
    effects, ref_effects, files = [], [], set()
    for child in sorted(graph.successors(node)):
        edge_id = f"edge:{node}->{child}"
        if edge_id not in recovered:
            continue
        edge, ph = edges[f"{node}->{child}"], phenomena[edge_id]
        files |= set(ph.files)
        direction = _direction(edge)
        rubric += _effect_items(node, child, direction, ph)
        ref_sign = world.directions.get(f"{node}->{child}")
        ref_direction = direction if ref_sign is None else ("+" if ref_sign > 0 else "-")
        for out, sign, magnitude in ((effects, direction, ph.target), (ref_effects, ref_direction, recovered[edge_id])):
            entry = {"variable": child, "mechanism": edge.kind, "magnitude": magnitude}
            out.append(entry | ({"direction": sign} if sign else {}))
    if len(effects) < MIN_EFFECTS:
        return None
    ancestors, descendants = set(nx.ancestors(graph, node)), set(nx.descendants(graph, node))
    absent = world.plausible_children(node) - set(graph.successors(node)) - descendants - ancestors - {node}
    rubric += [
        _item(
            "negative",
            "insight",
            f"absent:{other}",
            ABSENT_POINTS,
            f"Names {label(other)} as affected: a plausible effect of {label(node)}, but not one this data supports.",
            _named("effects", other),
        )
        for other in sorted(absent)
    ]
    related = ancestors | descendants | absent | {node}
    rubric.append(_unrelated_item("effects", sorted(related), f"affected by {label(node)}"))
    rubric += [
        _item(
            "negative",
            "insight",
            f"upstream:{parent}",
            DOWNSTREAM_POINTS,
            f"Names {label(parent)} as affected by {label(node)}, although it is upstream (a cause, not an effect).",
            _named("effects", parent),
        )
        for parent in sorted(ancestors)
    ]
    return rubric, {"variable": node, "effects": effects}, {"variable": node, "effects": ref_effects}, files


def _effect_items(node: str, child: str, direction: str | None, ph: Phenomenon) -> list[RubricItem]:
    moves = f", pushed {'up' if direction == '+' else 'down'} as {label(node)} rises." if direction else "."
    items = [
        _item(
            "positive",
            "insight",
            f"effect:{child}",
            NAME_POINTS,
            f"Names {label(child)} as affected by {label(node)}{moves}",
            _named("effects", child, direction),
            ph.id,
        ),
        _item(
            "positive",
            "computation",
            f"magnitude:{child}",
            NUMBER_POINTS,
            f"Quantifies the effect on {label(child)}: {ph.statistic.replace('_', ' ')} {ph.target:.4g} "
            f"(+- {ph.tolerance:.3g}).",
            _entry_number("effects", child, "magnitude", ph),
            ph.id,
        ),
    ]
    if direction:
        opposite = "-" if direction == "+" else "+"
        items.append(
            _item(
                "negative",
                "insight",
                f"reversed:{child}",
                REVERSED_POINTS,
                f"Says {label(node)} pushes {label(child)} {'down' if direction == '+' else 'up'}: the wrong direction.",
                _named("effects", child, opposite),
                ph.id,
            )
        )
    return items


# size: one keyword per RubricItem field, so every item reads the same way where it is built
def _item(
    polarity: str, kind: str, id: str, points: float, criterion: str, check: Check, phenomenon: str | None = None
) -> RubricItem:
    return RubricItem(
        id=id, polarity=polarity, kind=kind, points=points, criterion=criterion, check=check, phenomenon=phenomenon
    )


def _named(path: str, variable: str, direction: str | None = None) -> Check:
    return Check(kind="named", path=path, variable=variable, direction=direction)


def _entry_number(path: str, variable: str, field: str, ph: Phenomenon, allowed: list[str] | None = None) -> Check:
    return Check(
        kind="entry_number", path=path, variable=variable, field=field, expected=ph.target, tolerance=ph.tolerance,
        allowed=allowed,
    )  # fmt: skip


def _unrelated_item(path: str, related: list[str], role: str) -> RubricItem:
    """One penalty for naming, as {role}, any variable with no causal path to the question's variable."""
    return _item(
        "negative",
        "insight",
        "unrelated",
        UNRELATED_POINTS,
        f"Names as {role} a variable that has no causal connection to it (listing everything is not an analysis).",
        Check(kind="named_outside", path=path, allowed=related),
    )


def _variables_doc(contract: Contract) -> str:
    lines = [f"- {v.name}: {v.description}" + (f" ({v.unit})" if v.unit else "") for v in contract.variables]
    return "One of this world's measures, by name:\n" + "\n".join(lines)


MAGNITUDE_DOC = "The effect's characteristic number, by the shape of the effect: " + "; ".join(
    f"{kind} - {m.magnitude_doc}" for kind, m in MECHANISMS.items()
)


RELATIVE_CHANGE_DOC = (
    "(mean over the second half of the days covered - mean over the first half) / mean over the first half, as a "
    "fraction: 0.12 means +12%; means over every reported value (per event for per-event measures, per unit and day "
    "for daily ones), after cleaning"
)
SHARE_DOC = (
    "this driver's part of the change explained by all the drivers: its contribution to (second-half mean - "
    "first-half mean) divided by the sum of all drivers' contributions; shares sum to 1, and a driver working "
    "against the change has a negative share"
)


def answer_schema(kind: str, contract: Contract) -> dict:
    variable = {"type": "string", "enum": [v.name for v in contract.variables], "description": _variables_doc(contract)}
    entries = _driver_schema(variable) if kind == "cause" else _effect_schema(variable)
    key = "drivers" if kind == "cause" else "effects"
    properties: dict = {"variable": {"type": "string", "description": "the measure the question is about"}}
    if kind == "cause":
        change = {"relative_change": {"type": "number", "description": RELATIVE_CHANGE_DOC}}
        properties["change"] = {"type": "object", "required": ["relative_change"], "properties": change}
    properties[key] = {"type": "array", "items": entries}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": ["variable", "change", "drivers"] if kind == "cause" else ["variable", "effects"],
        "properties": properties,
    }


def _driver_schema(variable: dict) -> dict:
    direction = "'+' if this driver pushed the measure up over the period, '-' if it pushed it down"
    return {
        "type": "object",
        "required": ["variable", "direction", "share"],
        "properties": {
            "variable": variable,
            "direction": {"enum": ["+", "-"], "description": direction},
            "share": {"type": "number", "description": SHARE_DOC},
        },
    }


def _effect_schema(variable: dict) -> dict:
    direction = (
        "'+' if the measure rises when the cause rises, '-' if it falls (leave out for effects by category, which "
        "have no single direction)"
    )
    return {
        "type": "object",
        "required": ["variable", "magnitude"],
        "properties": {
            "variable": variable,
            "direction": {"enum": ["+", "-"], "description": direction},
            "mechanism": {"type": "string", "enum": list(MECHANISMS), "description": "the shape of the effect"},
            "magnitude": {"type": "number", "description": MAGNITUDE_DOC},
        },
    }


def write_tasks(tasks: list[Task], folder: Path) -> None:
    for task in tasks:
        # json.dumps(indent=1) as written by `json_text` (its indenting encoder is pure Python: ~2x the CPU)
        (folder / f"{task.task_id}.json").write_text(
            json_text(task.model_dump(mode="json"), 1, ensure_ascii=True) + "\n"
        )

"""Baseline answers used to show the rubrics pay for analysis and nothing else: empty, shuffled, naive, prior.

The naive analyst reads the raw files without cleaning (no de-duplication, no unit repair, no merging of
renamed columns, exact-name joins only) and reasons by correlation: the variables that move most with the
target are named as its drivers (or, for a consequence, its effects), with shares in proportion to the
correlations and magnitudes from one-variable slopes. It is the analysis the negative items are built to catch.

The prior analyst reads no values at all. It uses everything public: the domain pack (its plausible edges,
their signs and mechanism kinds, every variable's nominal mean and spread), the persona's concern in the
prompt, and the answer schema's list of variables. It names every plausible cause (or effect), with the
pack's sign, even shares, the change its concern suggests, and magnitudes guessed from the nominal scales.
`prior+files` also uses the task's hidden `files` list (which systems the answer needs) to keep only the
candidates those files hold: it shows why that list must never reach an agent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from auditors.dataset import Dataset, from_observed
from auditors.estimate import period_means
from auditors.worldio import load_world
from rubrics.model import Task

TOP = 3


def naive_answers(world_dir: Path, tasks: list[Task]) -> dict[str, dict]:
    world = load_world(world_dir)
    assert world.contract is not None
    contract = world.contract
    data = from_observed(world, clean=False)
    daily = _daily(data, contract)
    answers = {}
    for task in tasks:
        node = task.variable
        ranked = _correlates(daily, node)
        if task.kind == "cause":
            h1, h2 = period_means(data, contract, node, None)
            change = (h2 - h1) / h1 if h1 else 0.0
            total = sum(abs(r) for _, r, _ in ranked) or 1.0
            drivers = [
                {
                    "variable": v,
                    "direction": "+" if r * _drift(daily, v) * np.sign(change or 1) > 0 else "-",
                    "share": abs(r) / total,
                }
                for v, r, _ in ranked
            ]
            answers[task.task_id] = {"variable": node, "change": {"relative_change": change}, "drivers": drivers}
        else:
            effects = [
                {"variable": v, "direction": "+" if r > 0 else "-", "magnitude": slope} for v, r, slope in ranked
            ]
            answers[task.task_id] = {"variable": node, "effects": effects}
    return answers


def _daily(data: Dataset, contract) -> pl.DataFrame:
    time_varying = [v.name for v in contract.variables if v.grain != "unit" and v.name in data.panel.columns]
    return data.panel.select("day", *time_varying)


def _correlates(daily: pl.DataFrame, node: str) -> list[tuple[str, float, float]]:
    if node not in daily.columns:
        return []
    y = daily[node].cast(pl.Float64).to_numpy()
    out = []
    for column in daily.columns:
        if column in ("day", node):
            continue
        x = daily[column].cast(pl.Float64).to_numpy()
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() < 30 or np.std(x[ok]) == 0 or np.std(y[ok]) == 0:
            continue
        r = float(np.corrcoef(x[ok], y[ok])[0, 1])
        slope = float(np.cov(y[ok], x[ok])[0, 1] / np.var(x[ok]))
        out.append((column, r, slope))
    return sorted(out, key=lambda t: -abs(t[1]))[:TOP]


def _drift(daily: pl.DataFrame, column: str) -> float:
    half = int(daily["day"].max() + 1) // 2
    early = daily.filter(pl.col("day") < half)[column].mean()
    late = daily.filter(pl.col("day") >= half)[column].mean()
    return float(np.sign((late or 0) - (early or 0))) or 1.0


DOWN_WORDS = ("fall", "drop", "slip", "declin", "lower", "worse", "shrink", "fewer", "less", "sink", "cut")
UP_WORDS = ("rise", "rising", "grow", "increas", "higher", "more", "climb", "longer", "slower", "pil", "spike", "doubl")
STRENGTH_GUESS = 0.71  # the geometric middle of the generator's published effect sizes (0.25 to 2 sd)
TYPICAL_CHANGE = 0.15  # a round guess at how much a worrying measure moved


def _concern_sign(prompt: str) -> float:
    text = prompt.lower()
    down = sum(text.count(w) for w in DOWN_WORDS)
    up = sum(text.count(w) for w in UP_WORDS)
    return 0.0 if down == up else (1.0 if up > down else -1.0)


def prior_answers(tasks: list[Task], contract=None, use_files: bool = False) -> dict[str, dict]:
    """Answers from public knowledge only (see the module docstring); `contract` is read only for which
    variables each of the task's files holds, and only when `use_files` is set."""
    from worldgen.packs import get_pack  # the packs are public; the rubric code does not need them otherwise

    answers = {}
    for task in tasks:
        pack = get_pack(task.world_id.rsplit("-s", 1)[0])
        allowed = set(
            task.answer_schema["properties"]["drivers" if task.kind == "cause" else "effects"]["items"]["properties"][
                "variable"
            ]["enum"]
        )
        if use_files and contract is not None:
            allowed &= _variables_in(contract, task.files)
        sign = _concern_sign(task.prompt)
        if task.kind == "cause":
            causes = [e for e in pack.edges if e.child == task.variable and e.parent in allowed]
            drivers = [
                {
                    "variable": e.parent,
                    "direction": "+" if (1 if e.sign == "+" else -1) * (sign or 1) > 0 else "-",
                    "share": 1 / len(causes),
                }
                for e in causes
            ]
            change = {"relative_change": sign * TYPICAL_CHANGE}
            answers[task.task_id] = {"variable": task.variable, "change": change, "drivers": drivers}
        else:
            effects = [_guess_effect(pack, e) for e in pack.edges if e.parent == task.variable and e.child in allowed]
            answers[task.task_id] = {"variable": task.variable, "effects": effects}
    return answers


def _variables_in(contract, files: list[str]) -> set[str]:
    """Which variables the given files hold. An agent could learn the same from the files' column names and
    the pack's published aliases; reading it from the contract is the same knowledge, faster."""
    held = set()
    for d in contract.deliverables:
        if d.file in files:
            held |= {c.source.split(".", 1)[1] for c in d.columns}
            held |= {f.source.split(".", 1)[1] for f in d.fields}
            if d.grain == "events":
                held.add(contract.volume.name)
    return held


def _guess_effect(pack, edge) -> dict:
    parent, child = pack.variable(edge.parent), pack.variable(edge.child)
    kind = edge.kinds[0]
    sign = 1.0 if edge.sign == "+" else -1.0
    slope = sign * STRENGTH_GUESS * child.sd / parent.sd
    magnitude = {
        "threshold": parent.mean,
        "saturation": parent.mean - parent.sd,
        "lag": 14.0,
        "seasonal": 0.65,
        "categorical": 2.5 * STRENGTH_GUESS * child.sd,
        "ratio": slope * pack.entities.unit.capacity.mean,
    }.get(kind, slope)
    entry = {"variable": edge.child, "mechanism": kind, "magnitude": float(magnitude)}
    return entry if kind == "categorical" else entry | {"direction": edge.sign}


def shuffled_answers(tasks_by_world: dict[str, list[Task]]) -> dict[str, dict]:
    """Each task answered with the expected answer of a same-kind task from the next world (round robin)."""
    worlds = sorted(tasks_by_world)
    answers = {}
    for i, world in enumerate(worlds):
        donors = [t for w in worlds[i + 1 :] + worlds[:i] for t in tasks_by_world[w]]
        for task in tasks_by_world[world]:
            donor = next((t for t in donors if t.kind == task.kind), None)
            answers[task.task_id] = donor.expected_answer if donor else {}
    return answers

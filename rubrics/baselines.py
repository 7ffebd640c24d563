"""Baseline answers used to show the rubrics are discriminating: empty, shuffled and naive.

The naive analyst reads the raw files without cleaning (no de-duplication, no unit repair, no merging of
renamed columns, exact-name joins only) and reasons by correlation: the variables that move most with the
target are named as its drivers (or, for a consequence, its effects), with shares in proportion to the
correlations and magnitudes from one-variable slopes. It is the analysis the negative items are built to catch.
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

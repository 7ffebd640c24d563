"""Which worlds and tasks make the bench: fully audited, spread evenly over domains, the deepest questions.

A world is eligible when its audit passed every check and it has a cause and a consequence task whose
reference answer (the auditor's blind analysis of the observed files) scores at least MIN_REFERENCE_SCORE:
the bench's oracle writes that answer, so every shipped task is provably solvable from its files. Of each
kind, the task on the deepest variable (its layer in the contract) is taken.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rubrics.model import Task
from worldgen.export import ExportError
from worldgen.export.source import World
from worldgen.seeding import check_seed, stream_id

MIN_REFERENCE_SCORE = 0.95  # `worldgen export check` requires the oracle to reach this; only such tasks ship
KINDS = ("cause", "consequence")  # k = 1 and k = 2 in the task directory names


@dataclass(frozen=True)
class Pick:
    world: World
    tasks: tuple[Task, Task]  # (cause, consequence)


def deepest(world: World, kind: str) -> Task | None:
    """The world's `kind` task on the deepest variable (ties: the smallest task id), among solvable ones."""
    candidates = [t for t in world.task_index if t["kind"] == kind and t["reference_score"] >= MIN_REFERENCE_SCORE]
    best = min(candidates, key=lambda t: (-world.depth(t), t["task_id"]), default=None)
    return None if best is None else world.task(best["task_id"])


def eligible(worlds: list[World]) -> list[Pick]:
    picks = []
    for world in worlds:
        if not world.passes():
            continue
        chosen = tuple(deepest(world, kind) for kind in KINDS)
        if all(chosen):
            picks.append(Pick(world, chosen))  # type: ignore[arg-type]
    return picks


def choose(picks: list[Pick], n: int, seed: int) -> list[Pick]:
    """`n` picks spread over domains as evenly as they allow, drawn by `seed`; returned in world order.

    Round robin over the domains in a seeded order, each domain's worlds in a seeded order: domains that
    have enough worlds get counts that differ by at most one, and a domain with fewer gives all it has.
    """
    check_seed(seed)
    if n > len(picks):
        raise ExportError(
            f"--worlds {n}: the build has only {len(picks)} eligible world(s) (audit passed every check, with a "
            f"cause and a consequence task the reference analysis solves); build more worlds or ask for fewer"
        )
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream_id("export/bench"),)))
    by_domain: dict[str, list[Pick]] = defaultdict(list)
    for pick in sorted(picks, key=lambda p: p.world.index):
        by_domain[pick.world.domain].append(pick)
    domains = sorted(by_domain)
    domains = [domains[i] for i in rng.permutation(len(domains))]
    queues = {d: [by_domain[d][i] for i in rng.permutation(len(by_domain[d]))] for d in sorted(by_domain)}
    chosen: list[Pick] = []
    for round_ in range(max(len(q) for q in queues.values())):
        for domain in domains:
            if len(chosen) < n and round_ < len(queues[domain]):
                chosen.append(queues[domain][round_])
    return sorted(chosen, key=lambda p: p.world.index)

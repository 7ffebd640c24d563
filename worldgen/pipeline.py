"""One world, top to bottom: persona -> skeleton -> contract -> canonical -> sealed contract -> observed ->
written -> audited -> tasks.

`build_world` is the whole method in one readable function. Each stage draws from its own named seed
stream (`seeding.Streams`), so a stage's output depends only on (root seed, world index, stage) and on the
stages before it. After the contract stage the sealed contract is the only specification: `regenerate`
rebuilds X and E from it alone. The world is written under a temporary name and renamed into place only
when complete.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from auditors import audit_world
from contracts.model import Contract
from worldgen import canonical, observe, phenomena, roots, skeleton
from worldgen.contract import WorldSpec, build_contract
from worldgen.observe import DefectSettings, ObservedFile
from worldgen.packs import DomainPack
from worldgen.seeding import Streams
from worldgen.tasks import build_tasks, write_tasks
from worldgen.write import record_verdict, write_world

# Redraws of X while the persona's trend does not show. A root carries the trend (`roots.trend_push`), but
# the focus's other causes and seasons can outweigh it: in 200 default worlds of seed 0 the first draw
# plants it in 65 of the 165 with a trend, 8 draws in 105. Most of the 60 left have no root to carry it
# (their focus answers only to weather and fixed site attributes): those draw only their last attempt; their
# prompts withhold the concern.
TREND_ATTEMPTS = 8


@dataclass
class WorldResult:
    world_id: str
    index: int
    path: Path
    entry: dict
    timings: dict[str, float] = field(default_factory=dict)


class _Laps:
    """Wall-clock time per stage (kept outside the world, whose bytes must not depend on the clock)."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._clock = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round(now - self._clock, 6)
        self._clock = now


def synthesize(
    world: WorldSpec, pack: DomainPack, settings: DefectSettings, lap: Callable[[str], None] = lambda stage: None
) -> tuple[Contract, canonical.CanonicalState, list[ObservedFile]]:
    """The world's sealed contract, its canonical state X and its observed files E, in memory."""
    streams = Streams(world.seed, world.index)
    dag = skeleton.sample_skeleton(pack, streams.rng("skeleton"), world.persona.focus)
    lap("dag")
    draft = build_contract(world, pack, dag, streams)
    lap("contract")
    draft.attempt, state = plant_trend(draft, streams)
    contract = phenomena.seal(draft, state, settings.rows_lost())
    lap("canonical")
    observed = observe.project(contract, state, streams.rng("defects"), settings)
    lap("projection")
    return contract, state, observed


def plant_trend(draft: Contract, streams: Streams) -> tuple[int, canonical.CanonicalState]:
    """Plant the persona's trend: each attempt's carrier root changes the way that moves the focus the
    persona's way (`roots.trend_push`); X is redrawn until the focus does move that way (the last attempt is
    kept if none does). Many attempts still miss, so each is judged on a probe that draws only the focus and
    what it depends on, bit for bit as the full state would have them (`canonical.probe`); only the attempt
    kept is drawn in full, taking the steps its probe drew whole as they are. The last attempt is kept
    whatever it does, so it needs no probe. Without a root to carry the trend no attempt is pushed its way
    (one shows it only by chance: 1 of 26 such worlds in 200 of seed 0), so the last attempt is drawn
    straight away, without the 7 probes that would almost surely be thrown away."""
    judged_at = phenomena.trend_layer(draft)
    first = 0 if judged_at is None or roots.trend_carriers(draft) else TREND_ATTEMPTS - 1
    for attempt in range(first, TREND_ATTEMPTS):
        last = attempt == TREND_ATTEMPTS - 1
        focus = None
        if judged_at is not None and not last:
            focus = canonical.probe(draft, streams, attempt, judged_at, draft.persona.focus)
            if not phenomena.trend_holds(draft, focus):
                continue
        state = canonical.generate(draft, streams, attempt, probed=focus)  # takes the probe's whole steps
        if judged_at is not None or last or phenomena.trend_holds(draft, state):
            return attempt, state
    raise AssertionError("unreachable: the last attempt is always kept")


def build_world(
    world: WorldSpec, pack: DomainPack, worlds_dir: Path, settings: DefectSettings = DefectSettings()
) -> WorldResult:
    """Build, audit, give tasks to and atomically commit one world of a build."""
    lap = _Laps()
    contract, state, observed = synthesize(world, pack, settings, lap)
    streams = Streams(world.seed, world.index)
    final, tmp = worlds_dir / world.world_id, worlds_dir / f".tmp-{world.world_id}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        entry = write_world(tmp, contract, state, observed, streams, settings)
        lap("write")
        # The independent auditor reads the finished files, nothing in memory. The world is a temporary
        # directory until its rename, like every file in it unsynced: syncing audit.json alone (a wait on the
        # disk, 3 ms a world, 50 ms at worst here) would make nothing durable.
        report = audit_world(tmp, durable=False)
        entry["status"] = report.verdict
        lap("audit")
        tasks = build_tasks(contract, report, streams.rng("tasks"))
        write_tasks(tasks, tmp / "tasks")
        entry["tasks"] = len(tasks)
        record_verdict(tmp / "world.json", report, [t.task_id for t in tasks])
        lap("tasks")
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    entry["path"] = f"worlds/{world.world_id}"
    return WorldResult(world.world_id, world.index, final, entry, lap.timings)


def regenerate(
    contract: Contract, settings: DefectSettings = DefectSettings()
) -> tuple[canonical.CanonicalState, list[ObservedFile]]:
    """X and E of a world from its sealed contract alone (and the defect settings its projection records)."""
    streams = Streams(contract.seed, contract.index)
    state = canonical.generate(contract, streams, contract.attempt)
    return state, observe.project(contract, state, streams.rng("defects"), settings)

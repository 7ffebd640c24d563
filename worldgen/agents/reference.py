"""The reference agent: the oracle analysis, performed as code actions in the sandbox.

It knows what the task's author knows (the contract's data dictionary and DAG, with every planted value
removed), sends cells that clean the observed files and estimate every phenomenon with the auditor's
estimators inside the sandbox, reads the printed estimates, and answers the way `worldgen/tasks.py` builds
a task's reference answer: by running `build_tasks` on the estimates it computed (every finite estimate
counts as found) and taking the matching task's reference answer. Needs the world directory (for the
contract), so it plays tasks of worlds, not bare task files.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from contracts.model import Contract
from rubrics.model import Task
from worldgen.agents.base import AgentError, final_json
from worldgen.agents.cells import LIST_CELL, world_cell
from worldgen.episode import Episode

ESTIMATE_CELL = """from auditors.estimate import recover_phenomena

found = recover_phenomena(data, contract)
values = {k: (round(v, 6) if math.isfinite(v) else None) for k, v in found.values.items()}
print(json.dumps({"values": values, "directions": found.directions}))
"""


class ReferenceAgent:
    name = "reference"
    library = ("auditors", "contracts")

    def play(self, episode: Episode, intro: str) -> dict[str, Any]:
        world = episode.ref.world_dir
        if world is None or not (world / "contract.json").is_file():
            raise AgentError(f"{episode.task.task_id}: the reference agent needs the task's world directory")
        raw = json.loads((world / "contract.json").read_text())
        estimates, failure = None, ""
        for cell in (
            LIST_CELL,
            world_cell(raw, clean=True, question=(episode.task.kind, episode.task.variable)),
            ESTIMATE_CELL,
        ):
            result = episode.step(f"<python>{cell}</python>").info.get("result", {})
            if result.get("exception"):
                failure = result.get("stderr", "")[-300:]
                break
            estimates = final_json(result.get("stdout", ""))
        if failure or estimates is None:
            episode.step("<answer>{}</answer>")
            return {"tokens": {"input": 0, "output": 0}, "note": f"analysis failed in the sandbox: {failure}"}
        answer = reference_answer(Contract.model_validate(raw), episode.task, estimates)
        episode.step(f"<answer>{json.dumps(answer)}</answer>")
        return {"tokens": {"input": 0, "output": 0}}


def reference_answer(contract: Contract, task: Task, estimates: dict[str, Any]) -> dict[str, Any]:
    """The answer tasks.py would build from these estimates (as if the audit had found exactly them)."""
    from contracts.audit import AuditReport, CheckResult, Estimate
    from worldgen.tasks import build_tasks

    values = estimates.get("values", {})
    finite = {k: v for k, v in values.items() if isinstance(v, int | float) and math.isfinite(v)}
    rows = [
        Estimate(id=ph.id, target=None, estimate=finite.get(ph.id), tolerance=ph.tolerance, within=ph.id in finite)
        for ph in contract.phenomena
    ]
    directions = {k: float(v) for k, v in estimates.get("directions", {}).items()}
    audit = AuditReport(
        world_id=contract.world_id,
        verdict="pass",
        failing=[],
        checks=[
            CheckResult(name="recoverability", status="pass", reason="", estimates=rows, directions=directions),
            CheckResult(name="non_triviality", status="pass", reason=""),
        ],
    )
    # The generator only picks a prompt template; the answer does not depend on it.
    for built in build_tasks(contract, audit, np.random.default_rng(0)):
        if built.kind == task.kind and built.variable == task.variable:
            return built.reference_answer
    return {}

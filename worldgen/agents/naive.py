"""The naive agent: one-shot correlation on the raw files (the lower bound), acting through the sandbox.

It runs `rubrics.baselines.naive_answers` inside the sandbox on a world built from data/ with the same data
dictionary as the reference agent but no cleaning: no de-duplication, no unit repair, no merged columns;
drivers and effects are the variables that correlate most with the question's variable.
"""

from __future__ import annotations

import json
from typing import Any

from worldgen.agents.base import AgentError, final_json
from worldgen.agents.cells import world_cell
from worldgen.episode import Episode

NAIVE_CELL = """import types
import rubrics.baselines as baselines

baselines.load_world = lambda _path: world  # the baseline, on the world built from data/ above
question = types.SimpleNamespace(task_id="task", variable={variable!r}, kind={kind!r})
print(json.dumps(baselines.naive_answers(None, [question])["task"], default=float))
"""


class NaiveAgent:
    name = "naive"
    library = ("auditors", "contracts", "rubrics")

    def play(self, episode: Episode, intro: str) -> dict[str, Any]:
        world = episode.ref.world_dir
        if world is None or not (world / "contract.json").is_file():
            raise AgentError(f"{episode.task.task_id}: the naive agent needs the task's world directory")
        raw = json.loads((world / "contract.json").read_text())
        episode.step(f"<python>{world_cell(raw, clean=False)}</python>")
        cell = NAIVE_CELL.format(variable=episode.task.variable, kind=episode.task.kind)
        turn = episode.step(f"<python>{cell}</python>")
        answer = final_json(turn.info.get("result", {}).get("stdout", "")) or {}
        episode.step(f"<answer>{json.dumps(answer)}</answer>")
        return {"tokens": {"input": 0, "output": 0}}

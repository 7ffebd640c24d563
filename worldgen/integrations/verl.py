"""verl tool (0.9 shape): Python cells in a sandbox session that lives as long as its trajectory.

verl 0.9 creates and releases a tool instance around every single call, so the session cannot live in the
instance: sessions are kept per trajectory, keyed on the request id verl passes (`agent_data.request_id`,
else `create_kwargs["trajectory_id"]`), and closed when the trajectory answers, when `close_trajectory`
is called, or when more than `max_sessions` are live (the least recently used goes first).

Tool config (YAML `config:`) may set `max_steps`, `time_budget_s`, `step_timeout_s`, `memory_mb`,
`isolation`, `max_sessions`. Row: `extra_info.tools_kwargs.<tool name>.create_kwargs.task_path`. Parameters:
`{"code": "..."}` runs a cell; `{"answer": {...}}` submits the final answer, whose rules-judge score is the
step reward (and `calc_reward`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldgen.episode import Episode
from worldgen.integrations.skyrl import episode_config
from worldgen.tasksource import TaskSourceError, task_ref

SCHEMA = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python in a persistent session over the task's files (data/, scratch/); or submit "
        "the final answer with `answer` instead of `code`.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python code to run"},
                "answer": {"type": "object", "description": "the final answer (ends the task)"},
            },
            "required": [],
        },
    },
}


@dataclass
class ToolResponse:
    """Stand-in for verl.tools.schemas.ToolResponse when verl is not installed."""

    text: str | None = None
    image: list | None = None
    video: list | None = None


def _response(text: str) -> Any:
    try:
        from verl.tools.schemas import ToolResponse as VerlResponse

        return VerlResponse(text=text)
    except ImportError:
        return ToolResponse(text=text)


class DataWorldTool:
    """Duck-typed verl BaseTool. One Episode per trajectory, shared by the per-call instances."""

    def __init__(self, config: dict[str, Any] | None = None, tool_schema: Any = None):
        self.config = dict(config or {})
        self.tool_schema = tool_schema or SCHEMA
        self.name = _name(self.tool_schema)
        self.max_sessions = int(self.config.get("max_sessions", 64))
        self.episodes: OrderedDict[str, Episode] = OrderedDict()
        self.instances: dict[str, tuple[str, dict[str, Any]]] = {}  # instance id -> (trajectory, create_kwargs)
        self.scores: OrderedDict[str, float] = OrderedDict()  # final scores of closed trajectories (bounded)
        self.lock = threading.Lock()

    def get_openai_tool_schema(self) -> Any:
        return self.tool_schema

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or uuid.uuid4().hex
        create_kwargs = dict(kwargs.get("create_kwargs") or {})
        trajectory = str(create_kwargs.get("trajectory_id") or instance_id)
        self.instances[instance_id] = (trajectory, create_kwargs)
        return instance_id, _response("")

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        trajectory, create_kwargs = self.instances.get(instance_id, (instance_id, {}))
        agent_data = kwargs.get("agent_data")
        trajectory = str(getattr(agent_data, "request_id", None) or trajectory)
        self.instances[instance_id] = (trajectory, create_kwargs)
        episode = await asyncio.to_thread(self._episode, trajectory, create_kwargs)
        if "answer" in parameters:
            answer = parameters["answer"]
            turn = await asyncio.to_thread(
                episode.submit, answer, f"<answer>{json.dumps(answer, default=str)}</answer>"
            )
        else:
            code = str(parameters.get("code", ""))
            turn = await asyncio.to_thread(episode.run_code, code, f"<python>{code}</python>")
        metrics = {"step": episode.steps, "done": episode.done, "trajectory": trajectory}
        reward = float(turn.reward)
        if episode.done:
            metrics["score"] = episode.reward
        return _response(turn.observation), reward, metrics

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        trajectory = self.instances.get(instance_id, (instance_id, {}))[0]
        episode = self.episodes.get(trajectory)
        return float(episode.reward) if episode is not None else self.scores.get(trajectory, 0.0)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the per-call instance; the trajectory's session lives on until it answers or is closed."""
        trajectory = self.instances.pop(instance_id, (instance_id, {}))[0]
        episode = self.episodes.get(trajectory)
        if episode is not None and episode.done:
            await asyncio.to_thread(self.close_trajectory, trajectory)

    def close_trajectory(self, trajectory: str) -> None:
        with self.lock:
            episode = self.episodes.pop(trajectory, None)
            if episode is not None:
                self.scores[trajectory] = float(episode.reward)
                while len(self.scores) > 16 * self.max_sessions:
                    self.scores.popitem(last=False)
        if episode is not None:
            episode.close()

    def close(self) -> None:
        for trajectory in list(self.episodes):
            self.close_trajectory(trajectory)

    def _episode(self, trajectory: str, create_kwargs: dict[str, Any]) -> Episode:
        with self.lock:
            episode = self.episodes.get(trajectory)
            if episode is not None:
                self.episodes.move_to_end(trajectory)
                return episode
        path = create_kwargs.get("task_path")
        if not path:
            raise TaskSourceError("the tool needs create_kwargs.task_path (a tasks/<task_id>.json file)")
        episode = Episode(task_ref(Path(path)), episode_config(self.config))
        episode.start()
        evicted = []
        with self.lock:
            self.episodes[trajectory] = episode
            while len(self.episodes) > self.max_sessions:
                evicted.append(self.episodes.popitem(last=False)[1])
        for old in evicted:
            old.close()
        return episode


def _name(schema: Any) -> str:
    if isinstance(schema, dict):
        return schema["function"]["name"]
    return schema.function.name

"""SkyRL text environment (skyrl-gym 0.4 shape): one sandboxed Episode per instance.

Register it in SkyRL with `skyrl_gym.envs.register(id="worldgen", entry_point="worldgen.integrations.skyrl:DataWorldTextEnv")`
and set a row's `env_class` to that id. The row must say where its task is: `extra_info.task_path` (or a
top-level `task_path` column), a tasks/<task_id>.json inside its world directory. `env_config` may set
`max_steps`, `time_budget_s`, `step_timeout_s`, `memory_mb` and `isolation`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worldgen.episode import Episode, EpisodeConfig
from worldgen.sandbox import Limits
from worldgen.tasksource import TaskSourceError, task_ref


def episode_config(config: dict[str, Any] | None) -> EpisodeConfig:
    config = dict(config or {})
    limits = Limits(
        step_timeout_s=float(config.get("step_timeout_s", Limits.step_timeout_s)),
        memory_mb=int(config.get("memory_mb", Limits.memory_mb)),
    )
    return EpisodeConfig(
        max_steps=int(config.get("max_steps", 20)),
        time_budget_s=float(config.get("time_budget_s", 1800.0)),
        limits=limits,
        isolation=str(config.get("isolation", "auto")),
        record_state=bool(config.get("record_state", False)),
    )


def task_path_of(extras: dict[str, Any] | None) -> Path:
    extras = extras or {}
    info = extras.get("extra_info") or {}
    path = info.get("task_path") or extras.get("task_path")
    if not path:
        raise TaskSourceError("the row names no task: set extra_info.task_path to a tasks/<task_id>.json file")
    return Path(path)


class DataWorldTextEnv:
    """`init(prompt) -> (messages, info)`, `step(action) -> {"observations", "reward", "done", "metadata"}`."""

    def __init__(self, env_config: dict[str, Any] | None = None, extras: dict[str, Any] | None = None):
        self.episode = Episode(task_ref(task_path_of(extras)), episode_config(env_config))
        self.max_turns = self.episode.config.max_steps

    def init(self, prompt: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Open the session. A row's own prompt is kept; an empty one is replaced by the env's first observation."""
        intro = self.episode.start()
        messages = list(prompt) if prompt else [{"role": "user", "content": intro}]
        return messages, {"task_id": self.episode.task.task_id}

    def step(self, action: str) -> dict[str, Any]:
        turn = self.episode.step(action)
        done = turn.terminated or turn.truncated
        return {
            "observations": [] if done else [{"role": "user", "content": turn.observation}],
            "reward": float(turn.reward),
            "done": done,
            "metadata": {k: v for k, v in turn.info.items() if k != "result"},
        }

    def close(self) -> None:
        self.episode.close()

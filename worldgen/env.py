"""Gymnasium interface: `worldgen/DataAnalysis-v0`, a text environment over one sandboxed episode per reset.

    import gymnasium as gym, worldgen.env
    env = gym.make("worldgen/DataAnalysis-v0", tasks="output/")      # a build, a world or a task file
    obs, info = env.reset(seed=0)                                     # prompt, files, answer schema
    obs, reward, terminated, truncated, info = env.step("<python>print(1)</python>")

Observations and actions are strings over `CHARSET` (printable ASCII, Latin-1, box drawing and common
punctuation and math signs: what tracebacks and polars/pandas tables print); any other character is shown
as '?', and observations longer than `MAX_OBSERVATION` keep their head and tail. Without `options["task"]`,
reset draws a task from `tasks` with the env's seeded generator, so `reset(seed=s)` is reproducible.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from rubrics.model import Task
from worldgen.episode import Episode, EpisodeConfig
from worldgen.sandbox import Limits
from worldgen.tasksource import TaskRef, TaskSourceError, find_tasks, task_ref

ENV_ID = "worldgen/DataAnalysis-v0"
MAX_OBSERVATION = 100_000
MAX_ACTION = 50_000
CHARSET = "".join(
    sorted(
        set("\n\t")
        | {chr(c) for c in range(32, 127)}
        | {chr(c) for c in range(0xA0, 0x100)}
        | {chr(c) for c in range(0x2010, 0x2060)}
        | {chr(c) for c in range(0x2190, 0x2200)}
        | {chr(c) for c in range(0x2200, 0x2300)}
        | {chr(c) for c in range(0x2500, 0x2580)}
        | {"\u20ac", "\u2122"}
    )
)
_ALLOWED = frozenset(CHARSET)


def sanitise(text: str, limit: int = MAX_OBSERVATION) -> str:
    """Map characters outside CHARSET to '?' and keep at most `limit` characters (head and tail)."""
    clean = "".join(ch if ch in _ALLOWED else "?" for ch in text)
    if len(clean) <= limit:
        return clean
    marker = "\n...[truncated]...\n"
    half = (limit - len(marker)) // 2
    return clean[:half] + marker + clean[len(clean) - half :]


class DataWorldEnv(gym.Env):
    """A data-analysis task in a sandbox: text actions in, text observations and the rubric's score out.

    Args:
        tasks: where reset draws tasks from when `options` names none: a build, world or task path, or TaskRefs.
        max_steps, time_budget_s: episode budgets; exhausting either truncates with reward 0.
        limits, isolation: the sandbox's resource limits and isolation mode (see worldgen.sandbox.Session).
        record_state: keep per-step state snapshots in `env.unwrapped.episode.records`.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 1}

    # size: gymnasium.make passes an environment's options as keyword arguments; each is one budget or limit
    def __init__(
        self,
        tasks: str | Path | list[TaskRef] | None = None,
        max_steps: int = 20,
        time_budget_s: float = 1800.0,
        limits: Limits | None = None,
        isolation: str = "auto",
        record_state: bool = False,
        render_mode: str | None = None,
    ):
        if render_mode not in (None, "ansi"):
            raise ValueError(f"unsupported render_mode {render_mode!r}; use 'ansi' or None")
        self.render_mode = render_mode
        self.refs = find_tasks(Path(tasks)) if isinstance(tasks, str | Path) else list(tasks or [])
        self.config = EpisodeConfig(
            max_steps=max_steps,
            time_budget_s=time_budget_s,
            limits=limits or Limits(),
            isolation=isolation,
            record_state=record_state,
        )
        self.observation_space = spaces.Text(max_length=MAX_OBSERVATION, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(max_length=MAX_ACTION, min_length=0, charset=CHARSET)
        self.episode: Episode | None = None
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        ref = self._choose((options or {}).get("task"), options or {})
        if self.episode is not None:
            self.episode.close()
        self.episode = Episode(ref, self.config)
        self._last = sanitise(self.episode.start())
        info = {
            "task_id": ref.task.task_id,
            "world_id": ref.task.world_id,
            "kind": ref.task.kind,
            "isolated": bool(self.episode.session and self.episode.session.isolated),
        }
        return self._last, info

    def _choose(self, task: Any, options: dict[str, Any]) -> TaskRef:
        if isinstance(task, TaskRef):
            return task
        if isinstance(task, str | Path):
            return task_ref(Path(task))
        if isinstance(task, Task):
            data = options.get("data")
            if data is None:
                raise TaskSourceError("options['task'] is a Task: also give options['data'], its observed/ directory")
            return TaskRef(task=task, data_dir=Path(data), world_dir=None)
        if task is not None:
            raise TaskSourceError(f"options['task'] must be a path, a Task or a TaskRef, not {type(task).__name__}")
        if not self.refs:
            raise TaskSourceError("no task: pass tasks=PATH to the env or options={'task': ...} to reset")
        return self.refs[int(self.np_random.integers(len(self.refs)))]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self.episode is None:
            raise RuntimeError("call reset() before step()")
        turn = self.episode.step(action if isinstance(action, str) else str(action))
        self._last = sanitise(turn.observation)
        return self._last, float(turn.reward), turn.terminated, turn.truncated, turn.info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        if self.episode is not None:
            self.episode.close()
            self.episode = None
        super().close()


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="worldgen.env:DataWorldEnv")

"""One task played in one sandbox session: the environment logic every interface shares.

The agent sees the task's prompt, the data files (names and sizes) and the answer's JSON Schema; it acts
with a code cell `<python>...</python>` (run in the session; the output comes back in
`<information>...</information>`) or a final answer `<answer>{json}</answer>`, which ends the episode with
the rules judge's score as the reward. Running out of steps or time truncates the episode with reward 0.
Observations never carry the rubric, the expected or reference answers, the task's `files` list or any
path of the world directory. Every step is recorded with the session state before and after it.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from rubrics.grade import grade_rules
from worldgen.sandbox import Limits, Session
from worldgen.tasksource import TaskRef

ACTION = re.compile(r"<(python|answer)>(.*?)(?:</\1>|\Z)", re.DOTALL)
FENCE = re.compile(r"^\s*```(?:python|json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)
PROTOCOL = """Work in the Python session, one action per turn:
- <python>code</python> runs code in a persistent Python session (pandas, polars, pyarrow, openpyxl, numpy and \
duckdb are installed; variables persist between turns; the working directory holds data/ and scratch/). \
Its output comes back in <information>...</information>.
- <answer>{{JSON}}</answer> ends the task with your final answer, a JSON object that follows this JSON Schema:
{schema}
You have at most {max_steps} turns."""


@dataclass
class EpisodeConfig:
    """Budgets, limits and what to record."""

    max_steps: int = 20
    time_budget_s: float = 1800.0
    limits: Limits = field(default_factory=Limits)
    isolation: str = "auto"
    library: tuple[str, ...] = ()
    record_state: bool = True


@dataclass
class Turn:
    """The result of one action, as every interface needs it."""

    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def parse_action(text: str) -> tuple[str, str]:
    """('python', code), ('answer', json text) or ('invalid', text): the first tag wins."""
    match = ACTION.search(text or "")
    if match is None:
        return "invalid", text or ""
    body = match.group(2)
    fenced = FENCE.match(body)
    return match.group(1), (fenced.group(1) if fenced else body)


class Episode:
    """A task, a fresh session over its data, and the record of every step."""

    def __init__(self, ref: TaskRef, config: EpisodeConfig | None = None):
        self.ref = ref
        self.task = ref.task
        self.config = config or EpisodeConfig()
        self.session: Session | None = None
        self.steps = 0
        self.done = False
        self.reward = 0.0
        self.answer: dict[str, Any] | None = None
        self.grade: dict[str, Any] | None = None
        self.end_reason: str | None = None
        self.records: list[dict[str, Any]] = []
        self._state: dict[str, Any] | None = None
        self._started = 0.0

    # --- lifecycle ----------------------------------------------------------------------------------------

    def start(self) -> str:
        """Open the session and return the first observation: prompt, files, protocol and answer schema."""
        self.close()
        self.session = Session(
            self.ref.data_dir, self.config.limits, isolation=self.config.isolation, library=self.config.library
        )
        self._started = time.monotonic()
        self._state = self.session.state() if self.config.record_state else None
        return self.intro()

    def intro(self) -> str:
        assert self.session is not None
        listing = "\n".join(f"- {f['path']} ({f['bytes']:,} bytes)" for f in self.session.files())
        protocol = PROTOCOL.format(
            schema=json.dumps(self.task.answer_schema, indent=1), max_steps=self.config.max_steps
        )
        return (
            f"{self.task.prompt}\n\nFiles (read-only, in data/; write anything you create to scratch/):\n"
            f"{listing}\n\n{protocol}"
        )

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started if self._started else 0.0

    # --- acting -------------------------------------------------------------------------------------------

    def step(self, text: str) -> Turn:
        """Apply one action written as text (the protocol of the text environments)."""
        kind, body = parse_action(text)
        if kind == "python":
            return self.run_code(body, raw=text)
        if kind == "answer":
            return self.submit(body, raw=text)
        return self._count(
            {"type": "invalid", "text": text},
            "<information>\nNo action found. Reply with <python>code</python> to run code, or "
            "<answer>{...}</answer> to give your final answer.\n</information>",
            {},
        )

    def run_code(self, code: str, raw: str | None = None) -> Turn:
        """Run a cell; its output (or error) is the observation."""
        if self.done:
            return Turn("<information>\nThe episode is over.\n</information>", terminated=True)
        assert self.session is not None, "call start() first"
        timeout = max(1.0, min(self.config.limits.step_timeout_s, self.config.time_budget_s - self.elapsed))
        result = self.session.run(code, timeout=timeout)
        action = {"type": "code", "text": raw if raw is not None else code, "code": code}
        return self._count(action, format_result(result), result.to_dict())

    def submit(self, answer: str | dict, raw: str | None = None) -> Turn:
        """A final answer (JSON text or an object): grade it with the rules judge and end the episode."""
        if self.done:
            return Turn("<information>\nThe episode is over.\n</information>", terminated=True)
        parsed, error = _as_object(answer)
        self.answer = parsed
        self.grade = grade_rules(self.task, parsed if parsed is not None else {})
        self.reward = float(self.grade["score"])
        self.done, self.end_reason = True, "answer"
        note = f"Answer received. {error}" if error else "Answer received."
        info = {"answer_error": error} if error else {}
        action = {"type": "answer", "text": raw if raw is not None else json.dumps(answer), "answer": parsed}
        return self._count(action, note, info, reward=self.reward)

    def _count(self, action: dict[str, Any], observation: str, details: dict[str, Any], reward: float = 0.0) -> Turn:
        kind = action["type"]
        self.steps += 1
        before = self._state
        after = self._snapshot() if kind == "code" else before
        record = {
            "step": self.steps,
            "state_before": before,
            "action": action,
            "observation": {"text": observation, **details},
            "state_after": after,
            "reward": reward,
        }
        self.records.append(record)
        self._state = after
        truncated = False
        if not self.done and (self.steps >= self.config.max_steps or self.elapsed >= self.config.time_budget_s):
            truncated = True
            self.done = True
            self.end_reason = "max_steps" if self.steps >= self.config.max_steps else "time_budget"
            observation += f"\n(The episode ended: {self.end_reason.replace('_', ' ')} reached without an answer.)"
        info = {"step": self.steps, "action_type": kind, **({"end_reason": self.end_reason} if self.done else {})}
        if kind == "code":
            info["result"] = details
        return Turn(observation, reward, terminated=kind == "answer", truncated=truncated, info=info)

    def _snapshot(self) -> dict[str, Any] | None:
        if not self.config.record_state or self.session is None:
            return None
        return self.session.state()

    def summary(self) -> dict[str, Any]:
        """What result.json holds about the episode (the grade's items included: harness only)."""
        return {
            "task_id": self.task.task_id,
            "world_id": self.task.world_id,
            "domain": self.ref.domain,
            "kind": self.task.kind,
            "score": self.reward,
            "items": (self.grade or {}).get("items", []),
            "schema_problems": (self.grade or {}).get("schema_problems", []),
            "steps": self.steps,
            "end_reason": self.end_reason,
            "answer": self.answer,
            "isolated": bool(self.session.isolated) if self.session else None,
            "restarts": self.session.restarts if self.session else 0,
        }


def format_result(result) -> str:
    """A cell's result as the agent reads it: deterministic text (timings stay in the record)."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append(result.stderr.rstrip("\n"))
    if not parts:
        parts.append("(no output)" if result.exception is None else f"{result.exception}")
    return "<information>\n" + "\n".join(parts) + "\n</information>"


def _as_object(answer: str | dict) -> tuple[dict | None, str | None]:
    if isinstance(answer, dict):
        return answer, None
    try:
        parsed = json.loads(answer)
    except ValueError as exc:
        return None, f"It is not valid JSON ({exc.msg} at position {exc.pos}), so it scores 0."
    if not isinstance(parsed, dict):
        return None, f"It must be a JSON object, not {type(parsed).__name__}, so it scores 0."
    return parsed, None

"""`worldgen run`: play every task under a path with one agent, one sandboxed episode each, resumably.

RUNS/<task_id>/trajectory.jsonl holds a header (the agent, the first observation, budgets) and one record per
step (state before, action, observation, state after); RUNS/<task_id>/result.json holds the score, the
graded items, steps, tokens and wall time. Both are written to a temporary name and renamed, result.json
last, so an episode counts as finished only when complete. A re-run skips finished episodes and retries
those that errored; an error in one episode (an agent crash, an API failure) is recorded and never stops
the others. RUNS/run.json pins the agent and budgets: a different agent or budget needs another RUNS.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contracts.errors import WorldgenError
from worldgen.agents import make_agent
from worldgen.episode import Episode, EpisodeConfig
from worldgen.sandbox import Limits, Session
from worldgen.tasksource import TaskRef, find_tasks

RESULT_SCHEMA_VERSION = "1.0"


class RunError(WorldgenError):
    """A runs directory that cannot be used."""


@dataclass
class RunConfig:
    agent: str
    tasks: Path | list[TaskRef]  # a build, world or task path, or the TaskRefs themselves
    out: Path
    workers: int = 1
    max_steps: int = 20
    time_budget_s: float = 1800.0
    limits: Limits = field(default_factory=Limits)
    isolation: str = "auto"
    record_state: bool = True
    agent_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    ran: int = 0
    skipped: int = 0
    errors: int = 0
    scores: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None


def run_agent(config: RunConfig, on_episode: Callable[[dict], None] | None = None) -> RunSummary:
    """Play every task under config.tasks; returns counts and the scores of the episodes played now."""
    if config.workers < 1:
        raise RunError(f"--workers must be >= 1, got {config.workers}")
    if config.max_steps < 1:
        raise RunError(f"--max-steps must be >= 1, got {config.max_steps}")
    refs = find_tasks(config.tasks) if isinstance(config.tasks, str | Path) else list(config.tasks)
    make_agent(config.agent, **config.agent_options)  # fail fast: unknown agent, missing key or package
    Session(None, config.limits, isolation=config.isolation).close()  # fail fast: a sandbox that cannot start
    _pin(config)
    cores = os.cpu_count() or 1
    threads = config.limits.threads or max(1, cores // config.workers)
    limits = Limits(**{**config.limits.__dict__, "threads": threads})
    summary, lock = RunSummary(), threading.Lock()

    def one(ref: TaskRef) -> None:
        folder = config.out / _safe(ref.task_id)
        if _finished(folder):
            with lock:
                summary.skipped += 1
            return
        result = play_episode(ref, config, limits, folder)
        with lock:
            summary.ran += 1
            if result["status"] == "done":
                summary.scores.append(result["score"])
            else:
                summary.errors += 1
        if on_episode is not None:
            on_episode(result)

    with ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="episode") as pool:
        for future in [pool.submit(one, ref) for ref in refs]:
            future.result()
    return summary


def play_episode(ref: TaskRef, config: RunConfig, limits: Limits, folder: Path) -> dict[str, Any]:
    """One episode, start to finish; every failure becomes an 'error' result instead of an exception."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    episode, usage, status, error, intro, isolated = None, {}, "done", None, "", None
    try:
        agent = make_agent(config.agent, **config.agent_options)
        episode = Episode(
            ref,
            EpisodeConfig(
                max_steps=config.max_steps,
                time_budget_s=config.time_budget_s,
                limits=limits,
                isolation=config.isolation,
                library=agent.library,
                record_state=config.record_state,
            ),
        )
        intro = episode.start()
        isolated = episode.session.isolated if episode.session else None
        usage = agent.play(episode, intro) or {}
        if not episode.done:
            episode.end_reason = "agent_stopped"
    except Exception as exc:  # noqa: BLE001 - one broken episode must never stop the others
        status, error = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
        usage = {"traceback": traceback.format_exc(limit=6)[-2000:]}
    finally:
        if episode is not None:
            episode.close()
    summary = episode.summary() if episode is not None else {"task_id": ref.task_id, "score": 0.0, "steps": 0}
    result = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "agent": config.agent,
        "status": status,
        "error": error,
        **summary,
        "domain": ref.domain,
        "kind": ref.task.kind,
        "isolated": isolated,
        "tokens": usage.get("tokens", {"input": 0, "output": 0}),
        "wall_seconds": round(time.perf_counter() - started, 3),
    }
    for key in ("model", "note", "traceback"):
        if key in usage:
            result[key] = usage[key]
    header = {
        "type": "episode",
        "schema_version": RESULT_SCHEMA_VERSION,
        "task_id": ref.task_id,
        "world_id": ref.task.world_id,
        "agent": config.agent,
        "observation": intro,
        "max_steps": config.max_steps,
        "time_budget_s": config.time_budget_s,
    }
    records = episode.records if episode is not None else []
    lines = [header] + [{"type": "step", **r} for r in records]
    _write_atomic(folder / "trajectory.jsonl", "".join(json.dumps(x, default=str) + "\n" for x in lines))
    _write_atomic(folder / "result.json", json.dumps(result, indent=1, default=str) + "\n")
    return result


def _finished(folder: Path) -> bool:
    try:
        return json.loads((folder / "result.json").read_text()).get("status") == "done"
    except (OSError, ValueError, AttributeError):
        return False


def _pin(config: RunConfig) -> None:
    """RUNS/run.json records the settings; a run with other settings into the same RUNS is refused."""
    settings = {
        "agent": config.agent,
        "max_steps": config.max_steps,
        "model": config.agent_options.get("model"),
    }
    path = config.out / "run.json"
    try:
        config.out.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            pinned = json.loads(path.read_text())
            changed = [k for k in settings if pinned.get(k) != settings[k]]
            if changed:
                raise RunError(
                    f"{config.out} holds runs with other settings ({', '.join(f'{k}={pinned.get(k)!r}' for k in changed)}); "
                    "use another --out"
                )
            return
        _write_atomic(path, json.dumps(settings, indent=1) + "\n")
    except OSError as exc:
        raise RunError(f"{config.out}: cannot write runs ({exc.strerror or exc})") from None
    except ValueError:
        raise RunError(f"{path}: unreadable run.json") from None


def _safe(task_id: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in task_id)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)

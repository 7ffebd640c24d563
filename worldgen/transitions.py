"""`worldgen export transitions`: agent runs as training records for world models.

Formats (one JSON object per line in DIR/<format>.jsonl; schemas in contracts/):
- `dsworld`: one (S_t, A_t, S_t+1) triple per code action, with the observation O_t it produced
  (contracts/transition_dsworld.schema.json).
- `mle-world`: one record per episode: task context, the whole program, its full terminal output and the
  final score (contracts/transition_mleworld.schema.json).
- `jsonl`: the raw step records, each with its episode's ids.
Only finished episodes (result.json status "done") are exported, in task-id order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contracts.errors import WorldgenError

FORMATS = ("dsworld", "mle-world", "jsonl")
SCHEMA_VERSION = "1.0"
SCHEMAS = {
    "dsworld": "transition_dsworld.schema.json",
    "mle-world": "transition_mleworld.schema.json",
}
NOT_RECORDED = {"variables": [], "files": [], "error": "state not recorded"}
OBSERVATION_KEYS = ("stdout", "stderr", "exception", "duration_s", "peak_memory_mb", "timed_out", "restarted")


class ExportError(WorldgenError):
    """Runs that cannot be exported."""


def schema(fmt: str) -> dict[str, Any]:
    """The JSON Schema of a format's records."""
    from importlib.resources import files

    return json.loads(files("contracts").joinpath(SCHEMAS[fmt]).read_text(encoding="utf-8"))


def episodes(runs: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]]:
    """(result, header, steps) of every finished episode under RUNS."""
    if not runs.is_dir():
        raise ExportError(f"{runs}: no such runs directory")
    folders = sorted(p for p in runs.iterdir() if (p / "result.json").is_file())
    if not folders:
        raise ExportError(f"{runs}: no episodes (no */result.json); run `worldgen run` first")
    for folder in folders:
        try:
            result = json.loads((folder / "result.json").read_text())
            lines = [json.loads(x) for x in (folder / "trajectory.jsonl").read_text().splitlines() if x.strip()]
        except (OSError, ValueError) as exc:
            raise ExportError(f"{folder}: unreadable episode ({exc})") from None
        if result.get("status") != "done" or not lines or lines[0].get("type") != "episode":
            continue
        yield result, lines[0], [x for x in lines[1:] if x.get("type") == "step"]


def dsworld(result: dict, header: dict, steps: list[dict]) -> Iterator[dict[str, Any]]:
    for step in steps:
        action = step["action"]
        if action.get("type") != "code":
            continue
        observation = step["observation"]
        yield {
            "schema_version": SCHEMA_VERSION,
            "format": "dsworld",
            "task_id": header["task_id"],
            "world_id": header["world_id"],
            "agent": header["agent"],
            "t": step["step"],
            "s_t": step.get("state_before") or NOT_RECORDED,
            "a_t": {"type": "code", "code": action.get("code", "")},
            "o_t": {k: observation.get(k) for k in OBSERVATION_KEYS},
            "s_t1": step.get("state_after") or NOT_RECORDED,
        }


def mle_world(result: dict, header: dict, steps: list[dict]) -> Iterator[dict[str, Any]]:
    program, output, n = [], [], 0
    for step in steps:
        if step["action"].get("type") != "code":
            continue
        n += 1
        program.append(f"# %% [cell {n}]\n{step['action'].get('code', '')}")
        observation = step["observation"]
        text = (observation.get("stdout") or "") + (observation.get("stderr") or "")
        output.append(f"# %% [cell {n}]\n{text}")
    yield {
        "schema_version": SCHEMA_VERSION,
        "format": "mle-world",
        "task_id": header["task_id"],
        "world_id": header["world_id"],
        "agent": header["agent"],
        "context": header.get("observation", ""),
        "program": "\n\n".join(program),
        "terminal_output": "\n".join(output),
        "score": float(result.get("score", 0.0)),
        "steps": int(result.get("steps", len(steps))),
        "end_reason": result.get("end_reason"),
    }


def raw(result: dict, header: dict, steps: list[dict]) -> Iterator[dict[str, Any]]:
    for step in steps:
        yield {"task_id": header["task_id"], "world_id": header["world_id"], "agent": header["agent"], **step}


WRITERS = {"dsworld": dsworld, "mle-world": mle_world, "jsonl": raw}


def export_transitions(runs: Path, out: Path, fmt: str) -> tuple[Path, int]:
    """Write DIR/<fmt>.jsonl; returns the file and the number of records."""
    if fmt not in WRITERS:
        raise ExportError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")
    records = [r for episode in episodes(runs) for r in WRITERS[fmt](*episode)]
    try:
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{fmt}.jsonl"
        tmp = out / f".{fmt}.jsonl.tmp-{os.getpid()}"
        tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in records), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise ExportError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return path, len(records)

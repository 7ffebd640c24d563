"""Reading one world directory for its card: the files on disk only, through the auditor's safe readers.

`read_world(path)` refuses what `worldgen audit` refuses (links out of the world, FIFOs, oversized files, a
contract that is not valid) with a one-line WorldgenError; a world not yet audited, or without tasks, still
gets a card that says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from pydantic import ValidationError

from auditors.worldio import MAX_META_BYTES, check_in_world, load_world
from contracts.audit import AuditReport
from contracts.errors import WorldFormatError
from contracts.model import Contract
from contracts.safeio import one_line, read_json
from rubrics.grade import load_task
from rubrics.model import Task

MAX_TASKS = 1000  # ours hold at most 2 per depth bucket (~14); more is not a world we wrote


@dataclass
class WorldFiles:
    """What a card shows, read from one world directory."""

    path: Path
    meta: dict
    contract: Contract
    projection: dict
    audit: AuditReport | None
    tasks: list[Task]
    policy_changes: dict[str, dict[int, int]] = field(default_factory=dict)


def read_world(path: Path) -> WorldFiles:
    world = load_world(path)  # lstat scan, world.json and contract.json, bounded reads
    if world.contract is None:
        raise WorldFormatError(f"{one_line(path)}: cannot draw a card of an invalid contract: {world.contract_error}")
    projection = world.projection
    if not isinstance(projection, dict) or not isinstance(projection.get("files"), list):
        raise WorldFormatError(f"{one_line(path / 'projection.json')}: not a projection record (no 'files' list)")
    return WorldFiles(
        path=path,
        meta=world.meta,
        contract=world.contract,
        projection=projection,
        audit=_audit(path),
        tasks=_tasks(path),
        policy_changes=_policy_changes(path, world.contract),
    )


def _audit(path: Path) -> AuditReport | None:
    file = check_in_world(path, path / "audit.json", MAX_META_BYTES)
    if not file.exists():
        return None
    raw = read_json(file, max_bytes=MAX_META_BYTES, what="audit report")
    try:
        return AuditReport.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"]))
        raise WorldFormatError(f"{one_line(file)}: not an audit report: {one_line(where, 80)}: {err['msg']}") from None


def _tasks(path: Path) -> list[Task]:
    folder = path / "tasks"
    if not folder.is_dir():
        return []
    files = sorted(folder.glob("*.json"))
    if len(files) > MAX_TASKS:
        raise WorldFormatError(f"{one_line(folder)}: more than {MAX_TASKS} task files; not a world's tasks")
    return [load_task(check_in_world(path, f, MAX_META_BYTES)) for f in files]


def _policy_changes(path: Path, contract: Contract) -> dict[str, dict[int, int]]:
    """Per policy variable, the days some unit's setting changes and how many units change then (from X)."""
    names = sorted(v.name for v in contract.variables if v.pattern == "policy" and v.grain == "panel")
    if not names:
        return {}
    file = check_in_world(path, path / "canonical" / "panel.parquet")
    try:
        panel = pl.read_parquet(file, columns=["unit_id", "day", *names], glob=False).sort("unit_id", "day")
    except Exception as exc:  # noqa: BLE001 - any unreadable table is one clear line
        raise WorldFormatError(f"{one_line(file)}: unreadable canonical panel ({type(exc).__name__})") from None
    out = {}
    for name in names:
        value = pl.col(name).fill_nan(None) if panel.schema[name].is_float() else pl.col(name)
        held = value.forward_fill().over("unit_id")  # a closed day reports nothing; the setting holds
        changed = panel.with_columns(held.alias(name)).filter(
            (pl.col("unit_id") == pl.col("unit_id").shift(1)) & (pl.col(name) != pl.col(name).shift(1)).fill_null(False)
        )
        counts = changed.group_by("day").len().sort("day")
        out[name] = {int(d): int(c) for d, c in counts.iter_rows()}
    return out

"""The hidden-truth scan: nothing an agent can read may hold the answer key.

Hidden: canonical/, contract.json, projection.json, ledger.jsonl, audit.json, world.json, tasks/ (rubric
items, expected and reference answers, the task's `files` list). What an agent reads: a bench task's
instruction.md and environment/, an RL row's prompt and the pool's data/.

- Data files must be byte-identical to the world's observed files and to none of its hidden files, and none
  may be a page or screenshot of `worldgen show` (a world card shows the whole answer key).
- Text an agent reads must hold no rubric criterion or item id, no phenomenon (contract) id or description,
  no hash from the ledger or world record, no record key of the contract, ledger or projection, and no
  expected number in the forms a rubric prints it (distinctive forms only: 4+ significant digits, or a
  signed percentage), and must list all of the world's files or none (never the task's own subset).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from contracts.hashing import file_sha256
from rubrics.model import Task
from worldgen.export.source import World
from worldgen.show.marker import HEAD_BYTES, is_show_output

HEX64 = re.compile(r"\b[0-9a-f]{64}\b")
# JSON keys only the hidden records use: contract, ledger, projection and audit.
RECORD_KEYS = ('"phenomena"', '"invariants"', '"parents_unchanged"', '"rows_clean"', '"spawn_key"', '"non_triviality"')


def number_texts(value: float) -> set[str]:
    """The distinctive ways a rubric or answer prints an expected number (short forms like "12" are skipped)."""
    out = {text for text in (repr(float(value)), f"{value:.4g}") if _significant(text) >= 4}
    if value != 0 and abs(value) < 10:
        out.add(f"{value:+.1%}")
    return out


def _significant(text: str) -> int:
    return sum(c.isdigit() for c in text.split("e")[0].lstrip("-+0."))


def _numbers(node) -> Iterable[float]:
    if isinstance(node, bool):
        return
    if isinstance(node, int | float):
        yield float(node)
    elif isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)


def task_needles(task_or_spec: Task | dict) -> set[str]:
    """Strings of one task's answer key: criteria, item ids, expected numbers (from checks and answers)."""
    spec = task_or_spec.model_dump(mode="json") if isinstance(task_or_spec, Task) else task_or_spec
    needles = set()
    for item in spec["rubric"]:
        needles.add(item["criterion"])
        if ":" in item["id"] or "-" in item["id"]:
            needles.add(item["id"])
        if item.get("phenomenon"):
            needles.add(item["phenomenon"])
        for key in ("expected", "unless"):
            if isinstance(item["check"].get(key), int | float):
                needles |= number_texts(item["check"][key])
    for answer in (spec.get("expected_answer"), spec.get("reference_answer")):
        for x in _numbers(answer or {}):
            needles |= number_texts(x)
    return needles


def world_needles(world: World) -> set[str]:
    """Strings of a world's generation record: phenomenon ids, descriptions and targets, hidden hashes."""
    needles = set(RECORD_KEYS)
    for ph in world.contract.get("phenomena", []):
        needles |= {ph["id"], ph.get("description") or ph["id"]}
        if isinstance(ph.get("target"), int | float):
            needles |= number_texts(ph["target"])
    recorded = world.meta.get("files", {})
    needles |= {h for name, h in recorded.items() if not name.startswith("observed/")}
    needles |= set(HEX64.findall((world.path / "ledger.jsonl").read_text(encoding="utf-8")))
    return needles


def scan_text(text: str, needles: set[str], where: str) -> list[str]:
    found = sorted(n for n in needles if n and n in text)
    return [f"{where}: holds hidden truth {n[:60]!r}" for n in found[:3]]


def scan_listing(text: str, world: World, task: Task, where: str) -> list[str]:
    """The text names all of the world's files or none of them; never just the task's subset."""
    named = {name for name in world.observed if name in text}
    if named and named != set(world.observed):
        subset = " (exactly the task's files)" if named == set(task.files) else ""
        return [f"{where}: names {len(named)} of the world's {len(world.observed)} files{subset}"]
    return []


def is_show_page(path: Path) -> bool:
    """Whether a file is a page or screenshot written by `worldgen show` (its marker in the first bytes)."""
    with path.open("rb") as f:
        return is_show_output(f.read(HEAD_BYTES))


def _show_page(path: Path, where: str) -> list[str]:
    if is_show_page(path):
        return [f"{where}/{path.name}: is a worldgen show page or screenshot (it shows the hidden truth)"]
    return []


def scan_data(files: list[Path], world: World, where: str) -> list[str]:
    """Every data file is one of the world's observed files, byte for byte, and none of its hidden files."""
    problems = []
    for path in files:
        page = _show_page(path, where)
        if page:
            problems += page
            continue
        digest = file_sha256(path)
        if digest in world.hidden_sha256:
            problems.append(f"{where}/{path.name}: is the hidden {world.hidden_sha256[digest]}")
        elif world.observed_sha256.get(path.name) != digest:
            problems.append(f"{where}/{path.name}: is not the world's observed file of that name")
    return problems


def scan_bytes(files: list[Path], needles: set[str], where: str) -> list[str]:
    """Search files for the strongest needles (criteria, ids): for a bench checked without its build."""
    strong = [n.encode() for n in sorted(needles) if len(n) >= 12]
    problems = []
    for path in files:
        problems += _show_page(path, where)
        content = path.read_bytes()
        found = next((n for n in strong if n in content), None)  # one fast substring search per needle
        if found is not None:
            problems.append(f"{where}/{path.name}: holds hidden truth {found.decode(errors='replace')[:60]!r}")
    return problems

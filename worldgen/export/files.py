"""Output directories made atomically, file copies, and the content hashes exports record.

An export is written under a temporary directory next to `--out` and renamed into place only when complete
and scanned, so `--out` never holds half an export. An `--out` that holds anything but an earlier export of
the same kind is refused; an earlier export of the same kind is replaced (swapped in by renames).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from contracts.hashing import file_sha256
from worldgen.export import ExportError

# The record at an export's root that names its kind: {"export": kind, ...}.
MARKERS = {"bench": "splits.json", "pool": "pool.json"}


@contextmanager
def atomic_dir(out: Path, kind: str) -> Iterator[Path]:
    """Yield a fresh temporary directory beside `out`; on success it replaces `out` in one rename."""
    out = Path(out)
    _refuse_foreign(out, kind)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
    except OSError as exc:
        raise ExportError(f"cannot write next to --out {out}: {exc.strerror or exc}") from None
    try:
        yield tmp
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        if out.exists():
            out.rename(old)
        try:
            tmp.rename(out)
        except OSError:
            if old.exists():
                old.rename(out)
            raise
        if old.exists():
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _refuse_foreign(out: Path, kind: str) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"--out {out} is a file; give a directory")
    entries = list(out.iterdir())
    if not entries:
        return
    previous = export_kind(out)
    if previous != kind:
        what = f"a {previous} export" if previous else "other files"
        raise ExportError(f"--out {out} holds {what}; give an empty or new directory (or an earlier {kind} export)")


def export_kind(root: Path) -> str | None:
    """'bench' or 'pool' when `root` is a worldgen export of that kind, else None."""
    for kind, name in MARKERS.items():
        try:
            record = json.loads((root / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("export") == kind:
            return kind
    return None


def write_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def place(src: Path, dst: Path, link_from: Path | None = None) -> None:
    """Copy `src` to `dst`; hard-link to `link_from` (an identical file already exported) when possible."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if link_from is not None:
        try:
            os.link(link_from, dst)
            return
        except OSError:
            pass
    shutil.copyfile(src, dst)


def tree_files(root: Path) -> list[Path]:
    """Every file under `root`, sorted by relative path (POSIX separators)."""
    return sorted((p for p in root.rglob("*") if p.is_file()), key=lambda p: p.relative_to(root).as_posix())


def harbor_digest(task_dir: Path) -> str:
    """Harbor's task digest: sha256 over the sorted lines "{relative path}\\0{sha256 of file}\\n"."""
    lines = sorted(f"{p.relative_to(task_dir).as_posix()}\0{file_sha256(p)}\n" for p in tree_files(task_dir))
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


def refuse_inside(out: Path, other: Path, flag: str) -> None:
    """An export may not be written into (or over) its source build or a bench it reads."""
    out, other = out.resolve(), other.resolve()
    if out == other or other in out.parents or out in other.parents:
        raise ExportError(f"--out {out} overlaps {flag} {other}; give a directory of its own")

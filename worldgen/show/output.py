"""Where pages may be written, and writing them whole or not at all.

Rules (the same as the exports' `--out`):
- a file is only overwritten if `worldgen show` wrote it (marker.py); a directory only if it is empty or an
  earlier `worldgen show` directory (its `show.json`); links, FIFOs and devices are refused, never followed;
- pages show hidden truth, so none is ever written inside a world or an exported bench or pool (they would
  travel with the analyst's files);
- files are written with `contracts.safeio.atomic_write`, directories under a temporary name beside `--out`
  and renamed into place, so `--out` never holds half a page or half a site.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contracts.errors import InputError
from contracts.safeio import KIB, atomic_write, kind_of, lstat_or_none, one_line, open_regular, read_json
from worldgen.show.marker import HEAD_BYTES, PNG_SIGNATURE, PNG_TEXT, is_show_output

SITE_FILE = "show.json"  # marks a directory written by `worldgen show BUILD`
SITE_FORMAT = "worldgen-show"
HIDDEN_ROOTS = ("world.json", "contract.json", "splits.json", "pool.json")  # a world, a bench, a pool


def _info(path: Path, flag: str) -> os.stat_result | None:
    try:
        return lstat_or_none(path)
    except OSError as exc:
        raise InputError(f"cannot write {flag} {one_line(path)}: {exc.strerror or exc}") from None


def check_out_file(path: Path, flag: str) -> None:
    """Refuse, before anything is written, a file `worldgen show` may not write or overwrite."""
    _refuse_hidden_places(path.parent.resolve(), path, flag)
    info = _info(path, flag)
    if info is None:
        return
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{flag} {one_line(path)} is {kind_of(info.st_mode)}; give a path to a new file")
    fd = open_regular(path, max_bytes=1 << 40, what=f"existing {flag}", error=InputError, follow_symlinks=False)
    try:
        head = os.read(fd, HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"cannot read {flag} {one_line(path)}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if not is_show_output(head):
        raise InputError(
            f"{flag} {one_line(path)} exists and was not written by worldgen show; give a new path or remove it"
        )


def _present(path: Path) -> bool:
    try:
        return lstat_or_none(path) is not None
    except OSError:  # e.g. a component is a file: nothing can be there
        return False


def _refuse_hidden_places(folder: Path, path: Path, flag: str) -> None:
    for ancestor in (folder, *folder.parents):
        found = next((name for name in HIDDEN_ROOTS if _present(ancestor / name)), None)
        if found is not None:
            what = "a world" if found in ("world.json", "contract.json") else "an exported bench or pool"
            raise InputError(
                f"{flag} {one_line(path)} is inside {what} ({one_line(ancestor)}); pages show the hidden truth "
                "and must stay out of what analysts receive: write them elsewhere"
            )


def write_file(path: Path, data: bytes | str, flag: str) -> None:
    check_out_file(path, flag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data, fsync=False)
    except OSError as exc:
        raise InputError(f"cannot write {flag} {one_line(path)}: {exc.strerror or exc}") from None


def mark_png(png: bytes) -> bytes:
    """The PNG with a `Software: worldgen show` tEXt chunk right after its header (IHDR)."""
    if not png.startswith(PNG_SIGNATURE) or png[12:16] != b"IHDR":
        raise InputError("the browser returned something that is not a PNG")
    end = 8 + 8 + struct.unpack(">I", png[8:12])[0] + 4
    chunk = b"tEXt" + PNG_TEXT
    crc = struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF)
    return png[:end] + struct.pack(">I", len(PNG_TEXT)) + chunk + crc + png[end:]


def check_out_dir(out: Path, flag: str = "--out") -> None:
    """Refuse a directory that is neither new, empty nor an earlier `worldgen show` site."""
    _refuse_hidden_places(out.resolve(), out, flag)
    info = _info(out, flag)
    if info is None:
        return
    if not stat.S_ISDIR(info.st_mode):
        what = "a file" if stat.S_ISREG(info.st_mode) else kind_of(info.st_mode)
        raise InputError(f"{flag} {one_line(out)} is {what}, not a directory")
    try:
        names = os.listdir(out)
    except OSError as exc:
        raise InputError(f"cannot read {flag} {one_line(out)}: {exc.strerror or exc}") from None
    if not names:
        return
    marker = out / SITE_FILE
    marker_info = _info(marker, flag)
    record = None
    if marker_info is not None and stat.S_ISREG(marker_info.st_mode):
        record = read_json(marker, max_bytes=64 * KIB, what="site record", error=InputError)
    if not (isinstance(record, dict) and record.get("format") == SITE_FORMAT):
        raise InputError(
            f"{flag} {one_line(out)} holds files worldgen show did not write; give a new or empty directory"
        )


@contextmanager
def site(out: Path, flag: str = "--out") -> Iterator[Path]:
    """A fresh directory beside `out` to write into; on success it replaces `out` (an earlier site) in one go."""
    check_out_dir(out, flag)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for stale in (tmp, old):
            if lstat_or_none(stale) is not None:
                shutil.rmtree(stale)
        tmp.mkdir()
    except OSError as exc:
        raise InputError(f"cannot write next to {flag} {one_line(out)}: {exc.strerror or exc}") from None
    try:
        yield tmp
        check_out_dir(out, flag)  # again: nothing foreign appeared while we wrote
        if lstat_or_none(out) is not None:
            out.rename(old)
        tmp.rename(out)
        if lstat_or_none(old) is not None:
            shutil.rmtree(old)
    except OSError as exc:
        if lstat_or_none(old) is not None and lstat_or_none(out) is None:
            old.rename(out)
        raise InputError(f"cannot write {flag} {one_line(out)}: {exc.strerror or exc}") from None
    finally:
        if lstat_or_none(tmp) is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def site_record(**fields: object) -> str:
    return json.dumps({"format": SITE_FORMAT, **fields}, indent=1, sort_keys=True) + "\n"

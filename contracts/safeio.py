"""Bounded, link-aware reading and atomic writing of the files users hand us (one helper, every reader).

Every JSON document a user can supply (persona files, contract.json, world.json, build.json, manifests,
tasks, answers) is read through `read_json` / `read_jsonl`: a regular file only (a FIFO or a device is
refused before it can block), a size cap, strict UTF-8, a nesting cap checked *before* parsing (the
parser and everything downstream recurse), and no lone surrogates (they cannot be written back as UTF-8).
Every file we write into a directory that may also hold a user's files goes through `atomic_write`:
a fresh temporary name in the same directory, then `os.replace`, which replaces a symbolic link
instead of writing through it. Shared by the generator, the auditor and the graders, so it lives here.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from contracts.errors import WorldFormatError, WorldgenError

MAX_DEPTH = 64  # our own files nest at most 8 deep; 64 stays far below every recursive reader's limit
KIB = 1 << 10
MIB = 1 << 20

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, escapes included, linear time
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_NOT_BRACKET_OR_QUOTE = bytes(c for c in range(256) if c not in b'[]{}"')  # bytes.translate deletes these
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SPECIAL = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


def one_line(text: object, limit: int = 300) -> str:
    """A message fragment safe to print on one stderr line: newlines escaped, length capped."""
    s = str(text).replace("\r", "\\r").replace("\n", "\\n")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def kind_of(mode: int) -> str:
    """'a FIFO (named pipe)', 'a directory', ... for a stat mode that is not a regular file."""
    return _SPECIAL.get(stat.S_IFMT(mode), "not a regular file")


def open_regular(
    path: Path,
    *,
    max_bytes: int,
    what: str = "file",
    error: type[WorldgenError] = WorldFormatError,
    follow_symlinks: bool = True,
) -> int:
    """A blocking descriptor on a regular file of at most `max_bytes`; anything else raises `error`.

    The path is checked with stat before it is opened (a device or a FIFO is never opened), then opened
    non-blocking (should it have become a FIFO meanwhile, the open does not wait for a writer) and checked
    again with fstat on the open descriptor, so what is checked is what is read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        info = os.stat(path, follow_symlinks=follow_symlinks)  # never open a device or a FIFO at all
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{one_line(path)}: {what} is {kind_of(info.st_mode)}, not a regular file")
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise error(f"{one_line(path)}: {what} is a symbolic link; refusing to follow it") from None
        raise error(f"{one_line(path)}: cannot read {what}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)  # again on what was opened: the path may have changed since the check
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{one_line(path)}: {what} is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise error(f"{one_line(path)}: {what} is {_size(info.st_size)}, over the {_size(max_bytes)} limit")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(
    path: Path,
    *,
    max_bytes: int,
    what: str = "file",
    error: type[WorldgenError] = WorldFormatError,
    follow_symlinks: bool = True,
) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; anything else raises `error` with one line."""
    fd = open_regular(path, max_bytes=max_bytes, what=what, error=error, follow_symlinks=follow_symlinks)
    try:
        chunks, total = [], 0
        while chunk := os.read(fd, min(MIB, max_bytes + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # the file grew while we read it
                raise error(f"{one_line(path)}: {what} is over the {_size(max_bytes)} limit")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{one_line(path)}: cannot read {what}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_text(path: Path, *, max_bytes: int, what: str = "file", error: type[WorldgenError] = WorldFormatError) -> str:
    """A bounded regular file decoded as strict UTF-8."""
    data = read_bytes(path, max_bytes=max_bytes, what=what, error=error)
    return decode_utf8(data, f"{one_line(path)}: {what}", error)


def decode_utf8(data: bytes, where: str, error: type[WorldgenError] = WorldFormatError) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where} is not UTF-8 text (invalid byte at offset {exc.start})") from None


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text, without parsing it (no recursion)."""
    if not (b"[" in data or b"{" in data):
        return 0
    if b"\\" in data:
        brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b'""', data))
    else:
        brackets = _outside_strings(data)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int64)
    return int(np.cumsum(steps).max())


def _outside_strings(data: bytes) -> bytes:
    """The brackets of a text without backslashes that are not inside a string, in order: what
    `_NOT_BRACKET.sub(b"", _STRING.sub(b'""', data))` leaves, in a few passes of numpy instead of a regex.

    Without backslashes a string is a quote, anything but a quote, a quote: quotes pair up from the left, and
    a bracket is inside a string when an odd number of quotes precede it and another quote follows (a last,
    unpaired quote opens no string: the regex matches nothing there)."""
    codes = np.frombuffer(data.translate(None, _NOT_BRACKET_OR_QUOTE), dtype=np.uint8)
    if not len(codes):
        return b""
    at = np.flatnonzero((codes == ord("[")) | (codes == ord("]")) | (codes == ord("{")) | (codes == ord("}")))
    quotes = np.cumsum(codes == ord('"'))
    before = quotes[at]  # a bracket is not a quote: the quotes up to it are the quotes before it
    outside = (before % 2 == 0) | (before == quotes[-1])
    return codes[at[outside]].tobytes()


def loads(
    data: bytes | str,
    *,
    where: str,
    error: type[WorldgenError] = WorldFormatError,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """Parse one JSON document with a nesting cap and no lone surrogates; problems raise `error`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if isinstance(data, bytes):
        data = decode_utf8(data, where, error)
    depth = json_depth(raw)
    if depth > max_depth:
        raise error(f"{where}: JSON nested {depth} levels deep, over the limit of {max_depth}")
    try:
        value = json.loads(data)
    except RecursionError:  # unreachable after the depth check; kept so no parser recursion ever escapes
        raise error(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:
        raise error(f"{where}: not valid JSON ({one_line(exc, 120)})") from None
    if _SURROGATE_ESCAPE.search(raw) or _has_surrogate(data):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise error(
                f"{where}: a string holds a lone UTF-16 surrogate (\\ud800-\\udfff), not valid Unicode"
            ) from None
    return value


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_json(
    path: Path,
    *,
    max_bytes: int,
    what: str = "JSON file",
    error: type[WorldgenError] = WorldFormatError,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """One JSON document from a bounded regular file."""
    data = read_bytes(path, max_bytes=max_bytes, what=what, error=error)
    return loads(data, where=f"{one_line(path)}: {what}", error=error, max_depth=max_depth)


def iter_jsonl(
    path: Path,
    *,
    max_bytes: int,
    max_line_bytes: int = MIB,
    what: str = "JSONL file",
    error: type[WorldgenError] = WorldFormatError,
    max_depth: int = MAX_DEPTH,
) -> Iterator[tuple[int, Any]]:
    """(line number, value) for every non-blank line of a bounded regular JSONL file, streamed."""
    fd = open_regular(path, max_bytes=max_bytes, what=what, error=error)
    with os.fdopen(fd, "rb") as f:
        number = 0
        while True:
            try:
                line = f.readline(max_line_bytes + 1)
            except OSError as exc:
                raise error(f"{one_line(path)}: cannot read {what}: {exc.strerror or exc}") from None
            if not line:
                return
            number += 1
            where = f"{one_line(path)}: line {number}"
            if len(line) > max_line_bytes:
                raise error(f"{where} is longer than {_size(max_line_bytes)}")
            if line.strip():
                yield number, loads(line, where=where, error=error, max_depth=max_depth)


def lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def is_plain_relative(rel: str) -> bool:
    """A relative POSIX path that stays where it is rooted: no '..', no absolute part, no empty name."""
    if not isinstance(rel, str) or not rel or "\x00" in rel or "\\" in rel:
        return False
    if rel.startswith("/"):
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def atomic_write(path: Path, data: bytes | str, *, mode: int = 0o644, fsync: bool = True) -> None:
    """Write `path` whole or not at all: a fresh temporary file in the same directory, then os.replace.

    The temporary name is new (O_EXCL), so no existing file is ever opened for writing; os.replace
    swaps a symbolic link at `path` for the new file instead of writing through it.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _size(n: int) -> str:
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    if n >= KIB:
        return f"{n / KIB:.1f} KiB"
    return f"{n} bytes"

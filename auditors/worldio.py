"""Reading a world directory from disk: manifest, contract, ledger, canonical tables, observed files.

The auditor works from files only (never from the generator's memory), so it audits any directory that
follows the world format. Observed values are parsed the way an analyst would: keys by their digits, dates
by the system's date style.
"""

from __future__ import annotations

import datetime as dt
import functools
import io
import itertools
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from auditors.bytescan import NEWLINE, braces_not_after, trailing_digit_numbers
from contracts.errors import ContractError, WorldFormatError
from contracts.model import (
    DATE_STYLES,
    MAX_CONTRACT_BYTES,
    SCHEMA_VERSION,
    TIME_SUFFIX,
    Contract,
    Deliverable,
    contract_from_raw,
    load_contract,
)
from contracts.safeio import (
    MAX_DEPTH,
    MIB,
    is_plain_relative,
    iter_jsonl,
    json_depth,
    kind_of,
    loads,
    one_line,
    read_bytes,
    read_json,
)

REQUIRED = ("world.json", "contract.json", "ledger.jsonl", "projection.json", "canonical", "observed")
# Limits on what the auditor reads from a world that may not be ours. Our largest (--size large) world has
# ~30 files, a 3 MiB projection.json and observed files under 30 MiB each.
MAX_WORLD_ENTRIES = 10_000
MAX_META_BYTES = 16 * MIB
MAX_PROJECTION_BYTES = 1024 * MIB
MAX_LEDGER_BYTES = 256 * MIB
MAX_DATA_FILE_BYTES = 4096 * MIB
# A file the ledger check hashes and a reader later reads whole is read once: its bytes are kept for the
# reader, up to these sizes (ours: a few files of under 30 MiB each); a larger one is read twice, as before.
MAX_KEPT_BYTES = 64 * MIB
MAX_KEPT_TOTAL = 256 * MIB


def is_world_dir(path: Path) -> bool:
    return (path / "world.json").is_file() or (path / "contract.json").is_file()


@dataclass
class World:
    path: Path
    meta: dict
    raw_contract: dict
    contract: Contract | None
    contract_error: str | None
    observed_cache: dict[str, pl.DataFrame] = field(default_factory=dict)
    parsed_cache: dict[str, pl.DataFrame] = field(default_factory=dict)
    # Bytes of files already read whole (by the ledger check, to hash them), by world-relative name, each
    # taken by the one reader that reads that file next (`taken_bytes`).
    file_bytes: dict[str, bytes] = field(default_factory=dict)

    @cached_property
    def ledger(self) -> list[dict]:
        records = _read_ledger(self.path)
        _check_ledger_paths(self.path, records)
        return records

    @cached_property
    def projection(self) -> dict:
        path = check_in_world(self.path, self.path / "projection.json")
        data = taken_bytes(self, "projection.json")
        if data is not None and len(data) <= MAX_PROJECTION_BYTES:  # what `read_json` reads, parsed as it does
            return loads(data, where=f"{one_line(path)}: projection record")
        return read_json(path, max_bytes=MAX_PROJECTION_BYTES, what="projection record")

    @cached_property
    def canonical(self) -> dict[str, pl.DataFrame]:
        tables = {}
        for name in ("units", "parties", "panel", "events"):
            path = self.path / "canonical" / f"{name}.parquet"
            try:
                tables[name] = read_parquet(
                    check_in_world(self.path, path), taken_bytes(self, f"canonical/{name}.parquet")
                )
            except WorldFormatError:
                raise
            except Exception as exc:  # noqa: BLE001 - any unreadable file is one clear verdict reason
                raise WorldFormatError(f"{path}: unreadable canonical table ({type(exc).__name__})") from None
        return tables

    @property
    def start(self) -> dt.date:
        assert self.contract is not None
        return dt.date.fromisoformat(self.contract.timeline.start)


def load_world(path: Path) -> World:
    """Open a world directory; a missing part or an unreadable manifest is a WorldFormatError.

    Nothing is opened before the whole directory has been checked with lstat: a FIFO, a device or a socket
    anywhere in the world, or a symbolic link that leaves it, refuses the world (reading them could block
    forever or read any file on the machine). World-relative names in world.json, the contract and the
    ledger must stay inside the world too.
    """
    scan_world(path)
    missing = [name for name in REQUIRED if not (path / name).exists()]
    if missing:
        raise WorldFormatError(f"{one_line(path)}: not a complete world (missing {', '.join(missing)})")
    meta = read_json(path / "world.json", max_bytes=MAX_META_BYTES, what="world manifest")
    raw = read_json(path / "contract.json", max_bytes=MAX_META_BYTES, what="contract")
    if not isinstance(meta, dict) or not isinstance(raw, dict):
        raise WorldFormatError(f"{one_line(path)}: world.json and contract.json must hold JSON objects")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise WorldFormatError(
            f"{one_line(path / 'world.json')}: schema_version {one_line(repr(meta.get('schema_version')), 40)} "
            f"is not the supported {SCHEMA_VERSION!r}"
        )
    files = meta.get("files", {})
    if not isinstance(files, dict) or not all(
        is_plain_relative(rel) and isinstance(h, str) for rel, h in files.items()
    ):
        raise WorldFormatError(f"{one_line(path / 'world.json')}: 'files' must map paths inside the world to hashes")
    deliverables = raw.get("deliverables")
    for d in deliverables if isinstance(deliverables, list) else []:
        name = d.get("file") if isinstance(d, dict) else None
        if isinstance(name, str) and not is_plain_relative(name):
            raise WorldFormatError(
                f"{one_line(path / 'contract.json')}: deliverable {one_line(repr(name), 80)} leaves observed/"
            )
    try:
        contract, error = contract_of(raw, path / "contract.json"), None
    except ContractError as exc:
        contract, error = None, str(exc)
    try:
        records = _read_ledger(path)
    except WorldFormatError:
        records = None  # an unreadable ledger is a verdict (the ledger check fails), not a refusal
    _check_ledger_paths(path, records or [])  # a name that leaves the world is a refusal
    world = World(path=path, meta=meta, raw_contract=raw, contract=contract, contract_error=error)
    if records is not None:  # read and checked: what `World.ledger` would read again (it raises otherwise)
        world.__dict__["ledger"] = records
    return world


CANONICAL_FILES = tuple(f"canonical/{name}.parquet" for name in ("units", "parties", "panel", "events"))
KEPT_FORMATS = {"csv", "parquet", "jsonl", "json"}  # observed files whose readers take kept bytes


def files_read_later(world: World) -> set[str]:
    """The world-relative names of the files the audit reads whole after the ledger check hashes them: the
    canonical tables, the projection record, and the observed data files (xlsx aside: read by path)."""
    names = {*CANONICAL_FILES, "projection.json"}
    if world.contract is not None:
        names.update(f"observed/{d.file}" for d in world.contract.deliverables if d.format in KEPT_FORMATS)
    return names


def read_and_keep(world: World, rel: str) -> bytes | None:
    """The whole of a file of the world, kept in `world.file_bytes` for its reader; None (nothing read)
    when it is larger than MAX_KEPT_BYTES or would take the world's kept bytes over MAX_KEPT_TOTAL."""
    with (world.path / rel).open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        kept = sum(map(len, world.file_bytes.values()))
        if size > MAX_KEPT_BYTES or kept + size > MAX_KEPT_TOTAL:
            return None
        data = f.read()
    if len(data) <= MAX_KEPT_BYTES:  # (a file that grew while read is still hashed from what was read)
        world.file_bytes[rel] = data
    return data


def taken_bytes(world: World, rel: str) -> bytes | None:
    """The kept bytes of a file (then forgotten: each is read by one reader), None if none are kept."""
    return world.file_bytes.pop(rel, None)


def read_parquet(path: Path, data: bytes | None) -> pl.DataFrame:
    """`pl.read_parquet(path)`, from the file's kept bytes when there are any (the same parse of the same
    bytes); a file they do not read as is read by path, so that any error is the one its path gives. Never as
    a glob: polars expands `*`, `?` and `[...]` in a path, so a world under `runs[1]/` would read as missing
    and `x*.parquet` would read its siblings too."""
    if data is not None:
        try:
            return pl.read_parquet(data)
        except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - the error to report is the path's
            pass
    return pl.read_parquet(path, glob=False)


def contract_of(raw: object, path: Path) -> Contract:
    """`load_contract(path)` of the contract `raw` already read from `path` (read and parsed with the same
    limits as `load_contract` reads it: MAX_META_BYTES == MAX_CONTRACT_BYTES), without reading it again:
    its steps and error messages as they are there."""
    if MAX_META_BYTES != MAX_CONTRACT_BYTES:  # the read that succeeded would not be the one load_contract does
        return load_contract(path)
    return contract_from_raw(raw, path)


def _read_ledger(root: Path) -> list:
    path = check_in_world(root, root / "ledger.jsonl", MAX_LEDGER_BYTES)
    return [record for _, record in iter_jsonl(path, max_bytes=MAX_LEDGER_BYTES, what="ledger")]


def _check_ledger_paths(root: Path, records: list) -> None:
    """The projection step names the files the ledger check will hash: they must stay inside the world."""
    for record in records:
        outputs = record.get("outputs") if isinstance(record, dict) else None
        if isinstance(record, dict) and record.get("name") == "projection" and isinstance(outputs, dict):
            unsafe = next((rel for rel in outputs if not is_plain_relative(rel)), None)
            if unsafe is not None:
                raise WorldFormatError(
                    f"{one_line(root / 'ledger.jsonl')}: projection output {one_line(repr(unsafe), 80)} leaves the world"
                )


def scan_world(root: Path) -> None:
    """lstat every entry of a world: regular files and directories, or links that stay inside, only."""
    try:
        real_root = os.path.realpath(root)
        if not os.path.isdir(real_root):
            raise WorldFormatError(f"{one_line(root)}: not a directory")
        count = 0
        for folder, dirs, files in os.walk(root, followlinks=False, onerror=_raise):
            for name in dirs + files:
                count += 1
                if count > MAX_WORLD_ENTRIES:
                    raise WorldFormatError(f"{one_line(root)}: more than {MAX_WORLD_ENTRIES} entries; not a world")
                entry = Path(folder) / name
                info = os.lstat(entry)
                if stat.S_ISLNK(info.st_mode):
                    _check_link(real_root, entry)
                elif not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                    raise WorldFormatError(
                        f"{one_line(entry)}: {kind_of(info.st_mode)} in a world; refusing to open it"
                    )
                elif info.st_size > MAX_DATA_FILE_BYTES and stat.S_ISREG(info.st_mode):
                    raise WorldFormatError(
                        f"{one_line(entry)}: larger than {MAX_DATA_FILE_BYTES // MIB} MiB; refusing to read it"
                    )
    except OSError as exc:
        raise WorldFormatError(f"{one_line(root)}: cannot read the world ({exc.strerror or exc})") from None


def _raise(exc: OSError) -> None:
    raise exc


def _check_link(real_root: str, entry: Path) -> None:
    target = os.path.realpath(entry)
    if os.path.commonpath([real_root, target]) != real_root:
        raise WorldFormatError(f"{one_line(entry)}: a symbolic link out of the world; refusing to follow it")
    try:
        mode = os.stat(target).st_mode
    except OSError:
        raise WorldFormatError(f"{one_line(entry)}: a symbolic link that leads nowhere; refusing it") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise WorldFormatError(f"{one_line(entry)}: a link to {kind_of(mode)}; refusing to open it")


def check_in_world(root: Path, path: Path, max_bytes: int = MAX_DATA_FILE_BYTES) -> Path:
    """`path`, once lstat has shown it is a regular file of at most `max_bytes` inside the world `root`.

    A missing file is returned as is (the reader reports it); anything else raises WorldFormatError.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError as exc:
        raise WorldFormatError(f"{one_line(path)}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISLNK(info.st_mode):
        _check_link(os.path.realpath(root), path)
        try:
            info = os.stat(path)
        except OSError:
            return path
    if not stat.S_ISREG(info.st_mode):
        raise WorldFormatError(f"{one_line(path)}: {kind_of(info.st_mode)}, not a regular file; refusing to open it")
    if info.st_size > max_bytes:
        raise WorldFormatError(f"{one_line(path)}: larger than {max_bytes // MIB} MiB; refusing to read it")
    return path


def read_observed(world: World, d: Deliverable) -> pl.DataFrame:
    """One observed file as a frame, whatever its format (xlsx sheets are stacked); read once per audit."""
    if d.file not in world.observed_cache:
        world.observed_cache[d.file] = _read(world, d)
    return world.observed_cache[d.file]


def _read(world: World, d: Deliverable) -> pl.DataFrame:
    if not is_plain_relative(d.file):
        raise WorldFormatError(f"observed/{one_line(d.file, 80)}: a deliverable name that leaves observed/")
    path = check_in_world(world.path, world.path / "observed" / d.file)
    kept = taken_bytes(world, f"observed/{d.file}")  # the bytes the ledger check hashed, if it kept them
    try:
        match d.format:
            case "csv":
                return read_csv(path, kept)
            case "parquet":
                return read_parquet(path, kept)
            case "jsonl":
                return read_ndjson(path, kept)
            case "json":
                data = read_bytes(path, max_bytes=MAX_DATA_FILE_BYTES, what="observed file") if kept is None else kept
                return read_json_envelope(data, where=f"observed/{d.file}")
            case "xlsx":
                sheets = pl.read_excel(path, sheet_id=0, engine="calamine")
                return pl.concat(list(sheets.values()), how="vertical_relaxed")
    except Exception as exc:  # noqa: BLE001
        raise WorldFormatError(
            f"observed/{d.file}: unreadable {d.format} file ({type(exc).__name__}: {str(exc)[:80]})"
        ) from None
    raise WorldFormatError(f"observed/{d.file}: unknown format {d.format!r}")


# An envelope as the generator writes it: this header, polars' `write_json` of the records, "}" and a newline.
JSON_HEADER = re.compile(rb'\{"system": "[ !#-\[\]-~]*", "record_count": (?:0|[1-9][0-9]*), "records": ')
JSON_SAMPLE = 100  # records at each end of the array whose types are tried first
FLAT = (pl.String, pl.Int64, pl.Float64, pl.Boolean, pl.Null)


def read_json_envelope(data: bytes, where: str) -> pl.DataFrame:
    """The records of a JSON export envelope as a frame: `pl.DataFrame(loads(data)["records"],
    infer_schema_length=None)`, by polars' JSON reader when the envelope is as polars writes it."""
    frame = read_json_records(data)
    if frame is None:  # any other document: parsed by the bounded stdlib reader
        frame = pl.DataFrame(loads(data, where=where)["records"], infer_schema_length=None)
    return frame


def read_json_records(data: bytes) -> pl.DataFrame | None:
    """`pl.DataFrame(loads(data)["records"], infer_schema_length=None)` for an envelope whose records are
    exactly what polars writes for a frame of flat columns (the generator's own files), read by polars'
    JSON reader (several times faster); None for any other document (the caller parses it the plain way).

    The records are read with the types their first and last records show, as NDJSON lines (`},{` made
    `}\n{` where the flat-array scan finds them; polars' line reader is faster than its array reader) or,
    should that fail, as the array (with those types, then with every record's), and accepted only if writing the frame again gives their bytes back. Then each record
    holds every column once, in the frame's order, each value written as polars writes its type (a float
    with a point or an exponent, an integer without, valid UTF-8 without lone surrogates): the stdlib
    parser reads those bytes as the same values, and those values infer the same types (a column of
    nulls only is accepted as Null alone). The document is valid JSON three levels deep, so whatever
    `loads` would reject (invalid UTF-8 or JSON, deep nesting, a lone surrogate) is never accepted here."""
    header = JSON_HEADER.match(data)
    end = len(data) - 2 if data.endswith(b"}\n") else len(data) - 1 if data.endswith(b"}") else -1
    if header is None or end < header.end():
        return None
    body = data[header.end() : end]
    marked = np.frombuffer(body, dtype=np.uint8).copy()
    if not _flat_array(body, marked):
        return None
    # The records as NDJSON lines (`},{` -> `}\n{`, without the brackets, each line ending in a line break as
    # polars writes NDJSON) read in less time than the array; that is only the first try: whichever way a
    # frame is read, it is accepted only if it writes `body` back.
    lines = None
    if body.startswith(b"[") and body.endswith(b"]"):
        marked[-1] = NEWLINE  # the closing bracket: the last line's end
        lines = marked[1:].tobytes()
    sampled = _sampled_schema(body)
    for read, source, schema in (
        (pl.read_ndjson, lines, sampled),
        (pl.read_json, body, sampled),
        (pl.read_json, body, None),
    ):
        if source is None:
            continue
        try:
            frame = read(source, schema=schema, infer_schema_length=None)
        except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - not polars' own output: try the next way
            continue
        if _array_writes_back(frame, body, lines):
            return frame.rechunk()  # one chunk a column, as the array reader gives (the line reader gives several)
    return None


def _array_writes_back(frame: pl.DataFrame, body: bytes, lines: bytes | None) -> bool:
    """`_writes_back(frame, body)`: whether `body` is polars' JSON array of `frame`, checked against its
    NDJSON `lines` where that says the same (polars writes NDJSON in three quarters of the array's time).

    polars' JSON array of a frame is its NDJSON records joined by "," in brackets (`_array_is_joined_lines`,
    checked once per process), and a record holds no line break (a string's is escaped). So where `body`
    holds no line break and `lines` is it without its opening bracket, the comma of each `},{` and the closing
    bracket a line break, the NDJSON being `lines` puts a line break exactly at each of those commas and
    nowhere else, and turning them back into commas gives `body` between its brackets: the array is `body`.

    The converse needs the commas made line breaks to be only those between records: a string holding
    `},{` has one made a line break too, and then only the array itself can say (when `body` is the array,
    each of its height - 1 record separators is a `},{`, so more line breaks than height is such a string)."""
    if lines is None or frame.height == 0 or b"\n" in body or not _array_is_joined_lines():
        return _writes_back(frame, body)
    if _writes_back(frame, lines, ndjson=True):
        return True
    return lines.count(b"\n") != frame.height and _writes_back(frame, body)


@functools.cache
def _array_is_joined_lines() -> bool:
    """Whether polars writes a frame's JSON array as its NDJSON lines joined by "," between brackets, for
    every flat type and the values whose writing differs most (nulls, NaN, infinities, -0.0, extreme floats,
    escapes, control characters, non-ASCII text): what `_array_writes_back` relies on."""
    frame = pl.DataFrame(
        {
            "f": [1.0, None, float("nan"), float("inf"), -float("inf"), -0.0, 1e300, 1.5e-7, 5e-324],
            "i": [1, None, -3, 2**63 - 1, -(2**63), 0, 5, 6, 7],
            "s": ['x\n"y', None, "\u00e9\u2028", "\x01\x7f", "\\", "},{", "", "\r\t", "\U0001f600"],
            "b": [True, None, False, True, True, False, None, True, False],
            "n": [None] * 9,
        }
    )
    records = frame.write_ndjson().encode().removesuffix(b"\n").split(b"\n")
    return frame.write_json().encode() == b"[" + b",".join(records) + b"]" and len(records) == frame.height


def _flat_array(body: bytes, lines: np.ndarray | None = None) -> bool:
    """Whether an array's brackets can only be polars' flat records: one `[`, and every `{` but the first
    (if any) opening a record right after the previous one closed (`},{`). Nothing else reaches polars'
    reader, whose type inference takes minutes on a few kilobytes nested a thousand deep (the stdlib path
    refuses those at 64 levels); a string holding a bracket sends its file the plain way too, at its cost.
    With `lines` (a writable copy of the body's bytes), the commas of those `},{` become line breaks in it
    (for a flat array: its records as NDJSON, each line flat as `_check_ndjson_depth` requires)."""
    first = body.find(b"[")
    return first >= 0 and body.find(b"[", first + 1) < 0 and braces_not_after(body, b"},", lines) <= 1


def _sampled_schema(body: bytes) -> dict[str, pl.DataType] | None:
    """The types of the first and last JSON_SAMPLE records of an array written by polars (cut where a record
    ends: `},{`), a column null in one taking its type from the other; None when the array is short or the
    cuts do not read (a string holding `},{`) or the two disagree."""
    ends = _sample_ends(body, b"},{")
    if ends is None:
        return None
    try:
        first = pl.read_json(body[: ends[0] + 1] + b"]", infer_schema_length=None).schema
        last = pl.read_json(b"[" + body[ends[1] + 2 :], infer_schema_length=None).schema
    except (Exception, pl.exceptions.PanicException):  # noqa: BLE001
        return None
    return _merged(first, last)


def _sample_ends(body: bytes, separator: bytes) -> tuple[int, int] | None:
    """Where the JSON_SAMPLE-th separator from the start and from the end are, if they do not overlap."""
    head = tail = -1
    for _ in range(JSON_SAMPLE):
        head = body.find(separator, head + 1)
        tail = body.rfind(separator, 0, tail if tail >= 0 else len(body))
        if head < 0 or tail < 0 or head >= tail:
            return None
    return head, tail


def _merged(first: pl.Schema, last: pl.Schema) -> dict[str, pl.DataType] | None:
    """The types of `first` (in its order), a null column taking its type from `last`; integer and float
    make float; None on any other disagreement."""
    schema = {}
    for name, dtype in first.items():
        other = last.get(name, pl.Null)
        if dtype == pl.Null or other == dtype:
            schema[name] = other
        elif other == pl.Null:
            schema[name] = dtype
        elif {dtype, other} == {pl.Int64, pl.Float64}:
            schema[name] = pl.Float64
        else:
            return None
    return schema


def _writes_back(frame: pl.DataFrame, body: bytes, ndjson: bool = False) -> bool:
    """Whether `body` is exactly polars' JSON (or NDJSON) of `frame`, a frame of flat columns none of which
    is typed but holds only nulls."""
    if not all(dtype in FLAT for dtype in frame.schema.values()):
        return False
    if any(dtype != pl.Null and frame[name].null_count() == frame.height for name, dtype in frame.schema.items()):
        return False
    written = io.BytesIO()
    if ndjson:
        frame.write_ndjson(written)
    else:
        frame.write_json(written)
    return written.getvalue() == body


def read_ndjson(path: Path, data: bytes | None = None) -> pl.DataFrame:
    """`pl.read_ndjson(path, infer_schema_length=None)`, in a fraction of its time for a file as polars
    writes it: read with the types of its first and last JSON_SAMPLE lines, and accepted only if writing the
    frame again gives the file's bytes back (then each line holds every column once, in order, each value as
    polars writes its type, which all the lines infer; a column of nulls only is accepted as Null alone).
    `data`: the file's bytes, if already read."""
    readable = True
    if data is None:
        try:
            data = path.read_bytes()
        except OSError:
            data, readable = b"", False
    _check_ndjson_depth(data, path)
    ends = _sample_ends(data, b"\n")
    if ends is not None:
        try:
            first = pl.read_ndjson(data[: ends[0] + 1], infer_schema_length=None).schema
            last = pl.read_ndjson(data[ends[1] + 1 :], infer_schema_length=None).schema
            schema = _merged(first, last)
            frame = pl.read_ndjson(data, schema=schema) if schema is not None else None
        except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - not polars' own output: the plain way
            frame = None
        if frame is not None and _writes_back(frame, data, ndjson=True):
            return frame
    # From the bytes, not the path: polars' NDJSON reader expands glob characters in a path (no way to turn
    # that off), so a path would read the wrong files, or none. An unreadable file keeps its path's error.
    return pl.read_ndjson(data if readable else path, infer_schema_length=None)


NDJSON_BLOCK = MIB  # a nested file is depth-scanned a MiB of whole lines at a time (~35 B a bracket)


def _check_ndjson_depth(data: bytes, path: Path) -> None:
    """Refuse lines nested deeper than MAX_DEPTH before polars sees them: its NDJSON type inference takes
    seconds on a line 300 deep and minutes on one 1000 deep. Flat records (no `[`, one `{` a line, the
    generator's own files) are not scanned; any other file is, bracket by bracket outside strings, in blocks
    of whole lines (a line is one JSON document), so the scan's memory stays bounded whatever the file's size;
    a nested line longer than a block is refused."""
    if b"[" not in data and braces_not_after(data, b"\n") <= 1:
        return
    start = 0
    while start < len(data):
        end = len(data) if len(data) - start <= NDJSON_BLOCK else data.rfind(b"\n", start, start + NDJSON_BLOCK) + 1
        if end <= start:
            raise WorldFormatError(
                f"{one_line(path.name)}: a line of nested JSON longer than {NDJSON_BLOCK // MIB} MiB; refusing to read it"
            )
        depth = json_depth(data[start:end])
        if depth > MAX_DEPTH:
            raise WorldFormatError(
                f"{one_line(path.name)}: JSON nested {depth} levels deep, over the limit of {MAX_DEPTH}"
            )
        start = end


CSV_SAMPLE = 64  # values of a column tried first: one that reads as text makes the whole column text


def read_csv(path: Path, data: bytes | None = None) -> pl.DataFrame:
    """`pl.read_csv(path, infer_schema_length=None)`: every row's types inferred, in a fraction of its time.

    Polars infers a column's type from the set of types its fields read as (integer and float make float;
    any other mix, or any text, makes text), so the distinct values of a column infer what all its rows do.
    Where a field's text is its value the file is read as text, each column's type inferred by polars itself
    from its distinct values (`_schema`), and the text cast to those types (the values reading the file again
    with them would give: a number's cast parses its text as the reader does; a file with another type is
    read again). That holds in a file without quotes (and carriage returns), and in one whose quotes are
    only the pairs around the values that need them (a comma or a line break: `_quoted_columns`), whose
    columns are text both ways (a quoted field reads as text; a value with a comma or a line break matches
    no number). Any other file is read the plain way. `data`: the file's bytes, if already read."""
    data = path.read_bytes() if data is None else data
    if b"\r" in data:
        return pl.read_csv(data, infer_schema_length=None)
    if b'"' in data:
        try:
            text = pl.read_csv(data, infer_schema=False)
        except pl.exceptions.PolarsError:
            return pl.read_csv(data, infer_schema_length=None)
        quoted = _quoted_columns(data, text)
        if quoted is None:
            return pl.read_csv(data, infer_schema_length=None)
    else:
        text, quoted = pl.read_csv(data, infer_schema=False), set()
    schema = _schema(text, quoted)
    if not all(dtype in CAST_AS_READ for dtype in schema.values()):  # a text-to-boolean cast does not exist
        return pl.read_csv(data, schema=schema)
    return text.with_columns(pl.col(name).cast(dtype) for name, dtype in schema.items() if dtype != pl.String)


# Types whose cast from a field's text gives what the CSV reader gives (numbers: both parse them alike).
CAST_AS_READ = (pl.String, pl.Int64, pl.Float64)
SPECIAL = "[,\n]"  # a value holding one of these was quoted in the file (unquoted, it would be split)


def _quoted_columns(data: bytes, text: pl.DataFrame) -> set[str] | None:
    """The columns with a value holding a comma or a line break, when the quotes of a file (read as `text`)
    are exactly one pair around each such value and none in the header (so no other field was quoted: no
    number, no boolean); None for any other file.

    Every value with a comma or a line break comes from a quoted field (two quotes, more if it holds quotes);
    a file with no value holding a quote, and as many quotes as two per such value, has no other quote."""
    header = data[: data.find(b"\n")] if b"\n" in data else data
    if b'"' in header:
        return None
    if not text.width:
        return set() if _quote_count(data) == 0 else None
    # One select for all columns (a select per column costs more than the scans themselves); the prefixes
    # keep the two kinds of results apart whatever the columns are named.
    found = text.select(
        pl.all().str.contains('"', literal=True).any().name.prefix("q"),
        pl.all().str.contains(SPECIAL).sum().name.prefix("s"),
    ).row(0)
    if any(found[: text.width]):
        return None
    specials = found[text.width :]
    columns = {name for name, special in zip(text.columns, specials, strict=True) if special}
    return columns if _quote_count(data) == 2 * sum(specials) else None


def _quote_count(data: bytes) -> int:
    """data.count(b'"'), counted by numpy (a few times faster than the bytes method)."""
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == ord('"')))


DIGITS_KEPT = 18  # bytes: an integer of this many digits (or fewer) is an Int64 whatever its digits
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _schema(text: pl.DataFrame, quoted: set[str]) -> dict[str, pl.DataType]:
    """The type polars infers for each column of a file read as text, from each column's distinct values.

    A column in `quoted` (holding a value with a comma or a line break) is text. Every other column's first
    values are inferred first (in one read for all columns; one text value settles it); for a column they
    leave numeric, the values are checked against the plain pattern of that type in one pass
    (`_plain_numbers`); for a column that fails it, its distinct values are inferred. Polars infers a
    field's type from the pattern of its characters, in which any ASCII digit may stand for any other (and, for an integer, from whether it fits in an Int64):
    when the values are ASCII of at most 18 bytes (any integer among them fits), each digit is replaced by
    0, which changes no value's inferred type and leaves a handful of distinct values (shapes) to infer."""
    schema: dict[str, pl.DataType] = dict.fromkeys(text.columns, pl.String)
    counts = {name: text[name].len() - text[name].null_count() for name in text.columns if name not in quoted}
    values = {name: text[name] for name, count in counts.items() if count}  # columns with a value, nulls kept
    heads = _infer_columns({name: _first_values(column, CSV_SAMPLE) for name, column in values.items()})
    long_numeric = [name for name in values if heads[name] != pl.String and counts[name] > CSV_SAMPLE]
    proven = _plain_numbers(text, {name: heads[name] for name in long_numeric})
    distinct = {}
    for name, column in values.items():
        schema[name] = heads[name]
        if name in long_numeric and name not in proven:
            column = column.drop_nulls().unique()
            shapes = set(column.str.join("\n").item().encode().translate(DIGITS_AS_ZERO).split(b"\n"))
            if all(len(shape) <= DIGITS_KEPT and shape.isascii() for shape in shapes):
                column = pl.Series(sorted(shape.decode() for shape in shapes))
            distinct[name] = column
    schema.update(_infer_columns(distinct))
    return schema


HEAD_ROWS = 4 * CSV_SAMPLE  # rows that usually hold a column's first values (else the whole column is looked at)


def _first_values(column: pl.Series, count: int) -> pl.Series:
    """`column.drop_nulls().head(count)`, without copying a long column's every value to find them."""
    head = column.head(HEAD_ROWS).drop_nulls()
    if head.len() < count and column.len() > HEAD_ROWS:
        head = column.drop_nulls()
    return head.head(count)


# Plain decimal numbers: every value of a column matching the pattern of its first values' type infers, by
# itself, as that type (Int64), or as Int64 or Float64 (so Float64 with the first values). Proven against
# polars' own inference (`_plain_shapes_infer`) before it is trusted: digits at most MAX_PLAIN_DIGITS a part.
MAX_PLAIN_DIGITS = 18  # an integer of this many digits fits in an Int64 whatever its digits
PLAIN_PATTERNS = {
    pl.Int64: rf"^-?[0-9]{{1,{MAX_PLAIN_DIGITS}}}$",
    pl.Float64: rf"^-?[0-9]{{1,{MAX_PLAIN_DIGITS}}}(\.[0-9]{{1,{MAX_PLAIN_DIGITS}}})?$",
}


def _plain_numbers(text: pl.DataFrame, heads: dict[str, pl.DataType]) -> set[str]:
    """The columns (of `heads`: name -> type its first values infer) whose every value matches the plain
    pattern of that type, so that the whole column infers it too: one vectorised pass per column, instead of
    inferring its distinct values (hashing them all) or shapes. Empty when polars infers the patterns'
    shapes otherwise than this relies on (then every column takes the general way)."""
    checked = {name: dtype for name, dtype in heads.items() if dtype in PLAIN_PATTERNS}
    if not checked or not _plain_shapes_infer():
        return set()
    found = text.select(pl.col(name).str.contains(PLAIN_PATTERNS[dtype]).all() for name, dtype in checked.items())
    return {name for name in checked if found[name].item()}


@functools.cache
def _plain_shapes_infer() -> bool:
    """Whether polars infers every integer of 1 to MAX_PLAIN_DIGITS digits (with or without a minus sign) as
    Int64, and those and every decimal of 1 to MAX_PLAIN_DIGITS digits each side of the point as Int64 or
    Float64: a column of all such shapes (each of all 0s and of all 9s; polars reads any digit as any other
    but for whether an integer fits) infers Int64, and one also holding the decimals Float64."""
    integers = [sign + digit * n for sign in ("", "-") for digit in "09" for n in range(1, MAX_PLAIN_DIGITS + 1)]
    decimals = [whole + "." + digit * n for whole in integers for digit in "09" for n in range(1, MAX_PLAIN_DIGITS + 1)]
    numbers = integers + decimals
    lines = "\n".join(f"{integers[k] if k < len(integers) else ''},{number}" for k, number in enumerate(numbers))
    inferred = pl.read_csv(f"int,number\n{lines}\n".encode(), infer_schema_length=None).schema
    return inferred == pl.Schema({"int": pl.Int64, "number": pl.Float64})


PYTHON_JOIN_VALUES = 10_000  # texts to infer types from that are joined in Python (beyond: by polars)


def _infer_columns(columns: dict[str, pl.Series]) -> dict[str, pl.DataType]:
    """The types polars infers for columns holding these (non-empty, without comma, quote or line break)
    field texts: one CSV of them all, the shorter columns padded with empty fields (which infer nothing)."""
    if not columns:
        return {}
    if sum(column.len() for column in columns.values()) <= PYTHON_JOIN_VALUES:
        # A column of the first values, or of a handful of shapes, is a few dozen texts: joined in Python,
        # faster than setting up a polars expression per column.
        texts = [(column.fill_null("") if column.null_count() else column).to_list() for column in columns.values()]
        lines = "\n".join(",".join(row) for row in itertools.zip_longest(*texts, fillvalue=""))
    else:  # a column's every distinct value (long or irregular texts): joined by polars
        height = max(column.len() for column in columns.values())
        padded = pl.DataFrame(
            [
                column.extend_constant(None, height - column.len()).alias(f"c{k}")
                for k, column in enumerate(columns.values())
            ]
        )
        lines = padded.select(pl.concat_str(pl.all().fill_null(""), separator=",")).to_series().str.join("\n").item()
    header = ",".join(f"c{k}" for k in range(len(columns)))
    inferred = pl.read_csv(f"{header}\n{lines}\n".encode(), infer_schema_length=None).schema
    return {name: inferred[f"c{k}"] for k, name in enumerate(columns)}


MAX_DOCUMENT_BYTES = 1 << 20  # a data dictionary is a page or two of markdown


def read_text(world: World, file: str) -> str:
    """A text document of the observed files (a data dictionary)."""
    path = world.path / "observed" / file
    try:
        with path.open("rb") as f:
            data = f.read(MAX_DOCUMENT_BYTES + 1)
        if len(data) > MAX_DOCUMENT_BYTES:
            raise WorldFormatError(f"observed/{file}: larger than {MAX_DOCUMENT_BYTES} bytes")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorldFormatError(f"observed/{file}: unreadable document ({type(exc).__name__})") from None


def key_to_int(expr: pl.Expr) -> pl.Expr:
    """R-0012, r12, RES_012, 12 -> 12: systems disagree on prefixes and padding, never on the number."""
    return expr.cast(pl.String).str.extract(r"(\d+)\s*$").cast(pl.Int64)


KEY_SAMPLE = 1024  # a key column's first rows show whether its keys repeat
KEY_REPEATS = 4  # keys read once per distinct key when the first rows repeat each key this often on average
INT64_MIN = -(2**63)


def key_numbers(keys: pl.Series) -> pl.Series:
    """`key_to_int` of a column (named as it), with less work: an integer key's text is its digits after an
    optional minus sign, so its number is its magnitude; a text key that repeats (a unit's key on each of
    its thousands of rows) is read once per distinct key (the regex is most of parsing a file). Keys of a
    few lengths whose digits end each at one position are read off their bytes (`trailing_digit_numbers`,
    the generator's keys); other ASCII keys that end in a digit without the regex (`_trailing_digits`)."""
    if keys.dtype == pl.Int64 and (keys.min() is None or keys.min() > INT64_MIN):  # |min| fits in an Int64
        return keys.abs()
    if keys.dtype == pl.String and (numbers := trailing_digit_numbers(keys)) is not None:
        return numbers
    sample = keys.head(KEY_SAMPLE)
    if keys.dtype == pl.String and sample.n_unique() * KEY_REPEATS <= sample.len():
        try:
            distinct = keys.unique()
            numbers = _trailing_digits(distinct)
            if numbers is None:
                numbers = distinct.to_frame().select(key_to_int(pl.col(keys.name))).to_series()
            found = pl.DataFrame({keys.name: distinct, "number": numbers})
            on_rows = keys.to_frame().join(found, on=keys.name, how="left", maintain_order="left", nulls_equal=True)
            return on_rows["number"].alias(keys.name)
        except pl.exceptions.PolarsError:  # a key too large for a number: raised below, worded as for every row
            pass
    if keys.dtype == pl.String and (numbers := _trailing_digits(keys)) is not None:
        return numbers
    return keys.to_frame().select(key_to_int(pl.col(keys.name))).to_series()


def _trailing_digits(keys: pl.Series) -> pl.Series | None:
    """`key_to_int` of a text column whose keys are all ASCII and end in a digit: the number of the digits at
    the end (what the regex captures: before them is no digit, after them no space), found by a search
    anchored at the end instead of an extraction; None for any other column, or one whose digits do not fit
    a number (the regex reading words the error)."""
    key = pl.col(keys.name)
    frame = keys.to_frame().select(key, start=key.str.find("[0-9]+$"), ascii=key.str.len_bytes() == key.str.len_chars())
    if frame["start"].null_count() != keys.null_count() or not frame["ascii"].all():
        return None
    try:
        return frame.select(key.str.slice(pl.col("start")).cast(pl.Int64)).to_series()
    except pl.exceptions.PolarsError:
        return None


def parse_time(frame: pl.DataFrame, column: str, style: str, start: dt.date, seconds: bool) -> pl.Expr:
    """A date or timestamp column -> days (or seconds) since the timeline start."""
    dtype = frame.schema[column]
    col = pl.col(column)
    if dtype == pl.Date:
        stamp = col.cast(pl.Datetime("us"))
    elif isinstance(dtype, pl.Datetime):
        stamp = col.cast(pl.Datetime("us"))
    else:
        fmt = DATE_STYLES[style] + (TIME_SUFFIX if seconds else "")
        stamp = col.cast(pl.String).str.strptime(pl.Datetime("us"), fmt, strict=False, cache=False)  # same values
    delta = stamp - _origin(start)
    return delta.dt.total_seconds() if seconds else delta.dt.total_days()


@functools.lru_cache(maxsize=64)
def _origin(start: dt.date) -> pl.Expr:
    """The timeline's first midnight as a literal, made once per start (a datetime literal costs ~50 us,
    and a world's audit parses a few hundred time columns, all from one start)."""
    return pl.lit(dt.datetime.combine(start, dt.time()))


def normalise(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())

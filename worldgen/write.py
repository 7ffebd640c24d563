"""The write stage: a world directory (contract, ledger, canonical X, projection record, observed E, manifest)
and the writers it uses, all byte-deterministic.

XLSX is a zip whose entries carry wall-clock times and whose core properties carry a creation date, so it
is written through openpyxl into memory and re-zipped with fixed timestamps.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import io
import json
import math
import re
import zipfile
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring, encode_basestring_ascii  # json.dumps' text encoders
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree.ElementTree import _escape_cdata  # what openpyxl's XML writer escapes text with

import numpy as np
import polars as pl
from openpyxl import Workbook
from openpyxl.cell.cell import ERROR_CODES, ILLEGAL_CHARACTERS_RE
from openpyxl.utils import get_column_letter
from openpyxl.utils.datetime import to_excel
from openpyxl.workbook.child import INVALID_TITLE_REGEX
from openpyxl.writer.excel import ExcelWriter
from openpyxl.xml.functions import Element, tostring

from contracts.hashing import column_sha256, file_sha256
from contracts.model import SCHEMA_VERSION, Contract
from worldgen.observe import text_series

if TYPE_CHECKING:
    from contracts.audit import AuditReport
    from worldgen.canonical import CanonicalState
    from worldgen.observe import DefectSettings, ObservedFile
    from worldgen.seeding import Streams

FIXED_TIME = dt.datetime(2000, 1, 1)
ZIP_TIME = (2000, 1, 1, 0, 0, 0)


def dump_json(path: Path, payload: Any, indent: int | None = 2) -> None:
    path.write_text(json_text(payload, indent) + "\n", encoding="utf-8")


def json_text(payload: Any, indent: int | None, ensure_ascii: bool = False) -> str:
    """`json.dumps(payload, indent=indent, ensure_ascii=ensure_ascii)`. The standard library indents through
    its pure-Python encoder, a generator a value; plain JSON values (dicts with text keys, lists, tuples, text,
    numbers, booleans, None) are written here in the same layout at ~60% of its CPU (0.8 against 1.35 ms
    for a contract), anything else by json.dumps itself."""
    if indent is None:
        return json.dumps(payload, ensure_ascii=ensure_ascii)
    out: list[str] = []
    try:
        _put_json(payload, out, "\n", " " * indent, encode_basestring_ascii if ensure_ascii else encode_basestring)
    except (_NotPlainJson, RecursionError):  # a circular payload: json.dumps says so (ValueError)
        return json.dumps(payload, indent=indent, ensure_ascii=ensure_ascii)
    return "".join(out)


class _NotPlainJson(Exception):
    """A value `_put_json` leaves to json.dumps (a key not text, or a type JSON does not have)."""


def _put_json(value: Any, out: list[str], newline: str, step: str, encode: Callable[[str], str]) -> None:
    """`value` as json.dumps writes it indented, its nested lines starting `newline` + `step`, texts written
    by `encode` (json's own text encoder for its ensure_ascii)."""
    if isinstance(value, str):
        out.append(encode(value))
    elif value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(_json_float(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + step
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotPlainJson
            out.append(separator + encode(key) + ": ")
            _put_json(item, out, inner, step, encode)
            separator = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + step
        separator = "[" + inner
        for item in value:
            out.append(separator)
            _put_json(item, out, inner, step, encode)
            separator = "," + inner
        out.append(newline + "]")
    else:
        raise _NotPlainJson


def _json_float(value: float) -> str:
    """A float as json.dumps writes it (allow_nan: NaN and infinities by their JavaScript names)."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def jsonl_text(records: list[dict]) -> str:
    """One compact JSON record a line."""
    return "".join(json.dumps(r, sort_keys=False, ensure_ascii=False) + "\n" for r in records)


# zstd's fastest level: the worlds' parquet files come out within 0.2% of level 3's size (polars' default)
# and are written in 22% less time (36.4 -> 28.5 ms of CPU a default world; read as fast).
PARQUET_ZSTD_LEVEL = 1


def write_parquet(df: pl.DataFrame, path: Path | io.BytesIO) -> None:
    df.write_parquet(path, compression="zstd", compression_level=PARQUET_ZSTD_LEVEL, statistics=True)


def _write_parquet_hashed(df: pl.DataFrame, path: Path, digests: _Digests) -> None:
    """`write_parquet`, through memory: polars writes a parquet file into a buffer for less CPU than into a file
    (0.15-0.3 ms less a file, most of a small table's cost), and the bytes are hashed there, not read back."""
    buffer = io.BytesIO()
    write_parquet(df, buffer)
    digests.write(path, buffer.getbuffer())


def write_observed(
    df: pl.DataFrame,
    path: Path,
    fmt: str,
    system_label: str,
    sheets_by: str | None = None,
    digests: _Digests | None = None,
) -> None:
    """Write one observed file in its system's format (`digests`: where to keep the hash of a file whose bytes
    were in memory anyway)."""
    match fmt:
        case "csv":
            df.write_csv(path)
        case "parquet" if digests is not None:
            _write_parquet_hashed(df, path, digests)
        case "parquet":
            write_parquet(df, path)
        case "jsonl":
            df.write_ndjson(path)
        case "json":  # an export envelope around the records, as business APIs ship them
            header = json.dumps({"system": system_label, "record_count": df.height})[:-1]
            with path.open("wb") as f:  # polars writes its UTF-8 bytes straight in, not via a Python str
                f.write(f'{header}, "records": '.encode())
                df.write_json(f)
                f.write(b"}\n")
        case "xlsx":
            write_xlsx(df, path, sheets_by)
        case _:
            raise ValueError(f"unknown format {fmt!r}")


def write_xlsx(df: pl.DataFrame, path: Path, sheets_by: str | None) -> None:
    groups = [(str(k), g) for (k,), g in df.group_by(sheets_by, maintain_order=True)] if sheets_by else [("data", df)]
    groups = sorted(groups, key=lambda kg: kg[0])
    # openpyxl spends ~40 us a cell and ~20 ms a workbook around them. The sheets' rows are serialised here
    # instead, as openpyxl writes them (the tests compare the bytes on random frames), and every other part
    # of the package is openpyxl's own: from a workbook it wrote once per process with as many sheets and the
    # same date styles registered in the same order, the titles put in as openpyxl's XML writer escapes
    # them. A value this serialiser does not cover, a title openpyxl would refuse or rename, no sheet or no
    # column: openpyxl writes everything.
    sheets = _SheetRows.of(groups)
    titles = [name[:31] for name, _ in groups]
    if not sheets or not _plain_titles(titles) or not all(group.width for _, group in groups):
        return write_xlsx_openpyxl(groups, path)
    rows = [sheet.rows() for sheet in sheets]
    data, workbook, around = _template(len(groups), tuple(sheets[0].styles))
    replace = {}
    for k, title in enumerate(titles):
        placeholder = f'name="{_PLACEHOLDER.format(k)}"'.encode()
        if rows[k] is None or workbook.count(placeholder) != 1:
            return write_xlsx_openpyxl(groups, path)
        workbook = workbook.replace(placeholder, b'name="' + _title_attribute(title) + b'"')
        before, after = around[k]
        replace[f"xl/worksheets/sheet{k + 1}.xml"] = before + "".join(rows[k]).encode() + after
    replace["xl/workbook.xml"] = workbook
    _rezip_deterministic(data, path, replace)


_PLACEHOLDER = "wgsheet{}"  # the template's sheet titles, each replaced by a file's own
_TEMPORAL_SAMPLES = {dt.date: dt.date(2000, 1, 1), dt.datetime: dt.datetime(2000, 1, 1)}


@functools.cache
def _template(n_sheets: int, styles: tuple[type, ...]) -> tuple[bytes, bytes, tuple[tuple[bytes, bytes], ...]]:
    """openpyxl's workbook with `n_sheets` placeholder-titled sheets and the date `styles` registered in this
    order (stored, as `_saved` gives it), its workbook.xml, and each sheet's XML before and after its rows."""
    wb = Workbook(write_only=True)
    wb.properties.created = wb.properties.modified = FIXED_TIME
    for k in range(n_sheets):
        ws = wb.create_sheet(title=_PLACEHOLDER.format(k))
        ws.append([_TEMPORAL_SAMPLES[kind] for kind in styles] if k == 0 and styles else ["h"])
    data = _saved(wb)
    around = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for k in range(n_sheets):
            content = z.read(f"xl/worksheets/sheet{k + 1}.xml")
            found = _SHEET_DATA.search(content)
            if found is None:
                raise RuntimeError("openpyxl wrote a worksheet without <sheetData>")
            around.append((content[: found.start(1)], content[found.end(1) :]))
        workbook = z.read("xl/workbook.xml")
    return data, workbook, tuple(around)


def _plain_titles(titles: list[str]) -> bool:
    """Titles openpyxl keeps as they are: not empty, no character it refuses, none equal but for case."""
    if any(not t or INVALID_TITLE_REGEX.search(t) or ILLEGAL_CHARACTERS_RE.search(t) for t in titles):
        return False
    return len({t.lower() for t in titles}) == len(titles)


def _title_attribute(title: str) -> bytes:
    """A sheet title escaped as openpyxl's XML writer writes workbook.xml's name attributes."""
    raw = tostring(Element("sheet", name=title))
    return raw[raw.index(b'"') + 1 : raw.rindex(b'"')]


def write_xlsx_openpyxl(groups: list[tuple[str, pl.DataFrame]], path: Path) -> None:
    """Every cell through openpyxl (the reference the serialiser must match byte for byte)."""
    wb = Workbook(write_only=True)
    wb.properties.created = wb.properties.modified = FIXED_TIME
    for name, group in groups:
        ws = wb.create_sheet(title=name[:31])
        ws.append(group.columns)
        for row in group.iter_rows():
            ws.append(list(row))
    _rezip_deterministic(_saved(wb), path)


def _saved(wb: Workbook) -> bytes:
    """The workbook as openpyxl's `Workbook.save` writes it, but stored uncompressed: it is only read back and
    re-zipped (deflating it twice and inflating it once cost more than the rows do)."""
    if not wb.worksheets:  # as Workbook.save does: a workbook has at least one sheet
        wb.create_sheet()
    buffer = io.BytesIO()
    ExcelWriter(wb, zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True)).save()
    return buffer.getvalue()


_ERROR_CODES = frozenset(ERROR_CODES)
_SHEET_DATA = re.compile(rb"<sheetData>(.*)</sheetData>", re.DOTALL)


class _SheetRows:
    """One sheet's <sheetData> serialised as openpyxl's write-only worksheet does it, for the value types
    our observed files hold (text, integers, finite floats, dates, naive datetimes, blanks)."""

    def __init__(self, frame: pl.DataFrame, styles: dict[type, int]):
        self.frame, self.styles = frame, styles

    @staticmethod
    def of(groups: list[tuple[str, pl.DataFrame]]) -> list[_SheetRows] | None:
        """Each sheet's serialiser, or None if some column is of a type it does not cover."""
        allowed = (pl.String, pl.Float64, pl.Float32, pl.Int64, pl.Int32, pl.Int16, pl.Int8, pl.Date, pl.Null)
        allowed += (pl.UInt8, pl.UInt16, pl.UInt32, pl.UInt64)
        for _, group in groups:
            for dtype in group.schema.values():
                if not (dtype in allowed or (dtype == pl.Datetime and dtype.time_zone is None)):
                    return None
        styles: dict[type, int] = {}  # date style ids, in the order openpyxl meets them (sheets, rows, columns)
        firsts = []
        for k, (_, group) in enumerate(groups):
            for j, (column, dtype) in enumerate(group.schema.items()):
                if dtype in (pl.Date, pl.Datetime) and group[column].is_not_null().any():
                    kind = dt.date if dtype == pl.Date else dt.datetime
                    firsts.append(((k, int(group[column].is_not_null().arg_max()), j), kind))
        for _, kind in sorted(firsts, key=lambda f: f[0]):
            styles.setdefault(kind, len(styles) + 1)
        return [_SheetRows(group, styles) for _, group in groups]

    def rows(self) -> list[str] | None:
        """The <sheetData> rows, header first, as openpyxl writes them; None if a value needs openpyxl (a
        formula, an error code, a character Excel refuses, a NaN or infinite float). Built a column at a
        time, so that the type is looked at once per column rather than once per cell."""
        columns = []
        for j, name in enumerate(self.frame.columns):
            letter = get_column_letter(j + 1)
            header, cells = _text_cell(f"{letter}1", name), self._cells(letter, self.frame[name])
            if header is None or cells is None:
                return None
            columns.append([header, *cells])
        if not columns:
            return ['<row r="1"></row>']
        rows = zip(*columns, strict=True)
        return [f'<row r="{i}">{"".join(cells)}</row>' for i, cells in enumerate(rows, start=1)]

    def _cells(self, letter: str, series: pl.Series) -> list[str] | None:
        """One column's data cells ("" for a blank), as openpyxl writes them (numbers as safe_string's "%.16g"
        gives them, dates as Excel serials in their style); None if a value needs openpyxl."""
        values = series.to_list()
        refs = [f"{letter}{i}" for i in range(2, len(values) + 2)]
        dtype = series.dtype
        if dtype == pl.String:
            cells = [_text_cell(ref, v) if v is not None else "" for ref, v in zip(refs, values, strict=True)]
            return None if None in cells else cells
        if dtype == pl.Date or dtype == pl.Datetime:
            style = self.styles.get(dt.date if dtype == pl.Date else dt.datetime)
            return [
                f'<c r="{ref}" s="{style}" t="n"><v>{to_excel(v):.16g}</v></c>' if v is not None else ""
                for ref, v in zip(refs, values, strict=True)
            ]
        if dtype.is_float() and not all(math.isfinite(v) for v in values if v is not None):
            return None
        return [
            f'<c r="{ref}" t="n"><v>{v:.16g}</v></c>' if v is not None else ""
            for ref, v in zip(refs, values, strict=True)
        ]


def _text_cell(ref: str, value: str) -> str | None:
    """A text cell as openpyxl writes it inline; None for what openpyxl would treat otherwise."""
    text = value[:32767]
    if (len(text) > 1 and text[0] == "=") or text in _ERROR_CODES or ILLEGAL_CHARACTERS_RE.search(text):
        return None
    if text == "":
        return f'<c r="{ref}" t="inlineStr" />'
    stripped = text.strip()
    space = ' xml:space="preserve"' if stripped and text != stripped else ""
    return f'<c r="{ref}" t="inlineStr"><is><t{space}>{_escape_cdata(text)}</t></is></c>'


def _rezip_deterministic(data: bytes, path: Path, replace: dict[str, bytes] | None = None) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            content = (replace or {}).get(info.filename) or src.read(info.filename)
            if info.filename == "docProps/core.xml":  # openpyxl stamps the save time here
                content = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>2000-01-01T00:00:00Z", content)
            fixed = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            fixed.compress_type = zipfile.ZIP_DEFLATED
            fixed.external_attr = 0o600 << 16
            dst.writestr(fixed, content)


def write_world(
    root: Path,
    contract: Contract,
    state: CanonicalState,
    observed: list[ObservedFile],
    streams: Streams,
    settings: DefectSettings,
) -> dict:
    """Write every file of a world under `root`; return its manifest entry."""
    (root / "canonical").mkdir(parents=True)
    (root / "observed").mkdir()
    (root / "tasks").mkdir()
    # The projection step and the manifest both hash the observed files: once is enough; and a file whose bytes
    # were in memory is hashed from them, not read back.
    digest = _Digests()
    digest.write_text(root / "contract.json", json_text(contract.model_dump(mode="json"), 2) + "\n")
    for table, columns in state.tables.items():
        _write_parquet_hashed(canonical_frame(columns), root / "canonical" / f"{table}.parquet", digest)
    projection = {
        "schema_version": SCHEMA_VERSION,
        "world_id": contract.world_id,
        "settings": {"defect_scale": settings.scale},
        "seed": streams.record("defects"),
        "files": [],
    }
    for f in observed:
        d = f.deliverable
        sheets_by = next((c.name for c in d.columns if c.source == "units.region"), None) if d.sheets else None
        write_observed(f.rendered(contract), root / "observed" / d.file, d.format, d.system, sheets_by, digest)
        conventions = {c.name: {"source": c.source, "format": c.format} for c in d.columns if c.format}
        projection["files"].append(
            {
                "file": d.file,
                "system": d.system,
                "rows_clean": f.clean.height,
                "rows_observed": f.frame.height,
                "order": f.order,
                "conventions": conventions,
                "defects": f.records,
            }
        )
    for d in contract.deliverables:
        if d.grain == "dictionary":
            digest.write_text(root / "observed" / d.file, data_dictionary(contract, d.system))
    # row lists make an indented file huge
    digest.write_text(root / "projection.json", json_text(projection, None) + "\n")
    ledger = state.ledger + [_projection_step(root, contract, state, observed, streams, digest)]
    digest.write_text(root / "ledger.jsonl", jsonl_text(ledger))
    dump_json(root / "world.json", _manifest(root, contract, state, digest))
    return {
        "world_id": contract.world_id,
        "seed": contract.seed,
        "index": contract.index,
        "domain": contract.domain,
        "status": "built",
    }


def canonical_frame(columns: Mapping[str, np.ndarray]) -> pl.DataFrame:
    """`pl.DataFrame(dict(columns), strict=False)`, a frozen text column taken as the projection converted it
    (`text_series`: the same texts, converted once)."""
    return pl.DataFrame(
        {name: text if (text := text_series(values)) is not None else values for name, values in columns.items()},
        strict=False,
    )


class _Digests(dict):
    """sha256 of files already complete (none is written again before world.json): each read once, or kept
    from the bytes `write` wrote."""

    def __call__(self, path: Path) -> str:
        if path not in self:
            self[path] = file_sha256(path)
        return self[path]

    def write(self, path: Path, data: bytes | memoryview) -> None:
        """Write `data` as the file `path` and keep its sha256."""
        with path.open("wb") as f:
            f.write(data)
        self[path] = hashlib.sha256(data).hexdigest()

    def write_text(self, path: Path, text: str) -> None:
        """`path.write_text(text, encoding="utf-8")` as POSIX writes it (newlines as they are), hashed."""
        self.write(path, text.encode("utf-8"))


def _manifest(root: Path, contract: Contract, state: CanonicalState, digest: _Digests) -> dict:
    """world.json: identity, sizes, and the sha256 of every file written so far."""
    return {
        "schema_version": SCHEMA_VERSION,
        "world_id": contract.world_id,
        "seed": contract.seed,
        "index": contract.index,
        "domain": contract.domain,
        "persona_id": contract.persona.id,
        "size": contract.size,
        "status": "built",
        "sizes": {e.table: e.count for e in contract.entities}
        | {
            "panel": len(state.column("panel", "day")),
            "variables": len(contract.variables),
            "edges": len(contract.edges),
            "systems": len({d.system for d in contract.deliverables}),
            "files": len(contract.deliverables),
        },
        "files": {
            path.relative_to(root).as_posix(): digest(path)
            for path in sorted(p for p in root.rglob("*") if p.is_file())
        },
    }


def _projection_step(
    root: Path,
    contract: Contract,
    state: CanonicalState,
    observed: list[ObservedFile],
    streams: Streams,
    digest: _Digests,
) -> dict:
    """The ledger's last record: X read in full, the observed files written, every defect recorded."""
    return {
        "step": len(state.ledger),
        "name": "projection",
        "variables": [],
        "seed": streams.record("defects"),
        # X as committed: a column's hash from its step (committed columns are frozen, and the auditor checks
        # canonical/ against those hashes), else hashed here.
        "inputs": {
            f"{t}.{c}": state.digests.get(f"{t}.{c}") or column_sha256(v)
            for t, cols in sorted(state.tables.items())
            for c, v in sorted(cols.items())
        },
        "outputs": {f"observed/{d.file}": digest(root / "observed" / d.file) for d in contract.deliverables},
        "rows": {f.deliverable.file: f.frame.height for f in observed},
        "checks": {"defects_recorded": sum(len(f.records) for f in observed), "canonical_unchanged": True},
    }


def record_verdict(meta_path: Path, report: AuditReport, task_ids: list[str]) -> None:
    """Stamp the audit's verdict and the task ids into world.json once the world is audited."""
    meta = json.loads(meta_path.read_text())
    meta["status"] = report.verdict
    meta["audit"] = {"verdict": report.verdict, "failing": report.failing}
    meta["tasks"] = task_ids
    dump_json(meta_path, meta)


FORMAT_WORDS = {
    "csv": "CSV",
    "xlsx": "Excel workbook",
    "parquet": "Parquet",
    "json": "JSON export",
    "jsonl": "JSON lines",
}


def data_dictionary(contract: Contract, system: str) -> str:
    """A system's data dictionary: each of its files and columns, described in its own words."""
    files = [d for d in contract.deliverables if d.system == system and d.grain != "dictionary"]
    lines = [f"# Data dictionary: {system.replace('_', ' ')}", ""]
    for d in files:
        sheets = " (one sheet per region)" if d.sheets else ""
        lines += [f"## {d.file}", "", f"{FORMAT_WORDS[d.format]}{sheets}.", "", "| column | description |", "|---|---|"]
        lines += [f"| {c.name} | {c.doc or '-'} |" for c in d.columns]
        if d.fields:
            lines += ["", f"Settings the `{d.columns[1].name}` column names:", "", "| setting | meaning |", "|---|---|"]
            lines += [f"| {f.name} | {f.doc} |" for f in d.fields]
        lines.append("")
    return "\n".join(lines)

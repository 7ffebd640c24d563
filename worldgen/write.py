"""The write stage: a world directory (contract, ledger, canonical X, projection record, observed E, manifest)
and the writers it uses, all byte-deterministic.

XLSX is a zip whose entries carry wall-clock times and whose core properties carry a creation date, so it
is written through openpyxl into memory and re-zipped with fixed timestamps.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from openpyxl import Workbook

from contracts.hashing import column_sha256, file_sha256
from contracts.model import SCHEMA_VERSION, Contract

if TYPE_CHECKING:
    from contracts.audit import AuditReport
    from worldgen.canonical import CanonicalState
    from worldgen.observe import DefectSettings, ObservedFile
    from worldgen.seeding import Streams

FIXED_TIME = dt.datetime(2000, 1, 1)
ZIP_TIME = (2000, 1, 1, 0, 0, 0)


def dump_json(path: Path, payload: Any, indent: int | None = 2) -> None:
    path.write_text(json.dumps(payload, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")


def dump_jsonl(path: Path, records: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=False, ensure_ascii=False) + "\n")


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    df.write_parquet(path, compression="zstd", statistics=True)


def write_observed(df: pl.DataFrame, path: Path, fmt: str, system_label: str, sheets_by: str | None = None) -> None:
    """Write one observed file in its system's format."""
    match fmt:
        case "csv":
            df.write_csv(path)
        case "parquet":
            write_parquet(df, path)
        case "jsonl":
            df.write_ndjson(path)
        case "json":  # an export envelope around the records, as business APIs ship them
            header = json.dumps({"system": system_label, "record_count": df.height})[:-1]
            path.write_text(f'{header}, "records": {df.write_json()}}}\n', encoding="utf-8")
        case "xlsx":
            write_xlsx(df, path, sheets_by)
        case _:
            raise ValueError(f"unknown format {fmt!r}")


def write_xlsx(df: pl.DataFrame, path: Path, sheets_by: str | None) -> None:
    wb = Workbook(write_only=True)
    wb.properties.created = wb.properties.modified = FIXED_TIME
    groups = [(str(k), g) for (k,), g in df.group_by(sheets_by, maintain_order=True)] if sheets_by else [("data", df)]
    for name, group in sorted(groups, key=lambda kg: kg[0]):
        ws = wb.create_sheet(title=name[:31])
        ws.append(group.columns)
        for row in group.iter_rows():
            ws.append(list(row))
    buffer = io.BytesIO()
    wb.save(buffer)
    _rezip_deterministic(buffer.getvalue(), path)


def _rezip_deterministic(data: bytes, path: Path) -> None:
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            content = src.read(info.filename)
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
    dump_json(root / "contract.json", contract.model_dump(mode="json"))
    for table, columns in state.tables.items():
        write_parquet(pl.DataFrame(dict(columns), strict=False), root / "canonical" / f"{table}.parquet")
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
        write_observed(f.rendered(contract), root / "observed" / d.file, d.format, d.system, sheets_by)
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
            (root / "observed" / d.file).write_text(data_dictionary(contract, d.system), encoding="utf-8")
    dump_json(root / "projection.json", projection, indent=None)  # row lists make an indented file huge
    dump_jsonl(root / "ledger.jsonl", state.ledger + [_projection_step(root, contract, state, observed, streams)])
    dump_json(root / "world.json", _manifest(root, contract, state))
    return {
        "world_id": contract.world_id,
        "seed": contract.seed,
        "index": contract.index,
        "domain": contract.domain,
        "status": "built",
    }


def _manifest(root: Path, contract: Contract, state: CanonicalState) -> dict:
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
            path.relative_to(root).as_posix(): file_sha256(path)
            for path in sorted(p for p in root.rglob("*") if p.is_file())
        },
    }


def _projection_step(
    root: Path, contract: Contract, state: CanonicalState, observed: list[ObservedFile], streams: Streams
) -> dict:
    """The ledger's last record: X read in full, the observed files written, every defect recorded."""
    return {
        "step": len(state.ledger),
        "name": "projection",
        "variables": [],
        "seed": streams.record("defects"),
        "inputs": {
            f"{t}.{c}": column_sha256(v) for t, cols in sorted(state.tables.items()) for c, v in sorted(cols.items())
        },
        "outputs": {f"observed/{d.file}": file_sha256(root / "observed" / d.file) for d in contract.deliverables},
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

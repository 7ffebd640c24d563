"""Writers: canonical Parquet, observed files in their formats, JSON records; all byte-deterministic.

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
from typing import Any

import polars as pl
from openpyxl import Workbook

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

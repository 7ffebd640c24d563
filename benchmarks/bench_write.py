"""CPU of the write stage per world against its floor: the same files written from memory by the plain writers.

    PYTHONPATH=$PWD python benchmarks/bench_write.py --worlds 0-10
    PYTHONPATH=$PWD python benchmarks/bench_write.py --worlds 0,3,7 --size small --repeats 3

For each world, synthesis runs untimed, then, in CPU-seconds (time.process_time, which counts polars'
threads too; the machine may be shared, so wall time would measure the neighbours):
- write: `write_world` as the build runs it (rendering, writers, hashes, manifest);
- floor: every file of the same world written by the plain writers from frames and records already in
  memory: json.dumps for contract/projection/ledger/world.json, polars write_parquet for the canonical
  tables, and for observed files polars write_csv / write_parquet / write_ndjson / write_json; an XLSX
  frame is written as CSV by polars (the strictest floor: no plain XLSX writer is installed, and
  openpyxl writing every cell, reported apart as `xlsx_openpyxl`, is several times slower than ours).
  No hashing, no rendering: those are work the write stage does beyond writing bytes.
- parts: where the write stage's time goes (rendering, XLSX, hashing, JSON).
The minimum over --repeats runs is kept per world (CPU time still moves with cache and memory pressure
from neighbours); the table gives the median over worlds and the write/floor ratio of the medians.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "1")  # as a build's workers run (one polars thread each)

import polars as pl  # noqa: E402

import contracts.hashing as hashing  # noqa: E402
import worldgen.write as W  # noqa: E402
from personas import builtin_personas  # noqa: E402
from worldgen.build import persona_for  # noqa: E402
from worldgen.contract import WorldSpec  # noqa: E402
from worldgen.observe import DefectSettings, ObservedFile  # noqa: E402
from worldgen.packs import get_pack  # noqa: E402
from worldgen.pipeline import synthesize  # noqa: E402
from worldgen.seeding import Streams  # noqa: E402

PLAIN = {
    "csv": lambda df, path: df.write_csv(path),
    "xlsx": lambda df, path: df.write_csv(path),  # see the module docstring
    "parquet": lambda df, path: df.write_parquet(path, compression="zstd", statistics=True),
    "jsonl": lambda df, path: df.write_ndjson(path),
    "json": lambda df, path: path.write_text(df.write_json()),
}


def _indices(spec: str) -> list[int]:
    if "-" in spec:
        lo, hi = map(int, spec.split("-"))
        return list(range(lo, hi))
    return [int(x) for x in spec.split(",")]


class Parts:
    """CPU-seconds of named functions of the write stage, accumulated while `active`."""

    def __init__(self) -> None:
        self.seconds: collections.Counter = collections.Counter()
        self.active = False

    def wrap(self, owner, attr: str, name: str) -> None:
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def timed(*args, **kwargs):
            if not self.active:
                return fn(*args, **kwargs)
            self.active = False  # no double counting of nested parts
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.process_time() - start
                self.active = True

        setattr(owner, attr, timed)


def _instrument() -> Parts:
    parts = Parts()
    parts.wrap(ObservedFile, "rendered", "render")
    parts.wrap(W, "write_xlsx", "xlsx")
    parts.wrap(W, "write_parquet", "parquet")
    parts.wrap(W, "_write_parquet_hashed", "parquet")  # (with the hash of the bytes it wrote)
    parts.wrap(W, "dump_json", "json")
    parts.wrap(W._Digests, "write_text", "json")  # contract, projection, ledger, dictionaries (hashed in memory)
    parts.wrap(hashing, "file_sha256", "hash_files")
    parts.wrap(hashing, "column_sha256", "hash_columns")
    for name in ("file_sha256", "column_sha256"):  # write.py holds its own references
        if hasattr(W, name):
            parts.wrap(W, name, "hash_files" if name == "file_sha256" else "hash_columns")
    return parts


def write_once(root: Path, contract, state, observed, k: int, parts: Parts) -> float:
    shutil.rmtree(root, ignore_errors=True)
    parts.active = True
    start = time.process_time()
    W.write_world(root, contract, state, observed, Streams(0, k), DefectSettings())
    seconds = time.process_time() - start
    parts.active = False
    return seconds


def floor_once(root: Path, contract, state, rendered: list[tuple[str, str, pl.DataFrame]], texts: dict) -> float:
    """The same world's files from memory by the plain writers (see the module docstring)."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "canonical").mkdir(parents=True)
    (root / "observed").mkdir()
    start = time.process_time()
    for name, payload in texts.items():
        (root / name).write_text(payload(), encoding="utf-8")
    for table, columns in state.tables.items():
        pl.DataFrame(dict(columns), strict=False).write_parquet(root / "canonical" / f"{table}.parquet")
    for file, fmt, df in rendered:
        PLAIN[fmt](df, root / "observed" / file)
    return time.process_time() - start


def _texts(world: Path) -> dict:
    """The JSON files of a written world, re-serialised by json.dumps from their parsed records."""
    contract = json.loads((world / "contract.json").read_text())
    projection = json.loads((world / "projection.json").read_text())
    ledger = [json.loads(line) for line in (world / "ledger.jsonl").read_text().splitlines()]
    manifest = json.loads((world / "world.json").read_text())
    dictionaries = {f"observed/{p.name}": p.read_text() for p in (world / "observed").glob("*.md")}
    return {
        "contract.json": lambda: json.dumps(contract, indent=2, ensure_ascii=False),
        "projection.json": lambda: json.dumps(projection, ensure_ascii=False),
        "ledger.jsonl": lambda: "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ledger),
        "world.json": lambda: json.dumps(manifest, indent=2, ensure_ascii=False),
        **{name: (lambda text=text: text) for name, text in dictionaries.items()},
    }


def _xlsx_openpyxl(observed, contract, root: Path) -> float:
    seconds = 0.0
    for f in observed:
        d = f.deliverable
        if d.format != "xlsx":
            continue
        df = f.rendered(contract)
        by = next((c.name for c in d.columns if c.source == "units.region"), None) if d.sheets else None
        groups = [(str(g), fr) for (g,), fr in df.group_by(by, maintain_order=True)] if by else [("data", df)]
        start = time.process_time()
        W.write_xlsx_openpyxl(sorted(groups, key=lambda kg: kg[0]), root / "x.xlsx")
        seconds += time.process_time() - start
    return seconds


def bench_world(k: int, size: str, repeats: int, scratch: Path, parts: Parts) -> dict:
    pool = sorted(builtin_personas(), key=lambda p: p.id)
    persona = persona_for(0, k, pool)
    world = WorldSpec(seed=0, index=k, size=size, persona=persona)
    contract, state, observed = synthesize(world, get_pack(persona.domain), DefectSettings())
    before = collections.Counter(parts.seconds)
    writes = [write_once(scratch / "ours", contract, state, observed, k, parts) for _ in range(repeats)]
    for key in parts.seconds:
        parts.seconds[key] = before[key] + (parts.seconds[key] - before[key]) / repeats
    rendered = [(f.deliverable.file, f.deliverable.format, f.rendered(contract)) for f in observed]
    texts = _texts(scratch / "ours")
    floors = [floor_once(scratch / "floor", contract, state, rendered, texts) for _ in range(repeats)]
    parts.seconds["xlsx_openpyxl"] += _xlsx_openpyxl(observed, contract, scratch)
    return {"world": k, "write": min(writes), "floor": min(floors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", default="0-10", help="world indices of seed 0: a-b (half-open) or a,b,c")
    parser.add_argument("--size", default="default")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    indices = _indices(args.worlds)
    parts = _instrument()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ws-bench-write-") as tmp:
        for k in indices:
            row = bench_world(k, args.size, args.repeats, Path(tmp), parts)
            rows.append(row)
            print(
                f"world {k:4d}  write {row['write']:.3f}  floor {row['floor']:.3f}  x{row['write'] / row['floor']:.2f}"
            )
    write = statistics.median(r["write"] for r in rows)
    floor = statistics.median(r["floor"] for r in rows)
    print(f"median CPU-s/world: write {write:.3f}  floor {floor:.3f}  ratio {write / floor:.2f}")
    print(
        f"mean   CPU-s/world: write {statistics.mean(r['write'] for r in rows):.3f}  "
        f"floor {statistics.mean(r['floor'] for r in rows):.3f}"
    )
    print("write stage parts, mean CPU-s/world:")
    for name, seconds in parts.seconds.most_common():
        print(f"  {name:14s} {seconds / len(rows):.4f}")


if __name__ == "__main__":
    main()

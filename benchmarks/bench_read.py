"""CPU time of the auditor's readers of observed files, and whether each gives the plain reader's frame.

    python benchmarks/bench_read.py /tmp/build                 # CPU-ms per file and per world, by format
    python benchmarks/bench_read.py /tmp/build --check         # and each frame equals the plain reading's

The plain readings are what the auditor's readers stand for: `pl.read_csv(infer_schema_length=None)`,
`pl.read_ndjson(infer_schema_length=None)`, and for a JSON envelope the stdlib parser (`contracts.safeio.loads`)
then `pl.DataFrame(records, infer_schema_length=None)`. With `--check` each file is read both ways and the
frames compared (schema, then values with nulls equal); a file the plain reading refuses must be refused too.
"""

from __future__ import annotations

import os

# One thread per library before numpy or polars start: CPU time then measures the work, not the spinning.
for _name in ("POLARS_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import collections  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402

# The auditor of this checkout (an editable install may point at another one).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from auditors.worldio import read_csv, read_json_envelope, read_ndjson  # noqa: E402
from contracts.safeio import loads  # noqa: E402

READERS = {
    "csv": (read_csv, lambda path: pl.read_csv(path, infer_schema_length=None)),
    "jsonl": (read_ndjson, lambda path: pl.read_ndjson(path, infer_schema_length=None)),
    "json": (
        lambda path: read_json_envelope(path.read_bytes(), where=path.name),
        lambda path: pl.DataFrame(loads(path.read_bytes(), where=path.name)["records"], infer_schema_length=None),
    ),
}


def _worlds(build: Path) -> list[Path]:
    root = build / "worlds" if (build / "worlds").is_dir() else build
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def _outcome(read, path: Path):
    try:
        return read(path)
    except Exception as exc:  # noqa: BLE001 - a refusal is an outcome to compare
        return f"{type(exc).__name__}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path, help="a build directory (holding worlds/) or a directory of worlds")
    parser.add_argument("--check", action="store_true", help="compare each frame with the plain reading's")
    args = parser.parse_args()
    worlds = _worlds(args.build)
    seconds, files, differ = collections.Counter(), collections.Counter(), []
    for world in worlds:
        for path in sorted((world / "observed").iterdir()):
            fmt = path.suffix.lstrip(".")
            if fmt not in READERS:
                continue
            fast, plain = READERS[fmt]
            start = time.process_time()
            got = _outcome(fast, path)
            seconds[fmt] += time.process_time() - start
            files[fmt] += 1
            if args.check:
                expected = _outcome(plain, path)
                same = (
                    got == expected
                    if isinstance(got, str) or isinstance(expected, str)
                    else got.schema == expected.schema and got.equals(expected, null_equal=True)
                )
                if not same:
                    differ.append(f"{world.name}/{path.name}")
    for fmt in READERS:
        if files[fmt]:
            print(
                f"{fmt}: {files[fmt]} files, {seconds[fmt] / files[fmt] * 1000:.1f} CPU-ms per file, "
                f"{seconds[fmt] / len(worlds) * 1000:.1f} per world"
            )
    if args.check:
        print(
            f"frames equal to the plain reading's: {sum(files.values()) - len(differ)}/{sum(files.values())}",
            *differ[:10],
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

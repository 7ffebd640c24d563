"""Benchmark the exports: time and size of `export bench`, `export check` and `export pool`, and the bench's
composition (worlds per domain, systems and files per task).

    python benchmarks/bench_export.py --build output/          # an existing build (200 default worlds: ~3 min)
    python benchmarks/bench_export.py --n 200 --workers 2      # or build one first into a temporary directory

Each command runs as the installed `worldgen` in a child process. Size is reported twice: the bytes of every
file (what an upload or a tar without hard links carries) and the disk used (a world's two tasks share
hard-linked data files).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))


def timed(*args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children): CPU time is robust to a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([WORLDGEN, *args], check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def sizes(root: Path) -> tuple[int, int, int]:
    """(files, bytes of every file, bytes on disk counting each inode once)."""
    files, apparent, inodes = 0, 0, {}
    for path in root.rglob("*"):
        if path.is_file():
            stat = path.stat()
            files += 1
            apparent += stat.st_size
            inodes[(stat.st_dev, stat.st_ino)] = stat.st_blocks * 512
    return files, apparent, sum(inodes.values())


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help="an existing build directory")
    parser.add_argument("--n", type=int, default=200, help="worlds to build when --build is not given")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worlds", type=int, default=50, help="bench worlds (default 50)")
    parser.add_argument("--formats", default="verl,jsonl", help="pool formats to time (default verl,jsonl)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="wg-export-bench-"))
    build = args.build
    if build is None:
        build = scratch / "build"
        seconds, _ = timed(
            "build",
            "--n",
            str(args.n),
            "--seed",
            str(args.seed),
            "--workers",
            str(args.workers),
            "--out",
            str(build),
            "--quiet",
        )
        print(f"built {args.n} default worlds in {seconds:.0f}s")
    n_worlds = sum(1 for _ in (build / "worlds").iterdir())
    load = os.getloadavg()[0]
    bench = scratch / "bench"
    rows = []
    seconds, cpu = timed(
        "export",
        "bench",
        "--from",
        str(build),
        "--out",
        str(bench),
        "--worlds",
        str(args.worlds),
        "--seed",
        str(args.seed),
    )
    files, apparent, disk = sizes(bench)
    rows.append(["export bench", f"{seconds:.1f}", f"{cpu:.1f}", files, mib(apparent), mib(disk)])
    seconds, cpu = timed("export", "check", str(bench))
    rows.append(["export check", f"{seconds:.1f}", f"{cpu:.1f}", "", "", ""])
    for fmt in args.formats.split(","):
        pool = scratch / f"pool-{fmt}"
        seconds, cpu = timed(
            "export", "pool", "--from", str(build), "--out", str(pool), "--format", fmt, "--exclude", str(bench)
        )
        files, apparent, disk = sizes(pool)
        rows.append([f"export pool --format {fmt}", f"{seconds:.1f}", f"{cpu:.1f}", files, mib(apparent), mib(disk)])
    manifest = json.loads((bench / "sample_manifest.json").read_text())
    pool_rows = json.loads((scratch / f"pool-{args.formats.split(',')[0]}" / "pool.json").read_text())["rows"]

    print(
        f"\nbuild: {build} ({n_worlds} worlds); bench: {len(manifest)} tasks; pool: {pool_rows} rows; cores: {os.cpu_count()}\n"
    )
    print(f"load average before the exports: {load:.1f} (wall time grows with it; CPU time hardly does)\n")
    print("| command | wall s | CPU s | files | MiB (all files) | MiB on disk |\n|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")
    domains = Counter(r["domain"] for r in manifest if r["kind"] == "cause")
    print("\n| domain | bench worlds |\n|---|---|")
    for domain, count in sorted(domains.items()):
        print(f"| {domain} | {count} |")
    print("\n| per bench task | mean | min | max |\n|---|---|---|---|")
    for key, label in (
        ("systems", "business systems in the environment"),
        ("files", "files in the environment"),
        ("task_systems", "systems the question needs"),
        ("task_files", "files the question needs"),
        ("rubric_items", "rubric items"),
        ("difficulty", "difficulty (layer)"),
    ):
        values = [r[key] for r in manifest]
        print(f"| {label} | {statistics.mean(values):.2f} | {min(values)} | {max(values)} |")
    print(f"\nscratch directory (delete when done): {scratch}")


if __name__ == "__main__":
    main()

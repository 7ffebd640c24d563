"""`worldgen build`: many worlds, in parallel, resumable, each committed atomically, into a directory we own.

World k depends only on (seed, k, size, persona pool, defect settings), never on N, the worker count, the
order in which workers finish, interrupts or resumes.

The output directory is the user's disk, so the build follows four rules:

- **Ownership.** `build.json` marks a directory as a worldgen build (format and version) and pins its
  settings. A non-empty directory without it is refused untouched. Inside a build we only delete or rewrite
  what we can prove we created: `worlds/.tmp-<world id of this build>`, our manifest, our lock file.
  A world directory that is not a finished world of *this* build is refused, never adopted.
- **Check, then write.** Every check (flags, personas, the directory, every finished world) runs read-only
  before the first byte is written, and again under the lock.
- **One builder at a time.** An exclusive `flock` on `build.lock` inside the directory; a second build
  into it is refused at once, naming the holder's pid.
- **Whole worlds only.** The manifest is rebuilt from the committed worlds' own `world.json` files, so
  a resumed, interrupted or parallel build writes the same bytes as an uninterrupted one. SIGINT, SIGTERM
  and SIGHUP stop the build: no new world is handed out, the in-flight ones are dropped (their `.tmp-`
  directories removed), the manifest lists exactly the committed worlds. Workers die with their parent
  (PR_SET_PDEATHSIG on Linux, and a watchdog thread polling the parent pid everywhere).

Where worlds are built is a seam: in this process, in spawned local worker processes (`--workers`, default
every core this process may run on), or as Ray tasks (`--executor ray`, `worldgen.executors.RayPool`) that
return each world's files as bytes. Either way this module keeps the lock, the checks, resume, the atomic
commit of each world and the manifest.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import gc
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import stat
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import NamedTuple

from contracts import kernels
from contracts.errors import BuildError, BuildInterrupted, InputError, WorldFormatError, did_you_mean
from contracts.model import SCHEMA_VERSION, Persona
from contracts.safeio import KIB, MIB, atomic_write, iter_jsonl, kind_of, lstat_or_none, one_line, read_json
from personas import builtin_personas, check_against_packs, load_persona_file
from worldgen.contract import SIZES, WorldSpec
from worldgen.observe import DefectSettings
from worldgen.packs import builtin_domains, builtin_packs, get_pack
from worldgen.pipeline import build_world
from worldgen.seeding import check_seed, rng_for

BUILD_FORMAT = "worldgen-build"  # build.json's marker: this directory was created by `worldgen build`
BUILD_FORMAT_VERSION = 1
BUILD_FILE = "build.json"
LOCK_FILE = "build.lock"
PLACEHOLDER_NAMES = frozenset({".keep", ".gitkeep"})  # empty files a repository keeps to hold an empty directory
MANIFEST_FILE = "manifest.jsonl"
TIMINGS_FILE = "timings.jsonl"
WORLDS_DIR = "worlds"
LEGACY_BUILD_KEYS = frozenset({"schema_version", "seed", "size", "domains", "personas_sha256", "defect_scale"})

MAX_N = 10_000_000  # ~4 months of building at 1 world/s; a larger --n is a typo, and its plan would not fit in memory
MAX_WORKERS = 256  # local worker processes
MAX_RAY_WORKERS = 100_000  # Ray tasks at once (--executor ray): a cluster, not this machine
MAX_BUILD_JSON_BYTES = 64 * KIB  # ours is ~300 bytes
MAX_WORLD_JSON_BYTES = 16 * MIB  # ours is ~3 KiB
MAX_MANIFEST_BYTES = 4 << 30  # 10^7 entries of ~200 bytes
# Peak RSS of one worker building and auditing worlds, the largest seen (benchmarks/bench_build.py, 2026-12-02,
# on two machines: small 414 MiB over 1,000 worlds, default 656 over 1,000, large 1,969 over 200), rounded up
# by ~20%: K workers need about K times this, more than the machine's physical memory is refused before
# anything is built, and a Ray task asks for it. A longer build meets bigger worlds, so the peak creeps up with n
# (default: 633 MiB over 200 worlds, 651 over 1,000) while a worker's memory does not grow world to world.
WORKER_PEAK_MIB = {"small": 500, "default": 800, "large": 2400}
# Address-space cap of a worker process: ~3x the largest world's virtual peak (2.4 GiB at --size large), so a
# runaway world fails with one line instead of taking the machine down. Workers only, never the caller's process.
WORKER_ADDRESS_SPACE = 8 << 30
# polars' allocator (jemalloc) in a worker: keep freed pages for 5 s instead of handing them back to the
# kernel within a fraction of a second, so that the next stage's frames reuse them instead of faulting fresh
# zeroed pages in. 10 default worlds of seed 0 (rusage of build_world in one process): page faults
# 12.8k -> 5.1k a world, system CPU 52 -> 41 ms a world, user CPU unchanged, peak RSS +25 MiB (406 -> 430).
# polars, on import, writes its own settings into the variable and appends what was there (the later wins);
# the driver has imported polars, so the variable holds polars' own settings unless the user set some.
POLARS_ALLOCATOR_KNOB = "_RJEM_MALLOC_CONF"
POLARS_ALLOCATOR_CONF = "dirty_decay_ms:5000,muzzy_decay_ms:5000"
POLARS_OWN_ALLOCATOR_CONF = "dirty_decay_ms:500,muzzy_decay_ms:1000"  # polars 1.x-2.x, without a user's setting
# The C allocator (glibc malloc: numpy's arrays, Python's large objects) in a worker: keep freed memory for
# the next stage instead of handing it back and faulting fresh zeroed pages in. Arrays up to 64 MiB come from
# the heap rather than a mapping of their own (glibc's default ceiling moves with what was freed, so mid-size
# arrays went back and forth to the kernel), and the heap's top is trimmed only past 256 MiB of free space,
# growing 64 MiB at a time. 40 default worlds of seed 0 in one process, run side by side with and without:
# page faults 182-189k -> 145k, system CPU 1.7-2.8 -> 1.4-2.3 s, CPU per world -2 to -3.5%, peak RSS +2%
# (508-512 -> 515-517 MiB). And that heap on transparent huge pages (glibc >= 2.35 asks for them; older ones
# ignore the tunable; the kernel's default "madvise" mode gives them only when asked): a 2 MiB page is one
# fault and one TLB entry instead of 512. 25 default worlds in one process, side by side, twice: CPU per world
# 0.690 -> 0.672 and 0.670 -> 0.655 (-2.5%), peak RSS +4% (511 -> 533 MiB); polars' jemalloc on huge pages
# too (`thp:always`) gained nothing and cost system time. Read by glibc when a process starts: set for the
# spawned workers only; a user's own setting of any of them wins (GLIBC_TUNABLES is a list: ours is added to
# the user's unless it sets the same tunable).
C_ALLOCATOR_KNOBS = {
    "MALLOC_MMAP_THRESHOLD_": str(64 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(256 << 20),
    "MALLOC_TOP_PAD_": str(64 << 20),
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
}
LOCK_PID_WAIT_SECONDS = 0.5  # the longest a refused build waits to read the holder's pid
WATCHDOG_SECONDS = 0.5  # how often a worker checks that its parent is alive
STOP_GRACE_SECONDS = 5.0  # how long a worker may take to exit after being told to, before it is killed

_WORLD_ID = re.compile(r"^(?P<domain>[a-z][a-z0-9_]*)-s(?P<seed>[0-9]+)-(?P<index>[0-9]{5,})$")
# What contracts.safeio.atomic_write leaves if killed mid-write (and the manifest temp of earlier versions).
_OWN_TEMP = re.compile(r"^(\.(build\.json|manifest\.jsonl)\.[0-9]+-[0-9a-f]{8}\.tmp|manifest\.jsonl\.tmp)$")
MANIFEST_FIELDS = ("world_id", "seed", "index", "domain", "status")


@dataclass(frozen=True)
class BuildConfig:
    n: int
    seed: int = 0
    out: Path = Path("output")
    # Worlds built at once. None: every core this process may run on (fewer if their worlds would not fit in
    # memory); with Ray, every CPU of the cluster.
    workers: int | None = 1
    size: str = "default"
    domains: tuple[str, ...] = ()
    personas_file: Path | None = None
    defect_scale: float = 1.0
    # Build every world in a spawned worker, even with one worker (the CLI does): an interrupt then never
    # unwinds through library code mid-write, and the worker's address-space cap applies. In-process (the
    # default for one worker) saves the worker's start-up, which tests and benchmarks prefer.
    isolate: bool = False
    executor: str = "local"  # local | ray
    address: str | None = None  # the Ray cluster (--executor ray); None: $RAY_ADDRESS or a local Ray


@dataclass
class BuildSummary:
    built: int = 0
    skipped: int = 0
    entries: list[dict] = field(default_factory=list)
    timings: list[dict] = field(default_factory=list)


def validate_config(cfg: BuildConfig) -> list[Persona]:
    """Check every flag before anything is written; return the persona pool."""
    if isinstance(cfg.n, bool) or not isinstance(cfg.n, int) or cfg.n < 1:
        raise InputError(f"--n must be a positive integer, got {cfg.n!r}")
    if cfg.n > MAX_N:
        raise InputError(f"--n {cfg.n} is over the limit of {MAX_N:,} worlds per build; build in several --out")
    check_seed(cfg.seed)
    check_executor(cfg.executor, cfg.address)
    workers, limit = cfg.workers, MAX_RAY_WORKERS if cfg.executor == "ray" else MAX_WORKERS
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= limit):
        raise InputError(f"--workers must be between 1 and {limit}, got {workers}")
    if cfg.size not in SIZES:
        raise InputError(f"--size {cfg.size!r} is not one of {', '.join(SIZES)}{did_you_mean(cfg.size, SIZES)}")
    if not 0 <= cfg.defect_scale <= 5:
        raise InputError(f"--defect-scale must be in [0, 5], got {cfg.defect_scale}")
    if cfg.executor == "local":  # a cluster's memory is Ray's to schedule (each task asks for its world's peak)
        _check_memory_plan(cfg)
    domains = builtin_domains()
    for d in cfg.domains:
        if d not in domains:
            raise InputError(f"unknown domain {d!r}{did_you_mean(d, domains)}; known: {', '.join(domains)}")
    if cfg.personas_file is not None:
        pool = load_persona_file(cfg.personas_file)
        check_against_packs(pool, builtin_packs(), str(cfg.personas_file))
    else:
        pool = builtin_personas()
    if cfg.domains:
        pool = [p for p in pool if p.domain in cfg.domains]
        if not pool:
            raise InputError(f"no persona belongs to the domains {', '.join(cfg.domains)}")
    return sorted(pool, key=lambda p: p.id)


def check_executor(executor: str, address: str | None) -> None:
    """--executor is local or ray; ray must be importable (else one line with the install hint)."""
    from worldgen.executors import EXECUTORS, check_address, import_ray

    if executor not in EXECUTORS:
        raise InputError(
            f"--executor {executor!r} is not one of {', '.join(EXECUTORS)}{did_you_mean(executor, EXECUTORS)}"
        )
    if address is not None and executor != "ray":
        raise InputError("--address is the Ray cluster to run on; it needs --executor ray")
    if executor == "ray":
        import_ray()
        if address is not None:
            check_address(address)  # before anything is written: a cluster that is not there is one line


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_workers(size: str) -> int:
    """--workers when not given: every available core, fewer if that many worlds would not fit in memory."""
    import psutil

    fit = psutil.virtual_memory().total // (WORKER_PEAK_MIB[size] * MIB)
    return max(1, min(available_cores(), MAX_WORKERS, fit))


def _check_memory_plan(cfg: BuildConfig) -> None:
    """K workers each holding one world of the chosen size must fit in physical memory."""
    import psutil

    if cfg.workers is None:
        return  # default_workers already fits
    workers = min(cfg.workers, cfg.n)
    need = workers * WORKER_PEAK_MIB[cfg.size] * MIB
    total = psutil.virtual_memory().total
    if need > total:
        raise InputError(
            f"--workers {workers} at --size {cfg.size} needs about {need / (1 << 30):.1f} GiB "
            f"({WORKER_PEAK_MIB[cfg.size]} MiB per worker) but this machine has {total / (1 << 30):.1f} GiB; "
            f"use at most {max(1, total // (WORKER_PEAK_MIB[cfg.size] * MIB))} workers"
        )


def persona_for(seed: int, index: int, pool: list[Persona]) -> Persona:
    return pool[int(rng_for(seed, index, "persona").integers(len(pool)))]


def _settings_fingerprint(cfg: BuildConfig, pool: list[Persona]) -> dict:
    personas_sha = hashlib.sha256("\n".join(p.model_dump_json() for p in pool).encode()).hexdigest()
    return {
        "schema_version": SCHEMA_VERSION,
        "seed": cfg.seed,
        "size": cfg.size,
        "domains": sorted(cfg.domains),
        "personas_sha256": personas_sha,
        "defect_scale": cfg.defect_scale,
    }


def _build_record(cfg: BuildConfig, pool: list[Persona]) -> dict:
    return {"format": BUILD_FORMAT, "format_version": BUILD_FORMAT_VERSION} | _settings_fingerprint(cfg, pool)


# ----------------------------------------------------------------------------------------------------------
# The output directory: read-only inspection, then the lock, then the first writes.


@dataclass
class OutState:
    """What is in --out, established without writing anything."""

    exists: bool
    marked: bool  # build.json carries our current marker
    stale: list[Path]  # worlds/.tmp-<id of this build> and our own temporary files: from a crashed run
    done: dict[int, dict]  # finished worlds of this build: index -> manifest entry


def inspect_out(cfg: BuildConfig, pool: list[Persona], holding_lock: bool = False) -> OutState:
    """Establish, read-only, that --out is empty or a build of these settings; refuse anything else."""
    out = cfg.out
    info = _lstat(out)
    if info is None:
        _check_creatable(out)
        return OutState(exists=False, marked=False, stale=[], done={})
    if stat.S_ISLNK(info.st_mode):  # the user's own link to a directory is theirs to choose; follow it once
        try:
            info = os.stat(out)
        except OSError as exc:
            raise InputError(f"--out {one_line(out)}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"--out {one_line(out)} is {kind_of(info.st_mode)}, not a directory")
    try:
        names = set(os.listdir(out))
    except OSError as exc:
        raise InputError(f"cannot read --out {one_line(out)}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"cannot write to --out {one_line(out)}: permission denied")
    if LOCK_FILE in names and not holding_lock:
        _check_unlocked(out)
    names -= _placeholders(out, names)
    temps = [out / n for n in sorted(names) if _OWN_TEMP.match(n) and stat.S_ISREG(os.lstat(out / n).st_mode)]
    if not names - {LOCK_FILE} - {t.name for t in temps if t.name.startswith(".build.json.")}:
        if LOCK_FILE in names:  # a build that died before writing build.json: the directory is still ours
            _own_regular(out, LOCK_FILE)
        return OutState(exists=True, marked=False, stale=temps, done={})
    if BUILD_FILE not in names:
        raise InputError(
            f"--out {one_line(out)} is not empty and is not a worldgen build (no {BUILD_FILE}); "
            "build into a new or empty directory"
        )
    _own_regular(out, BUILD_FILE)
    previous = read_json(out / BUILD_FILE, max_bytes=MAX_BUILD_JSON_BYTES, what="build settings")
    marked = _check_build_record(out, previous, _build_record(cfg, pool))
    for name, kind in ((MANIFEST_FILE, "file"), (TIMINGS_FILE, "file"), (LOCK_FILE, "file"), (WORLDS_DIR, "dir")):
        if name in names:
            _own_regular(out, name, kind)
    if MANIFEST_FILE in names:
        _check_manifest(out / MANIFEST_FILE)
    stale, done = _inspect_worlds(cfg, pool) if WORLDS_DIR in names else ([], {})
    return OutState(exists=True, marked=marked, stale=stale + temps, done=done)


def _placeholders(out: Path, names: set[str]) -> set[str]:
    """Empty placeholder files a repository keeps in an output directory (`output/.keep`): not data, so the
    directory counts as empty; the build leaves them as they are."""
    found = set()
    for name in names & PLACEHOLDER_NAMES:
        info = os.lstat(out / name)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            found.add(name)
    return found


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return lstat_or_none(path)
    except OSError as exc:
        raise InputError(f"cannot write to --out {one_line(path)}: {exc.strerror or exc}") from None


def _check_creatable(out: Path) -> None:
    """--out does not exist: its nearest existing ancestor must be a writable directory."""
    parent = out.absolute().parent
    try:
        while lstat_or_none(parent) is None:
            parent = parent.parent
        info = os.stat(parent)
    except OSError as exc:
        raise InputError(f"cannot write to --out {one_line(out)}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(f"cannot write to --out {one_line(out)}: {one_line(parent)} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot write to --out {one_line(out)}: {one_line(parent)} is not writable")


def _own_regular(out: Path, name: str, kind: str = "file") -> None:
    """One of our own names must be what we would have created: a plain file or directory, never a link."""
    info = os.lstat(out / name)
    ok = stat.S_ISDIR(info.st_mode) if kind == "dir" else stat.S_ISREG(info.st_mode)
    if not ok:
        raise WorldFormatError(
            f"{one_line(out / name)} is {kind_of(info.st_mode)}, not the {kind} worldgen writes; "
            "this is not a build worldgen can resume"
        )


def _check_build_record(out: Path, previous: object, record: dict) -> bool:
    """build.json must be ours (marker and version) and pin the same settings; return whether it is current."""
    where = f"{one_line(out / BUILD_FILE)}"
    if not isinstance(previous, dict):
        raise WorldFormatError(f"{where}: not a worldgen build record (a JSON object); use another --out")
    if "format" in previous:
        if previous.get("format") != BUILD_FORMAT:
            raise WorldFormatError(f"{where}: not a worldgen build record (format {previous['format']!r})")
        if previous.get("format_version") != BUILD_FORMAT_VERSION:
            raise WorldFormatError(
                f"{where}: build format version {previous.get('format_version')!r} is not the supported "
                f"{BUILD_FORMAT_VERSION}; use the worldgen that made it or another --out"
            )
        marked = True
    elif set(previous) == LEGACY_BUILD_KEYS:  # written by worldgen before the marker existed: the same record
        marked = False
    else:
        raise WorldFormatError(f"{where}: not a worldgen build record (no 'format' marker); use another --out")
    changed = sorted(k for k in LEGACY_BUILD_KEYS if previous.get(k) != record[k])
    if changed:
        raise InputError(
            f"--out {one_line(out)} holds a build with different {', '.join(changed)}; use another --out to keep both"
        )
    return marked


def _check_manifest(path: Path) -> None:
    """Our manifest is rewritten from the worlds, but a corrupt one means someone else edited it: refuse."""
    for number, entry in iter_jsonl(path, max_bytes=MAX_MANIFEST_BYTES, max_line_bytes=64 * KIB, what="manifest"):
        index = entry.get("index") if isinstance(entry, dict) else None
        if isinstance(index, bool) or not isinstance(index, int):
            raise WorldFormatError(
                f"{one_line(path)}: line {number} is not a manifest entry; fix or delete the manifest"
            )


def _inspect_worlds(cfg: BuildConfig, pool: list[Persona]) -> tuple[list[Path], dict[int, dict]]:
    """Every entry of worlds/ must be a finished world of this build or one of its own .tmp- leftovers."""
    worlds = cfg.out / WORLDS_DIR
    stale: list[Path] = []
    done: dict[int, dict] = {}
    try:
        names = sorted(os.listdir(worlds))
    except OSError as exc:
        raise WorldFormatError(f"cannot read {one_line(worlds)}: {exc.strerror or exc}") from None
    for name in names:
        path = worlds / name
        info = os.lstat(path)
        world_name = name.removeprefix(".tmp-")
        index = _index_of(cfg, pool, world_name)
        if index is None or not stat.S_ISDIR(info.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else f"{name!r}"
            raise WorldFormatError(
                f"{one_line(path)}: {what} was not made by this build (seed {cfg.seed}); "
                "move it out of --out, worldgen never adopts or deletes what it did not create"
            )
        if name.startswith(".tmp-"):
            stale.append(path)
            continue
        done[index] = world_entry(cfg, pool, path, index)
    return stale, done


def _index_of(cfg: BuildConfig, pool: list[Persona], name: str) -> int | None:
    """The world index if `name` is exactly the id this build gives that world, else None."""
    match = _WORLD_ID.match(name)
    if not match or int(match["seed"]) != cfg.seed:
        return None
    index = int(match["index"])
    if index >= MAX_N or world_id_for(cfg.seed, index, persona_for(cfg.seed, index, pool).domain) != name:
        return None
    return index


def world_entry(cfg: BuildConfig, pool: list[Persona], path: Path, index: int) -> dict:
    """The manifest entry of a committed world, from its own world.json (the one source for every run)."""
    meta_path = path / "world.json"
    meta = read_json(meta_path, max_bytes=MAX_WORLD_JSON_BYTES, what="world manifest")
    persona = persona_for(cfg.seed, index, pool)
    expected = {
        "schema_version": SCHEMA_VERSION,
        "world_id": path.name,
        "seed": cfg.seed,
        "index": index,
        "domain": persona.domain,
        "persona_id": persona.id,
        "size": cfg.size,
    }
    problem = None
    if not isinstance(meta, dict):
        problem = "not a JSON object"
    else:
        wrong = [k for k, v in expected.items() if meta.get(k) != v or type(meta.get(k)) is not type(v)]
        audit = meta.get("audit")
        if wrong:
            problem = f"{wrong[0]} is {meta.get(wrong[0])!r}, this build expects {expected[wrong[0]]!r}"
        elif meta.get("status") not in ("pass", "fail"):
            problem = f"status is {meta.get('status')!r}, not a finished world's 'pass' or 'fail'"
        elif not isinstance(audit, dict) or audit.get("verdict") != meta["status"]:
            problem = "its recorded audit verdict disagrees with its status"
        elif not isinstance(meta.get("tasks"), list) or not all(isinstance(t, str) for t in meta["tasks"]):
            problem = "tasks is not a list of task ids"
    if problem:
        raise WorldFormatError(
            f"{one_line(meta_path)}: not a finished world of this build ({one_line(problem, 160)}); "
            f"delete {one_line(path)} to rebuild it"
        )
    return {k: meta[k] for k in MANIFEST_FIELDS} | {"tasks": len(meta["tasks"]), "path": f"{WORLDS_DIR}/{path.name}"}


def _check_unlocked(out: Path) -> None:
    """Read-only: refuse at once, naming the holder, if another build holds --out's lock right now."""
    _own_regular(out, LOCK_FILE)
    try:
        fd = os.open(out / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return  # gone or unreadable: taking the lock will say why
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise _locked_error(out, fd) from None
    finally:
        os.close(fd)  # closing drops the shared lock we may have taken


def _locked_error(out: Path, fd: int) -> InputError:
    # The holder writes its pid just after taking the lock: a build refused in that instant waits a moment for it.
    deadline = time.monotonic() + LOCK_PID_WAIT_SECONDS
    while not (holder := os.pread(fd, 32, 0).decode("ascii", "replace").strip()) and time.monotonic() < deadline:
        time.sleep(0.01)
    holder = holder or "unknown"
    return InputError(
        f"--out {one_line(out)} is being built by another worldgen build (pid {one_line(holder, 32)}); "
        "wait for it to finish or use another --out"
    )


class BuildLock:
    """An exclusive flock on --out/build.lock; the file holds the holder's pid while it is held."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.fd: int | None = None

    def acquire(self) -> None:
        path = self.out / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise InputError(f"cannot write to --out {one_line(self.out)}: {exc.strerror or exc}") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise WorldFormatError(f"{one_line(path)} is {kind_of(mode)}, not the lock file worldgen writes")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise _locked_error(self.out, fd) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)  # an empty lock file after a clean exit: the directory stays byte-stable
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def open_out(cfg: BuildConfig) -> BuildLock:
    """Create --out if needed and take its lock; the first writes of a build."""
    try:
        cfg.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write to --out {one_line(cfg.out)}: {exc.strerror or exc}") from None
    lock = BuildLock(cfg.out)
    lock.acquire()
    return lock


def _prepare(cfg: BuildConfig, pool: list[Persona], state: OutState) -> None:
    """Under the lock and after every check: stamp build.json, create worlds/, remove our own leftovers."""
    try:
        if not state.marked:
            atomic_write(cfg.out / BUILD_FILE, json.dumps(_build_record(cfg, pool), indent=2) + "\n")
        (cfg.out / WORLDS_DIR).mkdir(exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write to --out {one_line(cfg.out)}: {exc.strerror or exc}") from None
    for stale in state.stale:  # named as only this build names things, and checked with lstat: ours
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def committed_worlds(cfg: BuildConfig, pool: list[Persona]) -> dict[int, dict]:
    """The manifest entries of every world committed in --out, read back from disk."""
    return _inspect_worlds(cfg, pool)[1]


# ----------------------------------------------------------------------------------------------------------
# Running the worlds.


class _Signals:
    """SIGINT, SIGTERM and SIGHUP raise BuildInterrupted while armed, and are only recorded while shielded."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.received: int | None = None
        self.shielded = True
        self.previous: dict[int, object] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for name in self.NAMES:
                if hasattr(signal, name):
                    sig = getattr(signal, name)
                    self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: object) -> None:
        if self.received is None:
            self.received = signum
        if not self.shielded:
            self.shielded = True  # one raise per build; later signals are only recorded
            raise BuildInterrupted(signum)

    def check(self) -> None:
        """Raise now if a signal arrived while shielded."""
        if self.received is not None:
            self.shielded = True
            raise BuildInterrupted(self.received)


@contextlib.contextmanager
def _armed(signals: _Signals) -> Iterator[None]:
    signals.shielded = False
    try:
        signals.check()
        yield
    finally:
        signals.shielded = True


def run_build(cfg: BuildConfig, on_world: Callable[[dict], None] | None = None) -> BuildSummary:
    pool = validate_config(cfg)
    if note := kernels.unpinned_warning():  # only from Python with numpy loaded first; the CLI always pins
        warnings.warn(note, RuntimeWarning, stacklevel=2)
    if cfg.workers is None and cfg.executor == "local":
        cfg = dataclasses.replace(cfg, workers=default_workers(cfg.size))
    state = inspect_out(cfg, pool)  # read-only: a refusal leaves --out exactly as it was
    summary = BuildSummary()
    with _Signals() as signals:
        lock = open_out(cfg)
        try:
            state = inspect_out(cfg, pool, holding_lock=True)  # again, now that no other build can change it
            _prepare(cfg, pool, state)
            summary.skipped = sum(1 for k in state.done if k < cfg.n)
            todo = (k for k in range(cfg.n) if k not in state.done)
            remaining = cfg.n - summary.skipped
            try:
                with _armed(signals), _Timings(cfg.out / TIMINGS_FILE) as timings:
                    record = _recorder(summary, timings, on_world)
                    if remaining <= 0:
                        pass
                    elif cfg.executor == "ray":
                        _run_ray(cfg, pool, todo, record, signals)
                    elif not cfg.isolate and (cfg.workers == 1 or remaining == 1):
                        _run_in_process(cfg, pool, todo, record)
                    else:
                        _run_workers(cfg, pool, todo, min(cfg.workers, remaining), record, signals)
            finally:
                done = committed_worlds(cfg, pool)  # exactly what is on disk, whatever happened
                _write_manifest(cfg.out, done)
                summary.entries = [done[k] for k in sorted(done)]
        except BuildInterrupted as exc:
            exc.committed = len(summary.entries)
            exc.manifest = str(cfg.out / MANIFEST_FILE)
            raise
        finally:
            lock.release()
    return summary


def _recorder(summary: BuildSummary, timings: _Timings, on_world: Callable[[dict], None] | None):
    def record(timing: dict) -> None:
        summary.built += 1
        summary.timings.append(timing)
        timings.append(timing)
        if on_world:
            on_world(timing)

    return record


def world_id_for(seed: int, index: int, domain: str) -> str:
    return f"{domain}-s{seed}-{index:05d}"


def _build_one(seed: int, index: int, persona: Persona, size: str, worlds: str, scale: float) -> dict:
    world = WorldSpec(seed=seed, index=index, size=size, persona=persona)
    result = build_world(world, get_pack(persona.domain), Path(worlds), DefectSettings(scale=scale))
    return {"world_id": result.world_id, "index": index, **result.timings}


class _Job(NamedTuple):
    """`_build_one`'s arguments, as a worker receives them."""

    seed: int
    index: int
    persona: Persona
    size: str
    worlds: str
    scale: float

    def committed(self, timing: dict) -> Path:
        return Path(self.worlds) / timing["world_id"]


def _job(cfg: BuildConfig, pool: list[Persona], k: int) -> _Job:
    return _Job(cfg.seed, k, persona_for(cfg.seed, k, pool), cfg.size, str(cfg.out / WORLDS_DIR), cfg.defect_scale)


def _run_in_process(cfg: BuildConfig, pool: list[Persona], todo: Iterator[int], record) -> None:
    release = _CacheRelease()
    for k in todo:
        job = _job(cfg, pool, k)
        try:
            timing = _build_one(*job)
        except Exception as exc:  # a world that cannot be built stops the build with one line, never a traceback
            raise BuildError(_failure(cfg, pool, k, exc)) from exc
        record(timing)
        release(job.committed(timing))


def _failure(cfg: BuildConfig, pool: list[Persona], k: int, exc: BaseException | str) -> str:
    world = world_id_for(cfg.seed, k, persona_for(cfg.seed, k, pool).domain)
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return f"world {k} ({world}) could not be built: {one_line(reason, 200)}; finished worlds are kept"


def _run_ray(cfg: BuildConfig, pool: list[Persona], todo: Iterator[int], record, signals: _Signals) -> None:
    """Each world a Ray task seeded by its index; its files come back as bytes and are committed here.

    Signals are only recorded while Ray runs (an exception raised inside Ray's compiled calls would surface as
    a SystemError) and acted on between its calls, at most POLL_SECONDS later: no new task is submitted, the
    ones in flight are cancelled, the world being committed finishes its rename first.
    """
    from worldgen import executors

    mine = executors.fingerprint()
    jobs = ((k, (cfg.seed, k, persona_for(cfg.seed, k, pool), cfg.size, cfg.defect_scale)) for k in todo)
    signals.shielded = True  # from here on, only recorded (and raised by signals.check between Ray calls)
    release = _CacheRelease()  # this process writes the worlds here
    with executors.RayPool(cfg.address, cfg.workers, WORKER_PEAK_MIB[cfg.size]) as ray_pool:
        signals.check()
        try:
            for k, result in ray_pool.imap_unordered(executors.build_task, jobs, poll=signals.check):
                world = world_id_for(cfg.seed, k, persona_for(cfg.seed, k, pool).domain)
                if result["fingerprint"] != mine:
                    raise BuildError(
                        _failure(
                            cfg,
                            pool,
                            k,
                            f"Ray node {result['node']} runs other worldgen code or libraries than "
                            "this machine (its worlds would not be byte-identical); install the same on every node",
                        )
                    )
                if result["timing"]["world_id"] != world:
                    raise BuildError(
                        _failure(cfg, pool, k, f"the Ray task returned world {result['timing']['world_id']!r}")
                    )
                started = time.perf_counter()
                _commit_files(cfg, pool, k, world, result["files"])
                record(result["timing"] | {"commit": round(time.perf_counter() - started, 6)})
                release(cfg.out / WORLDS_DIR / world)
                signals.check()
        except executors.TaskFailed as exc:
            raise BuildError(_failure(cfg, pool, exc.key, str(exc))) from None


def _commit_files(cfg: BuildConfig, pool: list[Persona], k: int, world: str, files) -> None:
    """Write a world's files under .tmp-<id>, then rename it into place: whole, or not at all."""
    from worldgen.executors import unpack_dir

    worlds = cfg.out / WORLDS_DIR
    tmp = worlds / f".tmp-{world}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        unpack_dir(files, tmp)
        tmp.rename(worlds / world)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BuildError(_failure(cfg, pool, k, f"writing it failed: {exc.strerror or exc}")) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    index: int | None = None  # the world it is building


def _run_workers(
    cfg: BuildConfig, pool: list[Persona], todo: Iterator[int], count: int, record, signals: _Signals
) -> None:
    """Hand out one world at a time to `count` spawned workers; stop handing out at the first signal."""
    # spawn, not fork: forking after polars has started its thread pool can deadlock the children.
    context = multiprocessing.get_context("spawn")
    workers: list[_Worker] = []
    clean_exit = False
    try:
        with _spawn_environment(count), _ignored_while_spawning():
            for _ in range(count):
                mine, theirs = context.Pipe()
                process = context.Process(
                    target=_worker_main, args=(theirs, os.getpid()), daemon=True, name="worldgen-worker"
                )
                process.start()
                theirs.close()
                workers.append(_Worker(process, mine))
        signals.check()
        pending = iter(todo)
        exhausted = False
        while True:
            for w in workers:
                if w.index is None and not exhausted:
                    k = next(pending, None)
                    if k is None:
                        exhausted = True
                        break
                    w.index = k
                    try:
                        w.conn.send(_job(cfg, pool, k))
                    except (OSError, ValueError):
                        raise BuildError(_failure(cfg, pool, k, _death(w.process))) from None
            busy = [w for w in workers if w.index is not None]
            if not busy:
                break
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=1.0)
            for w in busy:
                if w.conn in ready:
                    try:
                        message = w.conn.recv()
                    except (EOFError, OSError):
                        message = None
                    if message is not None:
                        status, payload = message
                        if status != "ok":
                            raise BuildError(_failure(cfg, pool, w.index, payload))
                        w.index = None
                        record(payload)
                        continue
                if w.process.sentinel in ready or not w.process.is_alive():
                    raise BuildError(_failure(cfg, pool, w.index, _death(w.process)))
        clean_exit = True
    finally:
        _stop_workers(cfg, pool, workers, graceful=clean_exit)


def _death(process: multiprocessing.process.BaseProcess) -> str:
    process.join(STOP_GRACE_SECONDS)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        hint = " (the system may have run out of memory)" if -code == signal.SIGKILL else ""
        return f"its worker was killed by {name}{hint}"
    return f"its worker exited unexpectedly (exit code {code})"


def _stop_workers(cfg: BuildConfig, pool: list[Persona], workers: list[_Worker], graceful: bool) -> None:
    """Graceful: tell idle workers to exit. Otherwise drop the in-flight worlds: kill, wait, remove their .tmp-."""
    for w in workers:
        if graceful and w.index is None:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(None)
        elif w.process.is_alive():
            w.process.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for w in workers:
        w.process.join(max(0.0, deadline - time.monotonic()))
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.conn.close()
        if w.index is not None:  # its world never committed: the half-written directory is ours to remove
            world = world_id_for(cfg.seed, w.index, persona_for(cfg.seed, w.index, pool).domain)
            shutil.rmtree(cfg.out / WORLDS_DIR / f".tmp-{world}", ignore_errors=True)


def allocator_knobs(environ: Mapping[str, str]) -> dict[str, str]:
    """The allocator settings a worker (spawned here or a Ray worker) starts with: ours where `environ` (this
    process's) has none of its own; polars' own defaults, left in `environ` by importing polars, are not the
    user's."""
    knobs = {knob: environ.get(knob, value) for knob, value in C_ALLOCATOR_KNOBS.items()}
    ours, theirs = C_ALLOCATOR_KNOBS["GLIBC_TUNABLES"], environ.get("GLIBC_TUNABLES")
    if theirs and ours.partition("=")[0] not in theirs:
        knobs["GLIBC_TUNABLES"] = f"{theirs}:{ours}"
    polars_conf = environ.get(POLARS_ALLOCATOR_KNOB)
    knobs[POLARS_ALLOCATOR_KNOB] = (
        POLARS_ALLOCATOR_CONF if polars_conf in (None, POLARS_OWN_ALLOCATOR_CONF) else polars_conf
    )
    return knobs


@contextlib.contextmanager
def _spawn_environment(workers: int) -> Iterator[None]:
    """Pin each worker to cores/workers polars and BLAS threads and tune polars' allocator (read at their
    import) and the C allocator (read at its start), without leaking them here."""
    threads = str(max(1, available_cores() // workers))
    knobs = dict.fromkeys(("POLARS_MAX_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), threads)
    saved = {k: os.environ.get(k) for k in [*knobs, *C_ALLOCATOR_KNOBS, POLARS_ALLOCATOR_KNOB]}
    for knob, value in knobs.items():
        os.environ.setdefault(knob, value)  # the user's own setting wins
    os.environ.update(allocator_knobs(os.environ))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _ignored_while_spawning() -> Iterator[None]:
    """Children inherit an ignored SIGINT/SIGHUP: a Ctrl-C reaches the whole process group, only we decide."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _worker_main(conn: multiprocessing.connection.Connection, parent: int) -> None:
    """A worker: build the worlds it is sent, one at a time, and die with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    _limit_address_space()
    _freeze_long_lived()
    settled = False
    release = _CacheRelease()
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            os._exit(1)
        if job is None:
            return
        try:
            message = ("ok", _build_one(*job))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent as one line
            message = ("error", f"{type(exc).__name__}: {exc}")
        if not settled:  # what the first world imported and cached lives as long as the worker too
            _freeze_long_lived()
            settled = True
        try:
            conn.send(message)
        except (OSError, ValueError):
            os._exit(1)
        if message[0] == "ok":
            release(job.committed(message[1]))


class _CacheRelease:
    """Hand a committed world's file pages back to the kernel once they are on disk, so that the next world's
    files are written into them.

    A world writes ~16 MB. Pages the kernel has not given out for a while cost far more to write into than
    ones just freed: on a VM whose host takes back the guest's free and cold memory (this development
    machine: ~0.5 GB/s into such pages against ~5 GB/s into reused ones), a build that leaves every file in
    the page cache writes each world into fresh pages. `POSIX_FADV_DONTNEED` on a world just committed starts
    its write-out (dirty pages cannot be dropped); on the world before, by then written, it drops the pages.
    Only the build's own committed worlds are advised, by whichever process wrote them (a worker, an in-process
    build, Ray's driver); their bytes do not change, only where they are cached. A build read again at once
    (`worldgen audit`, an export) reads its files from disk."""

    def __init__(self) -> None:
        self.previous: Path | None = None

    def __call__(self, world: Path) -> None:
        if not hasattr(os, "posix_fadvise"):
            return
        for directory in (world, self.previous):
            if directory is not None:
                with contextlib.suppress(OSError):  # a hint: a world moved or removed meanwhile is not an error
                    _advise_dontneed(directory)
        self.previous = world


def _advise_dontneed(directory: Path) -> None:
    for path in directory.rglob("*"):
        with contextlib.suppress(OSError):
            # O_NONBLOCK: a FIFO someone put there opens without waiting for a writer (and is then skipped)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _freeze_long_lived() -> None:
    """Move every object alive now out of the cyclic garbage collector's sight (`gc.freeze`).

    A worker holds ~100k tracked objects that live as long as it does (modules, classes, functions, caches),
    and every collection that reaches the oldest generation walks them all: the collector took 12.7 ms of CPU
    a default world, 3.4 ms once they are frozen (gc.callbacks over worlds 1-6 of seed 0, one process). Only a
    worker does this, never the caller's process. Collected first, so that no garbage is frozen with them; the
    world's bytes do not depend on it.
    """
    gc.collect()
    gc.freeze()


def _die_with_parent(parent: int) -> None:
    """Exit as soon as the parent dies, even by SIGKILL: the kernel's PDEATHSIG on Linux, a watchdog everywhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_SECONDS)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="worldgen-parent-watchdog", daemon=True).start()


def _limit_address_space() -> None:
    """Cap this worker's address space so a runaway world fails alone (MemoryError, reported as one line)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = WORKER_ADDRESS_SPACE if hard == resource.RLIM_INFINITY else min(WORKER_ADDRESS_SPACE, hard)
        if soft == resource.RLIM_INFINITY or soft > cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass


# ----------------------------------------------------------------------------------------------------------
# Our own files in --out.


class _Timings:
    """timings.jsonl, appended one line per committed world (wall-clock: kept outside the worlds)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = None

    def __enter__(self) -> _Timings:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise InputError(f"cannot write {one_line(self.path)}: {exc.strerror or exc}") from None
        self.file = os.fdopen(fd, "a", encoding="utf-8")
        return self

    def append(self, timing: dict) -> None:
        assert self.file is not None
        self.file.write(json.dumps(timing) + "\n")
        self.file.flush()

    def __exit__(self, *exc: object) -> None:
        if self.file is not None:
            self.file.close()


def _write_manifest(out: Path, done: dict[int, dict]) -> None:
    lines = "".join(json.dumps(done[k], sort_keys=True) + "\n" for k in sorted(done))
    try:
        atomic_write(out / MANIFEST_FILE, lines)
    except OSError as exc:
        raise WorldFormatError(f"cannot write {one_line(out / MANIFEST_FILE)}: {exc.strerror or exc}") from None

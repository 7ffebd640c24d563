"""Running worlds on a Ray cluster: `RayPool` is the one entry point (`worldgen build|audit --executor ray`).

The driver (the `worldgen` process) keeps everything that touches the output: the lock, the checks, resume,
the atomic commit of each world and the manifest. A Ray task only computes: it builds (or audits) one world
in a private scratch directory on whatever node runs it and returns the world's files as bytes, which the
driver writes under `.tmp-<id>` and renames into place exactly as a local build does. So a cluster needs no
shared filesystem, a world is never half-written on the output disk, and a task that dies or is retried
leaves nothing behind. World `k` is a task seeded by `k` alone (never by the node or worker that runs it),
so it is byte-identical to the same world built locally; every result carries a fingerprint of the code
and libraries that built it, and a node whose install differs from the driver's stops the build.

Costs of shipping bytes: a default-size world is ~3-10 MB of files, held in Ray's object store until the
driver has written it; at most `in_flight` (about 1.25x the worlds running at once) are outstanding.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path

from contracts import kernels
from contracts.errors import InputError

EXECUTORS = ("local", "ray")
POLL_SECONDS = 0.25  # the longest a recorded interrupt waits for Ray to hand control back
RAY_HINT = 'pip install -e ".[ray]"'
# Retries of a task whose worker process or node died (never of a world whose code raised: that is a bug or
# bad input, and retrying it gives the same answer). Safe because a task writes only its own scratch directory.
SYSTEM_RETRIES = 2
# Threads per Ray worker: one world per CPU, like a local worker pinned by build._spawn_environment.
THREAD_KNOBS = ("POLARS_MAX_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# What must be the same on every node for a world's bytes to be: the code (hashed) and these libraries.
FINGERPRINT_DISTRIBUTIONS = ("numpy", "polars", "pyarrow", "pandas", "openpyxl", "pydantic", "networkx", "faker")
FINGERPRINT_PACKAGES = ("worldgen", "contracts", "auditors", "rubrics", "personas")


def import_ray():
    """Ray, or one line saying how to install it (exit 2)."""
    try:
        import ray
    except ImportError:
        raise InputError(f"--executor ray needs Ray, which is not installed; install it with: {RAY_HINT}") from None
    return ray


PROBE_SECONDS = 10.0


def check_address(address: str) -> None:
    """A `host:port` cluster address must accept a connection now: ray.init would otherwise retry forever.

    `auto`, `local` and `ray://` client addresses are left to Ray.
    """
    import socket

    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--address {address!r} is not host:port (e.g. 10.0.0.1:6379), 'auto' or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


class TaskFailed(Exception):
    """One task could not finish: `key` is its item's key, the message is one line."""

    def __init__(self, key: object, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.cause = cause


class RayPool:
    """A connection to a Ray cluster (`address`, or $RAY_ADDRESS, or a local Ray started here) running tasks.

    Used as a context manager. `workers` caps the tasks in flight (default: every CPU of the cluster); a local
    Ray started here gets `workers` CPUs. Leaving the block cancels what is still running and, if this pool
    started Ray, stops it.
    """

    def __init__(self, address: str | None = None, workers: int | None = None, memory_mib: int = 0) -> None:
        self.ray = import_ray()
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.workers = workers
        self.memory_mib = memory_mib
        self.started = False
        self.capacity = 1
        self._pending: dict = {}

    def __enter__(self) -> RayPool:
        ray = self.ray
        if not ray.is_initialized():
            saved = _signal_handlers()  # ray.init installs its own SIGTERM handler in the driver: keep ours
            try:
                with _quiet_ray_logging():
                    if self.address:
                        check_address(self.address)
                        ray.init(address=self.address, **_INIT_OPTIONS)
                    else:
                        from worldgen.build import available_cores

                        ray.init(num_cpus=self.workers or available_cores(), **_INIT_OPTIONS)
            except Exception as exc:  # noqa: BLE001 - an unreachable cluster is the user's input: one line
                where = f"the Ray cluster at {self.address}" if self.address else "a local Ray instance"
                raise InputError(f"cannot start or reach {where}: {type(exc).__name__}: {exc}") from None
            finally:
                _restore_signal_handlers(saved)
            self.started = True
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < 1:
            raise InputError("the Ray cluster has no CPUs to run worlds on")
        self.capacity = min(self.workers or cpus, cpus)
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()
        if self.started:
            with contextlib.suppress(Exception):
                self.ray.shutdown()

    def cancel(self) -> None:
        """Stop every task still in flight (force: kill its worker; its scratch directory dies with it)."""
        for ref in list(self._pending):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self._pending.clear()

    def imap_unordered(
        self, fn: Callable, items: Iterable[tuple[object, tuple]], poll: Callable[[], None] = lambda: None
    ) -> Iterator[tuple[object, object]]:
        """Run `fn(*args)` as a Ray task per `(key, args)`; yield `(key, result)` as tasks finish.

        `poll` runs between Ray calls, at least every POLL_SECONDS: the place to raise on a recorded signal
        (never raise inside Ray's own calls from a signal handler).

        At most `workers` (or ~1.25x the cluster's CPUs) tasks are outstanding, so results never pile up in the object store faster
        than the caller consumes them. A task that raises, or whose worker died more than SYSTEM_RETRIES
        times, raises TaskFailed with one line.
        """
        ray = self.ray
        options = {
            "num_cpus": 1,
            "max_retries": SYSTEM_RETRIES,
            "retry_exceptions": False,
            "runtime_env": {"env_vars": _worker_environment()},
        }
        if self.memory_mib:  # scheduling only: Ray places no more worlds on a node than its memory holds
            options["memory"] = self.memory_mib * (1 << 20)
        remote = ray.remote(fn).options(**options)
        # With --workers, exactly that many at once; otherwise a quarter more than the cluster's CPUs, queued in
        # Ray, so that no CPU waits while the driver writes a finished world.
        in_flight = self.capacity if self.workers else self.capacity + max(1, self.capacity // 4)
        source = iter(items)
        exhausted = False
        while True:
            while not exhausted and len(self._pending) < in_flight:
                item = next(source, None)
                if item is None:
                    exhausted = True
                    break
                key, args = item
                self._pending[remote.remote(*args)] = key
                poll()
            if not self._pending:
                return
            ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=POLL_SECONDS)
            poll()
            for ref in ready:
                key = self._pending.pop(ref)
                yield key, self._result(ref, key)

    def _result(self, ref, key: object) -> object:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise TaskFailed(key, f"{type(cause).__name__}: {cause}", cause) from None
            raise TaskFailed(key, f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError) as exc:
            raise TaskFailed(
                key,
                f"its Ray worker died {SYSTEM_RETRIES + 1} times (last: {type(exc).__name__}); "
                "the node may have run out of memory",
            ) from None
        except ray.exceptions.RayError as exc:
            raise TaskFailed(
                key, f"Ray: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None


_INIT_OPTIONS = {
    "include_dashboard": False,
    "log_to_driver": False,  # a world's warnings stay in Ray's logs; the command keeps its one-line output
    "logging_level": logging.ERROR,
    "configure_logging": True,
}


@contextlib.contextmanager
def _quiet_ray_logging() -> Iterator[None]:
    """Ray prints "Started a local Ray instance" and similar lines at start-up: the command says nothing extra."""
    logger = logging.getLogger("ray")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _signal_handlers() -> dict:
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def _restore_signal_handlers(saved: dict) -> None:
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


# ----------------------------------------------------------------------------------------------------------
# A world's files as bytes: packed where it was made, unpacked by the driver.

Packed = list[tuple[str, "bytes | str | None"]]  # (path in the world, content | link target (str) | None: a dir)


def pack_dir(root: Path) -> Packed:
    """Every directory, regular file and link under `root`, in a fixed order (links as their targets)."""
    packed: Packed = []
    real_root = os.path.realpath(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        for name in [*dirs, *sorted(files)]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):  # kept a link, relative, so it resolves the same in the copy
                target = os.path.realpath(path)
                if os.path.commonpath([real_root, target]) != real_root:
                    raise OSError(f"{path}: a symbolic link out of the world")
                packed.append((rel, os.path.relpath(target, os.path.realpath(base))))
            elif stat.S_ISDIR(info.st_mode):
                packed.append((rel, None))
            elif stat.S_ISREG(info.st_mode):
                packed.append((rel, path.read_bytes()))
            else:
                raise OSError(f"{path}: not a regular file, directory or link")
    return packed


def unpack_dir(packed: Packed, root: Path) -> None:
    """Write packed entries under `root` (a new directory), refusing any name that would leave it."""
    root.mkdir()
    for rel, data in packed:
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or any(p in ("", ".", "..") for p in parts):
            raise OSError(f"refusing packed name {rel!r}")
        target = root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            target.mkdir(exist_ok=True)
        elif isinstance(data, str):
            os.symlink(data, target)
        else:
            with open(target, "xb") as f:
                f.write(data)


SCRATCH_PREFIX = "worldgen-ray-"


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A private directory on the node running the task, removed whatever happens.

    A worker killed mid-world (out of memory, a cancelled task) cannot remove its own: the next task on the
    node removes scratch directories whose process is gone (the pid is part of the name).
    """
    import psutil

    root = Path(tempfile.gettempdir())
    for stale in root.glob(f"{SCRATCH_PREFIX}*-*"):
        pid = stale.name.removeprefix(SCRATCH_PREFIX).split("-", 1)[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _worker_environment() -> dict[str, str]:
    """One thread per world, numpy's kernels pinned as in this process (set before the worker imports numpy),
    and the allocators tuned as a local build's workers are."""
    from worldgen.build import allocator_knobs  # build imports this module lazily; no cycle at import

    env = {knob: "1" for knob in THREAD_KNOBS} | allocator_knobs(os.environ)
    if kernels.ENV in os.environ:
        env[kernels.ENV] = os.environ[kernels.ENV]
    return env


@cache
def fingerprint() -> str:
    """What a world's bytes depend on besides its seed: Python, the libraries, numpy's kernels, worldgen's files."""
    h = hashlib.sha256(f"python {sys.version_info[:2]}\nnumpy kernels {kernels.active_kernels()}".encode())
    for name in FINGERPRINT_DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"\n{name} {version}".encode())
    for package in FINGERPRINT_PACKAGES:
        root = Path(__import__(package).__file__).parent
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".yaml", ".json", ".jsonl") and "__pycache__" not in path.parts:
                h.update(f"\n{path.relative_to(root.parent).as_posix()}\n".encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------------------------------------
# The tasks. Module-level functions, so Ray ships them by reference (every node imports this module).


def build_task(seed: int, index: int, persona, size: str, scale: float) -> dict:
    """Build world `index` in a scratch directory; return its timings, files and the builder's fingerprint."""
    from worldgen.build import _build_one

    with scratch_dir() as scratch:
        timing = _build_one(seed, index, persona, size, str(scratch), scale)
        started = time.perf_counter()
        files = pack_dir(scratch / timing["world_id"])
        timing["pack"] = round(time.perf_counter() - started, 6)
    return {"timing": timing, "files": files, "fingerprint": fingerprint(), "node": _node()}


def audit_task(name: str, files: Packed, shown_as: str) -> dict:
    """Audit a world shipped as files; return the report and the audit.json the auditor wrote.

    Reasons and errors that quote a file name the world where the user has it (`shown_as`), not this copy.
    """
    import json

    from auditors import audit_world
    from contracts.errors import WorldFormatError

    with scratch_dir() as scratch:
        world = scratch / name
        unpack_dir(files, world)
        try:
            report = audit_world(world, write=True)
        except WorldFormatError as exc:
            raise WorldFormatError(str(exc).replace(str(world), shown_as)) from None
        written = (world / "audit.json").read_bytes()
    written = written.replace(json.dumps(str(world))[1:-1].encode(), json.dumps(shown_as)[1:-1].encode())
    return {"report": report, "audit_json": written, "fingerprint": fingerprint()}


# ----------------------------------------------------------------------------------------------------------
# `worldgen audit --executor ray`: the driver reads each world and writes its audit.json; tasks audit copies.


def audit_on_ray(worlds: list[Path], address: str | None = None, workers: int | None = None) -> list:
    """Audit world directories as Ray tasks; write each audit.json here, atomically; reports in `worlds` order.

    Each world is checked here first exactly as a local audit checks it (no FIFO, device or link out of the
    world is ever read), then shipped as bytes, so the cluster needs no access to this machine's disks.
    """
    from auditors.worldio import scan_world
    from contracts.errors import WorldFormatError
    from contracts.safeio import atomic_write, one_line

    mine = fingerprint()

    def items() -> Iterator[tuple[int, tuple]]:
        for i, path in enumerate(worlds):
            scan_world(path)  # the local audit's refusals, before a byte leaves this machine
            if (path / "audit.json").is_dir():
                raise WorldFormatError(f"{path}: cannot write audit.json (it is a directory)")
            try:
                files = pack_dir(path)
            except OSError as exc:
                raise WorldFormatError(f"{one_line(path)}: cannot read the world ({exc})") from None
            yield i, (path.name, files, str(path))

    reports: dict[int, object] = {}
    with _deferred_interrupt() as poll, RayPool(address, workers) as pool:
        try:
            for i, result in pool.imap_unordered(audit_task, items(), poll=poll):
                path = worlds[i]
                if result["fingerprint"] != mine:
                    raise WorldFormatError(
                        f"{path}: audited by a Ray node running other worldgen code or libraries than this "
                        "machine; install the same on every node"
                    )
                try:
                    atomic_write(path / "audit.json", result["audit_json"])
                except (OSError, ValueError) as exc:
                    raise WorldFormatError(f"{path}: cannot write audit.json ({exc})") from None
                reports[i] = result["report"]
        except TaskFailed as exc:
            path = worlds[exc.key]
            if isinstance(exc.cause, WorldFormatError):  # not a world: one line naming the user's path
                raise WorldFormatError(str(exc.cause)) from None
            raise WorldFormatError(f"{path}: could not be audited: {one_line(str(exc), 300)}") from None
    return [reports[i] for i in range(len(worlds))]


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[Callable[[], None]]:
    """Ctrl-C is recorded, then raised as KeyboardInterrupt by the poll between Ray's calls."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    received: list[int] = []

    def poll() -> None:
        if received:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield poll
    finally:
        signal.signal(signal.SIGINT, previous)


def _node() -> str:
    return os.uname().nodename if hasattr(os, "uname") else "?"

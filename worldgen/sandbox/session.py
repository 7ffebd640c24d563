"""One sandboxed Python session per episode: a fresh workspace and a persistent interpreter.

Design: a small REPL driver (`_driver.py`) runs in the sandbox and speaks one JSON line per request and per
reply over its stdin/stdout pipes. We chose this over a Jupyter kernel because kernels talk ZMQ over TCP,
which a sandbox without a network cannot reach (IPC sockets would need a shared directory and the
heartbeat/iopub machinery besides); pipes need no ports, no extra dependencies, cannot leak a socket, and
leave one process tree to kill. Variables persist between cells like a kernel's; output is captured at the
file-descriptor level, so prints from C extensions and subprocesses are observed too.

A cell that exceeds its wall-clock limit kills the whole process group (and, under bubblewrap, the pid
namespace with it); the session reports the timeout and restarts a clean interpreter (variables lost,
scratch files kept). A crash (segfault, memory exhaustion, CPU limit) is reported and restarted the same way.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from contracts.errors import WorldgenError
from worldgen.sandbox import isolation

HERE = Path(__file__).parent
# Root runs sandboxes as uids from this range, one per session, so sessions never share an NPROC budget.
UID_BASE = 100_000
UIDS_PER_PROCESS = 64
START_TIMEOUT_S = 60.0
_uid_counter = 0
_uid_lock = threading.Lock()
_warned = False


class SandboxError(WorldgenError):
    """The sandbox cannot be set up or started."""


class SandboxWarning(UserWarning):
    """The sandbox runs with resource limits only: no filesystem or network isolation."""


@dataclass(frozen=True)
class Limits:
    """Per-session resource limits. Defaults follow DSGym's executors (2-4 GB, minutes per cell)."""

    memory_mb: int = 4096  # RLIMIT_AS: address space (polars and duckdb reserve ~1 GB just to import)
    cpu_seconds: int = 900  # RLIMIT_CPU for the whole session: a backstop behind the per-cell wall clock
    file_mb: int = 512  # RLIMIT_FSIZE: largest file a cell may write
    nproc: int = 256  # RLIMIT_NPROC: processes and threads (thread pools included)
    nofile: int = 512  # RLIMIT_NOFILE
    tmp_mb: int = 512  # size of the tmpfs at /tmp
    step_timeout_s: float = 120.0  # wall clock per cell
    threads: int = 0  # BLAS/polars/OpenMP threads in the sandbox; 0 = min(4, cores)
    output_chars: int = 20_000  # stdout/stderr kept per cell (head and tail beyond that)


@dataclass
class StepResult:
    """What one cell did: the observation of a code action."""

    stdout: str = ""
    stderr: str = ""
    exception: str | None = None
    duration_s: float = 0.0
    peak_memory_mb: float | None = None
    timed_out: bool = False
    restarted: bool = False

    @property
    def ok(self) -> bool:
        return self.exception is None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Session:
    """A sandboxed Python session over one world's observed files.

    Args:
        data: directory whose files become the read-only `data/` (the world's observed/); None for none.
        limits: resource limits.
        isolation: "auto" (bubblewrap when it works here, else limits only, with one loud warning),
            "bwrap" (required: SandboxError if unavailable) or "none" (limits only).
        library: importable packages of this installation to copy in read-only (e.g. ("auditors",
            "contracts") for the reference agent); none by default.
        bwrap: path of the bwrap executable (default: $WORLDGEN_BWRAP or PATH).
    """

    data: Path | None
    limits: Limits = field(default_factory=Limits)
    isolation: str = "auto"
    library: tuple[str, ...] = ()
    bwrap: str | None = None
    isolated: bool = field(init=False, default=False)
    workspace: Path = field(init=False)
    restarts: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", "bwrap", "none"):
            raise SandboxError(f"unknown isolation {self.isolation!r}; use auto, bwrap or none")
        self._proc: subprocess.Popen | None = None
        self._buffer = b""
        self._next_id = 0
        self._base = Path(tempfile.mkdtemp(prefix="worldgen-sandbox-"))
        try:
            self._setup()
            self._spawn()
        except BaseException:
            self.close()
            raise

    # --- public -------------------------------------------------------------------------------------------

    @property
    def cwd(self) -> str:
        """The working directory as code in the sandbox sees it (data/ and scratch/ are relative to it)."""
        return isolation.WORKSPACE if self.isolated else str(self.workspace)

    def run(self, code: str, timeout: float | None = None) -> StepResult:
        """Run one cell; errors, timeouts and crashes come back as observations, never as exceptions."""
        limit = self.limits.step_timeout_s if timeout is None else timeout
        try:
            reply = self._request({"op": "exec", "code": code}, limit)
        except _Timeout:
            self._restart()
            return StepResult(
                stderr=f"TimeoutError: the cell ran longer than {limit:g} s; the Python process was killed and "
                "restarted (variables are lost, files in scratch/ are kept)",
                exception="TimeoutError",
                duration_s=limit,
                timed_out=True,
                restarted=True,
            )
        except _Died as died:
            self._restart()
            return StepResult(
                stderr=f"{died}; the Python process was restarted (variables are lost, files in scratch/ are kept)",
                exception="ProcessDied",
                restarted=True,
            )
        return StepResult(
            stdout=reply.get("stdout", ""),
            stderr=reply.get("stderr", ""),
            exception=reply.get("exception"),
            duration_s=float(reply.get("duration_s", 0.0)),
            peak_memory_mb=reply.get("peak_memory_mb"),
        )

    def state(self, timeout: float = 30.0) -> dict:
        """Variables (type, shape, columns, a few rows) and scratch files; {"error": ...} if unavailable."""
        try:
            reply = self._request({"op": "state"}, timeout)
        except _Timeout:
            self._restart()
            return {"error": "state summary timed out; the process was restarted", "variables": [], "files": []}
        except _Died as died:
            self._restart()
            return {"error": str(died), "variables": [], "files": []}
        return {"variables": reply.get("variables", []), "files": reply.get("files", [])}

    def files(self) -> list[dict]:
        """The data files the session offers: name (relative to the working directory) and size in bytes."""
        root = self.workspace / "data"
        return [
            {"path": str(p.relative_to(self.workspace)), "bytes": p.stat().st_size}
            for p in sorted(root.rglob("*"))
            if p.is_file()
        ]

    def close(self) -> None:
        self._kill()
        shutil.rmtree(self._base, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass

    # --- setup --------------------------------------------------------------------------------------------

    def _setup(self) -> None:
        self.workspace = self._base / "workspace"
        runtime, data, scratch, home = (
            self._base / "runtime",
            self.workspace / "data",
            self.workspace / "scratch",
            self._base / "home",
        )
        for folder in (runtime, data, scratch, home):
            folder.mkdir(parents=True)
        if self.data is not None:
            if not Path(self.data).is_dir():
                raise SandboxError(f"{self.data}: no such data directory")
            shutil.copytree(self.data, data, dirs_exist_ok=True, copy_function=shutil.copyfile)
        for name in ("_launcher.py", "_driver.py"):
            shutil.copyfile(HERE / name, runtime / name)
        if self.library:
            _stage_library(self.library, runtime / "lib")
        reason = self._choose_isolation()
        self._uid = _sandbox_uid() if os.geteuid() == 0 and self._can_drop_root() else None
        # Linux never enforces RLIMIT_NPROC for uid 0: without a uid switch a fork bomb is not contained.
        self.nproc_enforced = os.geteuid() != 0 or self._uid is not None
        if reason is not None:
            self._warn_once(reason)
        for path in [self._base, *self._base.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755 if path != self._base else 0o711)
            else:
                path.chmod(0o644)
        if self._uid is not None:
            for path in [scratch, home]:
                os.chown(path, self._uid, self._uid)

    def _choose_isolation(self) -> str | None:
        """Use bubblewrap if allowed and working; otherwise return why not."""
        if self.isolation == "none":
            self.isolated, self._bwrap = False, None
            return "isolation='none' was requested"
        bwrap = isolation.find_bwrap(self.bwrap)
        reason = "bubblewrap (bwrap) is not installed" if bwrap is None else isolation.probe(bwrap)
        if reason is not None and self.isolation == "bwrap":
            raise SandboxError(f"the sandbox needs bubblewrap but cannot use it: {reason[:200]}")
        self.isolated, self._bwrap = reason is None, bwrap if reason is None else None
        return reason

    def _warn_once(self, reason: str) -> None:
        global _warned
        if _warned:
            return
        _warned = True
        root = "" if self.nproc_enforced else "; running as root, so the process limit is not enforced either"
        message = (
            f"worldgen sandbox: WARNING: running agent code with resource limits ONLY ({reason[:160]}): "
            f"no filesystem or network isolation, hidden world files are readable by the agent{root}; "
            "install bubblewrap (apt-get install bubblewrap) for a real sandbox"
        )
        print(message, file=sys.stderr, flush=True)
        warnings.warn(message, SandboxWarning, stacklevel=5)

    def _can_drop_root(self) -> bool:
        """Under bwrap the runtime is re-mounted so any uid can read it; without, the host paths must allow it."""
        return self.isolated or isolation.world_traversable([*isolation.runtime_dirs(), str(self._base)])

    def _env(self) -> dict[str, str]:
        threads = str(self.limits.threads or min(4, os.cpu_count() or 1))
        home = "/tmp" if self.isolated else str(self._base / "home")
        env = {
            "HOME": home,
            "TMPDIR": home,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            "MALLOC_ARENA_MAX": "2",
        }
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
            env[name] = threads
        env["RAYON_NUM_THREADS"] = threads
        return env

    def _argv(self) -> list[str]:
        lim = self.limits
        nproc = lim.nproc + (0 if self._uid is not None else isolation.tasks_of_uid(os.getuid()))
        rlimits = {
            "RLIMIT_AS": lim.memory_mb << 20,
            "RLIMIT_CPU": lim.cpu_seconds,
            "RLIMIT_FSIZE": lim.file_mb << 20,
            "RLIMIT_NPROC": nproc,
            "RLIMIT_NOFILE": lim.nofile,
        }
        runtime = isolation.RUNTIME if self.isolated else str(self._base / "runtime")
        scratch = f"{self.cwd}/scratch"
        driver_config = {
            "scratch": scratch,
            "library": f"{runtime}/lib" if self.library else None,
            "output_chars": lim.output_chars,
            "kill_all": self.isolated or self._uid is not None,
        }
        python = [sys.executable, "-s", "-B"]
        driver = [*python, f"{runtime}/_driver.py", json.dumps(driver_config)]
        launcher = [
            *python,
            f"{runtime}/_launcher.py",
            json.dumps({"rlimits": rlimits, "uid": self._uid, "argv": driver}),
        ]
        if not self.isolated:
            return launcher
        as_root = os.geteuid() == 0
        prefix = isolation.bwrap_argv(
            self._bwrap, self.workspace, self._base / "runtime", self._env(), lim.tmp_mb << 20, as_root
        )
        return prefix + launcher

    def _spawn(self) -> None:
        stderr_path = self._base / "runtime-stderr.txt"
        with open(stderr_path, "wb") as stderr:
            self._proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=self.workspace,
                env=None if self.isolated else self._env(),
                start_new_session=True,
                close_fds=True,
            )
        self._buffer = b""
        try:
            ready = self._read_reply(time.monotonic() + START_TIMEOUT_S)
        except (_Timeout, _Died) as exc:
            detail = stderr_path.read_text(errors="replace").strip()[-300:]
            self._kill()
            raise SandboxError(f"the sandboxed interpreter did not start ({exc}): {detail or 'no output'}") from None
        if not ready.get("ready"):
            self._kill()
            raise SandboxError(f"the sandboxed interpreter sent an unexpected greeting: {str(ready)[:200]}")

    # --- protocol -----------------------------------------------------------------------------------------

    def _request(self, payload: dict, timeout: float) -> dict:
        if self._proc is None or self._proc.poll() is not None:
            self._restart()
        assert self._proc is not None and self._proc.stdin is not None
        self._next_id += 1
        payload = {"id": self._next_id, **payload}
        deadline = time.monotonic() + timeout
        try:
            self._proc.stdin.write(json.dumps(payload).encode() + b"\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Died(self._death_reason()) from None
        while True:
            reply = self._read_reply(deadline)
            if reply.get("id") == self._next_id:
                if "protocol_error" in reply:
                    raise _Died(f"the driver rejected the request: {reply['protocol_error'][:200]}")
                return reply
            # A stale line (user code writing to the reply descriptor) is skipped, never trusted.

    def _read_reply(self, deadline: float) -> dict:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Timeout()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise _Died(self._death_reason())
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return {}
        return reply if isinstance(reply, dict) else {}

    def _death_reason(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the Python process stopped answering"
        if code < 0 or code > 128:
            number = -code if code < 0 else code - 128
            name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
            hint = {
                "SIGXCPU": f" (CPU time limit of {self.limits.cpu_seconds} s per session reached)",
                "SIGKILL": " (killed, e.g. by the CPU time limit)",
                "SIGABRT": " (aborted, often a failed memory allocation)",
                "SIGSEGV": " (segmentation fault)",
            }.get(name, "")
            return f"the Python process was killed by {name}{hint}"
        return f"the Python process exited with code {code}"

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self._spawn()

    def _kill(self) -> None:
        proc, self._proc = getattr(self, "_proc", None), None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except (OSError, AttributeError):
                pass


class _Timeout(Exception):
    pass


class _Died(Exception):
    pass


def _sandbox_uid() -> int:
    """A uid no other live session of this process uses: NPROC is counted per uid, host-wide."""
    global _uid_counter
    with _uid_lock:
        _uid_counter += 1
        slot = _uid_counter % UIDS_PER_PROCESS
    return UID_BASE + (os.getpid() % 100_000) * UIDS_PER_PROCESS + slot


def _stage_library(names: tuple[str, ...], target: Path) -> None:
    """Copy the named packages' sources (no data, no caches) for import inside the sandbox."""
    import importlib

    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:
            raise SandboxError(f"cannot stage package {name!r} into the sandbox: not importable") from None
        source = Path(module.__file__).parent
        shutil.copytree(
            source,
            target / name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            copy_function=shutil.copyfile,
        )

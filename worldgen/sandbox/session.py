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
import shutil
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from worldgen.sandbox import isolation
from worldgen.sandbox.channel import Channel, Died, Timeout
from worldgen.sandbox.workspace import SandboxError, grant, make_workspace, sandbox_uid

_warned = False


class SandboxWarning(UserWarning):
    """The sandbox runs with resource limits only: no filesystem or network isolation."""


@dataclass(frozen=True)
class Limits:
    """Per-session resource limits (DSGym's executors: 2 GB and 180 s per cell; see each line for ours)."""

    memory_mb: int = 4096  # RLIMIT_AS caps address space, not RSS: importing polars+duckdb maps ~0.8 GB already
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
        self._channel: Channel | None = None
        self._base = Path(tempfile.mkdtemp(prefix="worldgen-sandbox-"))
        self.workspace = self._base / "workspace"
        try:
            make_workspace(self._base, self.data, self.library)
            reason = self._choose_isolation()
            self._uid = sandbox_uid() if os.geteuid() == 0 and self._can_drop_root() else None
            # Linux never enforces RLIMIT_NPROC for uid 0: without a uid switch a fork bomb is not contained.
            self.nproc_enforced = os.geteuid() != 0 or self._uid is not None
            if reason is not None:
                self._warn_once(reason)
            grant(self._base, self._uid)
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
        except Timeout:
            self._restart()
            return StepResult(
                stderr=f"TimeoutError: the cell ran longer than {limit:g} s; the Python process was killed and "
                "restarted (variables are lost, files in scratch/ are kept)",
                exception="TimeoutError",
                duration_s=limit,
                timed_out=True,
                restarted=True,
            )
        except Died as died:
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
        except Timeout:
            self._restart()
            return {"error": "state summary timed out; the process was restarted", "variables": [], "files": []}
        except Died as died:
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
        return self.isolated or isolation.world_traversable(
            [*isolation.runtime_dirs(), *filter(None, [isolation.venv_dir()]), str(self._base)]
        )

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
        python = [isolation.sandbox_python() if self.isolated else sys.executable, "-s", "-B"]
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
        env = None if self.isolated else self._env()
        self._channel = Channel(self._argv(), self.workspace, env, stderr_path)
        try:
            ready = self._channel.greeting()
        except (Timeout, Died) as exc:
            detail = stderr_path.read_text(errors="replace").strip()[-300:]
            self._kill()
            raise SandboxError(f"the sandboxed interpreter did not start ({exc}): {detail or 'no output'}") from None
        if not ready.get("ready"):
            self._kill()
            raise SandboxError(f"the sandboxed interpreter sent an unexpected greeting: {str(ready)[:200]}")

    def _request(self, payload: dict, timeout: float) -> dict:
        if self._channel is None or not self._channel.alive():
            self._restart()
        assert self._channel is not None
        return self._channel.request(payload, timeout)

    def _restart(self) -> None:
        self._kill()
        self.restarts += 1
        self._spawn()

    def _kill(self) -> None:
        channel, self._channel = getattr(self, "_channel", None), None
        if channel is not None:
            channel.kill()

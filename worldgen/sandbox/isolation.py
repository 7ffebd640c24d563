"""How a sandboxed process is started: the bubblewrap command line, its probe, and the limits-only fallback.

Bubblewrap gets new mount, pid, ipc, uts, cgroup and network namespaces (no network at all: its loopback
is its own), an empty root holding only read-only binds of the Python runtime, the session's workspace and a
size-capped tmpfs at /tmp; nothing else of the host (no /work, no /root, no world directory). As an
unprivileged user, `--unshare-all` also gives a user namespace. As root, a user namespace would map the
sandbox onto kernel uid 0, for which Linux never enforces RLIMIT_NPROC; so as root the host user namespace
is kept and the launcher switches to a fresh unprivileged uid before running anything (capabilities are
limited to the two it needs for that and vanish with the switch).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Inside-sandbox locations: what code running in the sandbox sees.
WORKSPACE = "/workspace"
RUNTIME = "/opt/worldgen-sandbox"
# A virtual environment is mounted here, not at its host path: a venv inside a checkout (CI's .venv) would
# otherwise make the checkout's path exist in the sandbox.
VENV = "/opt/worldgen-python"
ROOT_NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")
SYSTEM_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32", "/usr/bin", "/usr/share/zoneinfo")
TOP_LINKS = ("/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin")
SYSTEM_FILES = ("/etc/ld.so.cache",)

_probe_cache: dict[str, str | None] = {}


def venv_dir() -> str | None:
    """The host directory of the virtual environment this interpreter runs in, if any."""
    return os.path.realpath(sys.prefix) if sys.prefix != sys.base_prefix else None


def sandbox_python() -> str:
    """The interpreter's path as the sandboxed process sees it."""
    venv = venv_dir()
    return f"{VENV}/bin/{os.path.basename(sys.executable)}" if venv else sys.executable


def runtime_dirs() -> list[str]:
    """The host directories the interpreter needs: the base installation and the system libraries."""
    wanted = {sys.base_prefix, sys.base_exec_prefix}
    if venv_dir() is None:
        wanted |= {sys.prefix, sys.exec_prefix}
    wanted |= {os.path.realpath(p) for p in wanted}
    wanted.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    wanted |= {d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)}
    ordered = sorted(p for p in wanted if os.path.isdir(p))
    return [p for p in ordered if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in ordered)]


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def bwrap_argv(
    bwrap: str, workspace: Path, runtime: Path, env: dict[str, str], tmp_bytes: int, as_root: bool
) -> list[str]:
    """The bubblewrap prefix of the sandbox command (the command itself follows)."""
    argv = [bwrap]
    if as_root:
        argv += [*ROOT_NAMESPACES, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all"]
    argv += ["--die-with-parent", "--new-session", "--clearenv"]
    made: set[str] = set()

    def parents(dest: str) -> None:
        for folder in _ancestors(dest):
            if folder not in made:
                made.add(folder)
                argv.extend(["--perms", "0755", "--dir", folder])

    for link in TOP_LINKS:
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            argv += ["--ro-bind", link, link]
    for folder in runtime_dirs():
        parents(folder)
        argv += ["--ro-bind", folder, folder]
    if venv_dir():
        parents(VENV)
        argv += ["--ro-bind", venv_dir(), VENV]
    for file in SYSTEM_FILES:
        if os.path.isfile(file):
            parents(file)
            argv += ["--ro-bind", file, file]
    parents(RUNTIME + "/x")
    argv += ["--ro-bind", str(runtime), RUNTIME]
    argv += ["--perms", "0755", "--dir", WORKSPACE]
    argv += ["--ro-bind", str(workspace / "data"), f"{WORKSPACE}/data"]
    argv += ["--bind", str(workspace / "scratch"), f"{WORKSPACE}/scratch"]
    argv += ["--size", str(tmp_bytes), "--perms", "01777", "--tmpfs", "/tmp"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", WORKSPACE]
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    return argv + ["--"]


def find_bwrap(path: str | None = None) -> str | None:
    """The bwrap executable to use (an explicit path, $WORLDGEN_BWRAP, or PATH), or None."""
    candidate = path or os.environ.get("WORLDGEN_BWRAP") or shutil.which("bwrap")
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def probe(bwrap: str) -> str | None:
    """None if bubblewrap can start the interpreter here, else the reason it cannot (cached per process)."""
    if bwrap in _probe_cache:
        return _probe_cache[bwrap]
    as_root = os.geteuid() == 0
    argv = [bwrap, *(ROOT_NAMESPACES if as_root else ("--unshare-all",)), "--die-with-parent", "--clearenv"]
    for link in TOP_LINKS:
        if os.path.islink(link):
            argv += ["--symlink", os.readlink(link), link]
    made: set[str] = set()
    for folder in runtime_dirs():
        for parent in _ancestors(folder):
            if parent not in made:
                made.add(parent)
                argv += ["--perms", "0755", "--dir", parent]
        argv += ["--ro-bind", folder, folder]
    if venv_dir():
        argv += ["--perms", "0755", "--dir", os.path.dirname(VENV), "--ro-bind", venv_dir(), VENV]
    argv += ["--proc", "/proc", "--dev", "/dev", "--", sandbox_python(), "-c", "print('ok')"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        reason = None if done.stdout.strip() == "ok" else (done.stderr.strip() or f"exit code {done.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"{type(exc).__name__}: {exc}"
    _probe_cache[bwrap] = reason
    return reason


def world_traversable(paths: list[str]) -> bool:
    """Whether another uid could reach every path (each ancestor searchable by others)."""
    for path in paths:
        for folder in [*_ancestors(path + "/x")]:
            try:
                if not os.stat(folder).st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


def tasks_of_uid(uid: int) -> int:
    """Threads and processes the uid runs now (RLIMIT_NPROC counts them all, host-wide)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count

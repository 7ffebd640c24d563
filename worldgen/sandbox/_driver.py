"""The persistent Python REPL that runs inside the sandbox (stdlib only, never imported by worldgen).

Protocol: one JSON request per line on the original stdin, one JSON reply per line on the original stdout;
both are moved to private descriptors at start, so user code reading stdin sees an empty file and
anything it prints (from Python, C extensions or subprocesses) lands in per-cell capture files.

- {"id": n, "op": "exec", "code": str} -> {"id": n, "stdout", "stderr", "exception", "duration_s",
  "peak_memory_mb"}: the cell runs in one namespace that persists across cells; a final expression's value
  is printed, as in a notebook.
- {"id": n, "op": "state"} -> {"id": n, "variables": [...], "files": [...]}: a summary of the namespace
  (type, shape, columns, a few rows) and of the files under scratch/.

argv[1] is a JSON object: {"scratch": path, "library": path | null, "output_chars": int}.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import signal
import sys
import tempfile
import time
import traceback

MAX_VARIABLES = 50
MAX_FILES = 100
HEAD_ROWS = 3
REPR_CHARS = 200


def main() -> None:
    config = json.loads(sys.argv[1])
    sys.path[:] = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    if config.get("library"):
        sys.path.insert(0, config["library"])
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    cells = tempfile.mkdtemp(prefix=".cells-")
    repl = Repl(config, cells)
    _send(replies, {"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]})
    for line in requests:
        try:
            request = json.loads(line)
            handler = {"exec": repl.run, "state": repl.state}[request["op"]]
            reply = handler(request)
        except Exception as exc:  # noqa: BLE001 - a malformed request is answered, never fatal
            reply = {"protocol_error": f"{type(exc).__name__}: {exc}"}
            request = request if isinstance(request, dict) else {}
        _send(replies, {"id": request.get("id"), **reply})


def _send(stream, payload: dict) -> None:
    stream.write(json.dumps(payload, default=str).encode() + b"\n")
    stream.flush()


class Repl:
    def __init__(self, config: dict, cells: str):
        self.namespace: dict = {"__name__": "__main__", "__builtins__": builtins}
        self.scratch = config["scratch"]
        self.limit = int(config.get("output_chars", 20000))
        self.cells = cells
        self.count = 0
        self.pid = os.getpid()
        # kill(-1) reaches exactly the sandbox's processes in its own pid namespace or under its own uid.
        self.kill_all = bool(config.get("kill_all"))

    def run(self, request: dict) -> dict:
        self.count += 1
        name = f"<cell {self.count}>"
        # Fresh files per cell: a child still running from an earlier cell keeps writing to its own copies.
        out_path = os.path.join(self.cells, f"out-{self.count}")
        err_path = os.path.join(self.cells, f"err-{self.count}")
        _redirect(out_path, err_path)
        _reset_peak_memory()
        exception = None
        started = time.perf_counter()
        try:
            tree = ast.parse(request["code"], filename=name)
        except SyntaxError as exc:
            exception = type(exc).__name__
            sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
            tree = None
        if tree is not None:
            try:
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, name, "exec"), self.namespace)
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), name, "eval"), self.namespace)
                    if value is not None:
                        self.namespace["_"] = value
                        print(repr(value))
            except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are observations too
                exception = type(exc).__name__
                traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        duration = time.perf_counter() - started
        _flush()
        if os.getpid() != self.pid:  # a child forked by the cell must never answer requests
            os._exit(0)
        stopped = self.sweep()
        if stopped:
            with open(err_path, "a") as handle:
                handle.write(f"\n[sandbox] stopped {stopped} process(es) this cell left running\n")
        reply = {
            "stdout": _read_capped(out_path, self.limit),
            "stderr": _read_capped(err_path, self.limit),
            "exception": exception,
            "duration_s": round(duration, 6),
            "peak_memory_mb": _peak_memory_mb(),
        }
        for path in (out_path, err_path):
            os.unlink(path)
        return reply

    def sweep(self) -> int:
        """Stop every process the cell left behind (a cell's children do not outlive it; fork bombs end here)."""
        stopped = 0
        for _ in range(200):
            _reap()
            others = _session_processes(self.pid)
            if not others:
                break
            stopped = max(stopped, len(others))
            targets = [-1] if self.kill_all else others
            for pid in targets:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        _reap()
        return stopped

    def state(self, request: dict) -> dict:
        variables = []
        for key, value in list(self.namespace.items()):
            if key.startswith("_") or type(value).__name__ == "module":
                continue
            if len(variables) >= MAX_VARIABLES:
                break
            try:
                variables.append(summarise(key, value))
            except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the record
                variables.append({"name": key, "type": _type_name(value), "error": f"{type(exc).__name__}"})
        return {"variables": variables, "files": _files(self.scratch)}


def _redirect(out_path: str, err_path: str) -> None:
    _flush()
    for fd, path in ((1, out_path), (2, err_path)):
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(handle, fd)
        os.close(handle)


def _session_processes(me: int) -> list[int]:
    """Live processes of this session other than the driver (zombies excluded)."""
    sid = os.getsid(0)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (me, 1):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z" and int(fields[3]) == sid:
            found.append(int(name))
    return found


def _reap() -> None:
    """Collect exited children, so a fork bomb's zombies stop counting against the process limit."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed or replaced stream has nothing to flush
            pass


def _read_capped(path: str, limit: int) -> str:
    with open(path, "rb") as handle:
        data = handle.read(4 * limit + 1)
        size = os.fstat(handle.fileno()).st_size
    text = data.decode("utf-8", errors="replace")
    if len(text) <= limit and size <= len(data):
        return text
    half = limit // 2
    return f"{text[:half]}\n... [output truncated: {size} bytes in all] ...\n{text[-half:]}"


def _reset_peak_memory() -> None:
    try:  # writing 5 resets VmHWM (Linux), so the peak is this cell's own
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def _peak_memory_mb() -> float | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _type_name(value) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 3] + "..."


def summarise(name: str, value) -> dict:
    """Type, shape, columns and a few rows of a value, duck-typed so pandas/polars/numpy are never imported."""
    info: dict = {"name": name, "type": _type_name(value)}
    module = type(value).__module__.split(".")[0]
    if callable(value) and not hasattr(value, "shape"):
        return info
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        info["shape"] = list(shape)
    if module in ("pandas", "polars") and hasattr(value, "columns"):
        info["columns"] = [str(c) for c in list(value.columns)[:50]]
        if module == "pandas":
            info["dtypes"] = [str(t) for t in list(value.dtypes)[:50]]
            info["head"] = json.loads(value.head(HEAD_ROWS).to_json(orient="records", date_format="iso"))
        else:
            info["dtypes"] = [str(t) for t in list(value.dtypes)[:50]]
            info["head"] = json.loads(json.dumps(value.head(HEAD_ROWS).to_dicts(), default=str))
    elif module in ("pandas", "polars") and hasattr(value, "dtype"):  # a Series
        info["dtype"] = str(value.dtype)
        info["head"] = json.loads(json.dumps(list(value[:HEAD_ROWS]), default=str))
    elif module == "numpy" and hasattr(value, "dtype") and shape is not None:
        info["dtype"] = str(value.dtype)
        info["head"] = json.loads(json.dumps(value.reshape(-1)[:HEAD_ROWS].tolist(), default=str))
    elif isinstance(value, list | tuple | dict | set | frozenset):
        info["length"] = len(value)
        info["repr"] = _short(value)
    else:
        info["repr"] = _short(value)
    return info


def _files(root: str) -> list[dict]:
    found = []
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(folder, name)
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            found.append({"path": os.path.relpath(path, os.path.dirname(root)), "bytes": size})
            if len(found) >= MAX_FILES:
                return found
    return found


if __name__ == "__main__":
    main()

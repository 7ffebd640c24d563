"""The sandbox: agent code sees only the observed files, cannot reach the network or the hidden world, is held
to its limits, and survives (or is cleanly restarted after) every attempt to break out.

Each escape attempt must fail inside the sandbox, and the failure must come back as the observation. Where
bubblewrap is unavailable the filesystem and network tests assert the loud limits-only warning instead.
"""

from __future__ import annotations

import json
import socket
import threading
import warnings
from pathlib import Path

import pytest

from worldgen.sandbox import Limits, SandboxWarning, Session
from worldgen.sandbox import session as session_module

HIDDEN = ("contract.json", "projection.json", "ledger.jsonl", "audit.json", "world.json")
LIMITS = Limits(memory_mb=2048, step_timeout_s=30, nproc=96, file_mb=64, tmp_mb=64)


@pytest.fixture(scope="module")
def world(world_dirs) -> Path:
    return world_dirs[0]


@pytest.fixture(scope="module")
def session(world):
    session_module._warned = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = Session(world / "observed", LIMITS)
    s.creation_warnings = [w for w in caught if issubclass(w.category, SandboxWarning)]
    yield s
    s.close()


def require_isolation(session: Session) -> None:
    """Without bubblewrap these escapes are not prevented: then the loud warning is what must hold."""
    if not session.isolated:
        assert session.creation_warnings, "running without isolation must warn"
        pytest.skip("bubblewrap unavailable here: limits-only mode, warning asserted")


def alive(session: Session) -> None:
    result = session.run("print(6 * 7)")
    assert result.ok and result.stdout.strip() == "42", result


def test_session_runs_cells_in_one_persistent_namespace(session):
    result = session.run("import pandas, polars, pyarrow, openpyxl, numpy, duckdb\nx = 41\nx + 1")
    assert result.ok, result.stderr
    assert result.stdout.strip() == "42"
    assert session.run("x").stdout.strip() == "41", "variables persist between cells"
    error = session.run("1 / 0")
    assert error.exception == "ZeroDivisionError" and "ZeroDivisionError" in error.stderr
    shell = session.run("import os\nos.system('echo from-a-subprocess')")
    assert "from-a-subprocess" in shell.stdout, "output of child processes is captured too"
    assert session.run("x").stdout.strip() == "41"


def test_session_sees_the_observed_files_read_only(session, world):
    names = sorted(p.name for p in (world / "observed").iterdir())
    listed = session.run("import json, os\nprint(json.dumps(sorted(os.listdir('data'))))")
    assert json.loads(listed.stdout) == names
    assert [f["path"] for f in session.files()] == [f"data/{n}" for n in names]
    wrote = session.run("open('scratch/notes.txt', 'w').write('kept')")
    assert wrote.ok
    state = session.state()
    assert {"path": "scratch/notes.txt", "bytes": 4} in state["files"]
    table = session.run(
        "import polars as pl\nframe = pl.DataFrame({'a': [1, 2, 3, 4], 'b': ['w', 'x', 'y', 'z']})\nframe.shape"
    )
    assert table.ok
    summary = next(v for v in session.state()["variables"] if v["name"] == "frame")
    assert summary["shape"] == [4, 2] and summary["columns"] == ["a", "b"] and len(summary["head"]) == 3


def _hidden_paths(world: Path) -> list[str]:
    task = next((world / "tasks").glob("*.json"))
    return [
        "../canonical/units.parquet",
        "../../canonical/events.parquet",
        "../contract.json",
        f"../tasks/{task.name}",
        "data/../../contract.json",
        str(world / "contract.json"),
        str(world / "canonical" / "units.parquet"),
        str(task),
        str(world / "projection.json"),
        str(world / "audit.json"),
    ]


def test_hidden_world_files_cannot_be_read(session, world):
    require_isolation(session)
    for path in _hidden_paths(world):
        result = session.run(f"print(open({path!r}, 'rb').read()[:40])")
        assert result.exception in ("FileNotFoundError", "PermissionError"), (path, result)
        assert result.exception in result.stderr and not result.stdout, "the failure is the observation"
    listing = session.run(f"import os\nos.listdir({str(world)!r})")
    assert listing.exception == "FileNotFoundError", listing
    parent = session.run("import os\nprint(sorted(os.listdir('..')), sorted(os.listdir('/')))")
    assert not any(name in parent.stdout for name in ("canonical", "tasks", "observed", *HIDDEN))
    alive(session)


def test_nothing_of_the_world_or_the_repository_is_anywhere_in_the_sandbox(session, world):
    require_isolation(session)
    task_ids = [p.stem for p in (world / "tasks").glob("*.json")]
    code = f"""import os
hits = []
for root, dirs, files in os.walk('/'):
    if root in ('/proc', '/dev', '/sys', '/usr'):  # /usr: the host OS's own libraries, bound as they are
        dirs[:] = []
        continue
    for name in dirs + files:
        if name in {HIDDEN!r} or name == 'canonical' or {world.name!r} in name or any(t in name for t in {task_ids!r}):
            hits.append(os.path.join(root, name))
print(hits)
"""
    result = session.run(code, timeout=120)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "[]", result.stdout[:500]
    for path in (world, world.parent, Path(__file__).resolve().parents[1], Path.home() / ".cache", "/etc/passwd"):
        probe = session.run(f"import os\nos.stat({str(path)!r})")
        assert probe.exception == "FileNotFoundError", (path, probe)


@pytest.fixture()
def host_server():
    """A TCP server on the host's loopback that records any connection it gets."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    hits, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                hits.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], hits
    stop.set()
    thread.join()
    server.close()


def test_no_network_not_even_the_hosts_loopback(session, host_server):
    require_isolation(session)
    port, hits = host_server
    local = session.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)")
    assert local.exception in ("ConnectionRefusedError", "OSError", "TimeoutError"), local
    external = session.run("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)")
    assert external.exception in ("OSError", "TimeoutError", "ConnectionRefusedError"), external
    dns = session.run("import socket\nsocket.getaddrinfo('example.com', 80)")
    assert dns.exception is not None
    assert hits == [], "the sandbox reached a server on the host"
    alive(session)


def test_writes_outside_scratch_fail(session, world, tmp_path):
    require_isolation(session)
    first = sorted(p.name for p in (world / "observed").iterdir())[0]
    for path in (f"data/{first}", "data/new.csv", "../escape.txt", "/escape.txt", "/opt/x", str(tmp_path / "x")):
        result = session.run(f"open({path!r}, 'w').write('x')")
        assert result.exception in ("OSError", "PermissionError", "FileNotFoundError"), (path, result)
    assert not (tmp_path / "x").exists()
    assert (world / "observed" / first).read_bytes()[:1] != b"x"
    private = session.run("open('/tmp/sandbox-private-marker', 'w').write('x')")
    assert private.ok and not Path("/tmp/sandbox-private-marker").exists(), "/tmp is the sandbox's own"
    alive(session)


def test_fork_bomb_is_contained(session):
    if not session.nproc_enforced:
        assert session.creation_warnings, "an unenforced process limit must be warned about"
        pytest.skip("process limit not enforceable here (root without a uid switch): warning asserted")
    result = session.run("import os\nwhile True:\n    os.fork()", timeout=60)
    assert result.exception in ("BlockingIOError", "TimeoutError"), result
    alive(session)


def test_memory_limit_turns_a_huge_allocation_into_an_error(session):
    result = session.run(f"block = bytearray({10 * LIMITS.memory_mb} << 20)")
    assert result.exception == "MemoryError", result
    grow = session.run("import numpy as np\nchunks = []\nwhile True:\n    chunks.append(np.ones(32 << 17))", timeout=60)
    assert grow.exception in ("MemoryError", "ProcessDied"), grow
    alive(session)


def test_infinite_loop_times_out_and_the_session_restarts_clean(session):
    session.run("kept = 'before'")
    open_file = session.run("open('scratch/survives.txt', 'w').write('x')")
    assert open_file.ok
    looped = session.run("while True:\n    pass", timeout=2)
    assert looped.timed_out and looped.restarted and looped.exception == "TimeoutError"
    assert "2 s" in looped.stderr
    lost = session.run("kept")
    assert lost.exception == "NameError", "a restart starts a clean interpreter"
    assert session.run("import os\nos.path.exists('scratch/survives.txt')").stdout.strip() == "True"
    big = session.run("print('x' * 10**6)")
    assert len(big.stdout) < 30_000 and "truncated" in big.stdout
    alive(session)


def test_nothing_leaks_from_one_episode_to_the_next(world, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-host-only-value")
    with Session(world / "observed", LIMITS) as first:
        environment = first.run("import os\nprint(dict(os.environ))")
        assert "ANTHROPIC_API_KEY" not in environment.stdout and "sk-host-only-value" not in environment.stdout
        assert first.run("secret = 123\nopen('scratch/left.txt', 'w').write('x')\nopen('/tmp/left', 'w')").ok
        workspace = first.workspace
    assert not workspace.exists(), "a closed session leaves nothing on the host"
    with Session(world / "observed", LIMITS) as second:
        assert second.run("secret").exception == "NameError"
        files = second.run("import os\nprint(os.listdir('scratch'), os.path.exists('/tmp/left'))")
        assert files.stdout.strip() == "[] False" if second.isolated else files.stdout.startswith("[]")


def test_without_bubblewrap_it_runs_with_limits_only_and_warns_once(world, capfd):
    session_module._warned = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sessions = [Session(world / "observed", LIMITS, bwrap="/nonexistent/bwrap") for _ in range(2)]
    try:
        assert all(not s.isolated for s in sessions)
        assert len([w for w in caught if issubclass(w.category, SandboxWarning)]) == 1
        err = capfd.readouterr().err
        assert err.count("WARNING: running agent code with resource limits ONLY") == 1
        assert sessions[0].run("x = 2\nx * 21").stdout.strip() == "42"
        assert sessions[0].run(f"bytearray({10 * LIMITS.memory_mb} << 20)").exception == "MemoryError"
        assert sessions[1].run("while True: pass", timeout=1).timed_out
        assert sessions[1].run("print('back')").stdout.strip() == "back"
    finally:
        for s in sessions:
            s.close()

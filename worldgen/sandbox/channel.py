"""The pipe to the sandboxed REPL driver: start it, send a request, read the reply, kill it.

One JSON line per request on the driver's stdin, one per reply on its stdout (see `_driver.py`). A reply
that does not carry the request's id (user code writing to the reply descriptor) is skipped, never trusted.
Timeouts and the driver's death are exceptions here; `Session` turns them into observations.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 60.0
SIGNAL_HINTS = {
    "SIGXCPU": " (the CPU time limit per session was reached)",
    "SIGKILL": " (killed, e.g. by the CPU time limit)",
    "SIGABRT": " (aborted, often a failed memory allocation)",
    "SIGSEGV": " (segmentation fault)",
}


class Timeout(Exception):
    """No reply before the deadline."""


class Died(Exception):
    """The driver exited or broke the protocol; the message says how."""


class Channel:
    """A running driver process (a new session and process group of its own) and its reply buffer."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None, stderr_path: Path):
        with open(stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        self.buffer = b""
        self.next_id = 0

    def greeting(self) -> dict:
        return self._read(time.monotonic() + START_TIMEOUT_S)

    def request(self, payload: dict, timeout: float) -> dict:
        assert self.proc.stdin is not None
        self.next_id += 1
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(json.dumps({"id": self.next_id, **payload}).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise Died(self.death_reason()) from None
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "protocol_error" in reply:
                    raise Died(f"the driver rejected the request: {reply['protocol_error'][:200]}")
                return reply

    def _read(self, deadline: float) -> dict:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout()
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise Died(self.death_reason())
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return {}
        return reply if isinstance(reply, dict) else {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def death_reason(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the Python process stopped answering"
        if code < 0 or code > 128:
            number = -code if code < 0 else code - 128
            name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
            return f"the Python process was killed by {name}{SIGNAL_HINTS.get(name, '')}"
        return f"the Python process exited with code {code}"

    def kill(self) -> None:
        """Kill the whole process group (under bubblewrap, the pid namespace dies with its init)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except (OSError, AttributeError):
                pass

"""A full-page PNG of a local page through headless Chromium, spoken to over its DevTools pipe.

`chromium --screenshot` captures only the window, so `worldgen show --png` drives the browser itself:
`--remote-debugging-pipe` gives the DevTools protocol on file descriptors 3 (commands in) and 4 (replies
out), NUL-separated JSON. No Python dependency and no network port: open a tab, load the page, measure it,
resize the viewport to the whole page, capture, close. A small trampoline (`python -c`) moves our pipe ends
onto descriptors 3 and 4 in the child, whatever numbers they had here.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from contracts.errors import InputError

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
ENV_BROWSER = "WORLDGEN_CHROMIUM"  # a browser binary to use instead of the first of CANDIDATES on PATH
TIMEOUT_S = 60.0  # the whole capture; a card loads in well under a second
MAX_HEIGHT = 30_000  # pixels: a taller page is cut (Chromium's own texture limit is about this)
_TRAMPOLINE = (
    "import fcntl,os,sys\n"
    "a=fcntl.fcntl(int(sys.argv[1]),fcntl.F_DUPFD,10);b=fcntl.fcntl(int(sys.argv[2]),fcntl.F_DUPFD,10)\n"
    "os.dup2(a,3);os.dup2(b,4);os.execv(sys.argv[3],sys.argv[3:])"
)


def find_browser() -> str | None:
    """The browser to use: $WORLDGEN_CHROMIUM, else the first Chromium or Chrome on PATH; None if none."""
    chosen = os.environ.get(ENV_BROWSER)
    if chosen:
        return shutil.which(chosen)
    return next((found for name in CANDIDATES if (found := shutil.which(name))), None)


class _DevTools:
    """One DevTools session over the pipe: send a command, wait for its reply, remember events."""

    def __init__(self, proc: subprocess.Popen, write_fd: int, read_fd: int, deadline: float) -> None:
        self.proc, self.write_fd, self.read_fd, self.deadline = proc, write_fd, read_fd, deadline
        self.next_id, self.buffer, self.events = 0, b"", []

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise InputError(f"the browser refused {method}: {reply['error'].get('message', reply['error'])}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())

    def _read(self) -> dict:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            ready, _, _ = select.select([self.read_fd], [], [], max(left, 0))
            if not ready:
                raise InputError(f"the browser did not finish the screenshot within {TIMEOUT_S:.0f}s")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise InputError(f"the browser exited (code {self.proc.poll()}) before the screenshot was taken")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)


def screenshot(page: Path, width: int = 1280, height: int | None = None, top: int = 0) -> bytes:
    """PNG bytes of the page at `width` CSS pixels, from `top` down `height` pixels (default: to the end).

    InputError (one line) if no browser can do it.
    """
    browser = find_browser()
    if browser is None:
        raise InputError(
            f"--png needs Chromium or Chrome (none on PATH; install the 'chromium' package or set ${ENV_BROWSER})"
        )
    to_browser, from_browser = os.pipe(), os.pipe()
    with tempfile.TemporaryDirectory(prefix="worldgen-chromium-") as profile:
        args = [browser, "--headless", "--disable-gpu", "--hide-scrollbars", "--remote-debugging-pipe"]
        args += ["--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio"]
        args += ["--disable-background-networking", "--disable-sync", f"--user-data-dir={profile}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run its sandbox as root (containers, CI)
        command = [sys.executable, "-c", _TRAMPOLINE, str(to_browser[0]), str(from_browser[1]), *args]
        proc = subprocess.Popen(
            command,
            pass_fds=(to_browser[0], from_browser[1]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser[0])
        os.close(from_browser[1])
        try:
            tools = _DevTools(proc, to_browser[1], from_browser[0], time.monotonic() + TIMEOUT_S)
            return _capture(tools, page.resolve().as_uri(), width, height, top)
        finally:
            os.close(to_browser[1])
            os.close(from_browser[0])
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _capture(tools: _DevTools, url: str, width: int, height: int | None, top: int) -> bytes:
    target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    tools.call("Page.enable", session=session)
    metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    tools.call("Emulation.setDeviceMetricsOverride", metrics, session=session)
    tools.call("Page.navigate", {"url": url}, session=session)
    tools.wait_for("Page.loadEventFired")
    size = tools.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
    full = min(int(size["height"] + 0.999), MAX_HEIGHT)
    tools.call("Emulation.setDeviceMetricsOverride", metrics | {"height": full}, session=session)
    top = min(max(top, 0), full - 1)
    clip = {"x": 0, "y": top, "width": width, "height": min(height or full, full - top), "scale": 1}
    shot = tools.call("Page.captureScreenshot", {"format": "png", "clip": clip}, session=session)
    try:
        tools.call("Browser.close")
    except InputError:
        pass  # closing races with the pipe closing; the screenshot is taken
    return base64.b64decode(shot["data"])

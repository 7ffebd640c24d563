"""Bad input to `worldgen export` (the command is being built on another track; its cases go here).

Each case is a `Case(id, make, expect, code=2, may_change=(), installed=False)`: `make(sandbox)` prepares
files under the sandbox and returns the argument list, e.g.

    Case(
        "bench-from-a-fifo",
        lambda sb: ["export", "bench", str(sb.fifo("build")), "--out", str(sb.path("bench"))],
        "FIFO",
    )

and `tests/test_bad_input.py` asserts exit code, one stderr line, no traceback, an unchanged sandbox
(outside `may_change`) and a bounded run time. Worth covering when export lands: a source build that is not
ours or is locked by a running build, worlds that fail their audit or whose world.json and audit.json
disagree, links and special files inside worlds, an --out that is not empty and not an export of ours,
split sizes beyond the worlds available, and the JSON readers going through contracts.safeio.
"""

from __future__ import annotations

from tests.badinput.harness import Case

CASES: list[Case] = []

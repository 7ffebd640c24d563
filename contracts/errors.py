"""The one error hierarchy shared by the generator, the auditor and the CLI.

Every error a user can cause is a `WorldgenError`; the CLI prints its message on one line and exits 2.
Contract and pack validators collect every problem first and raise once, so a user fixes a file in one
pass; persona files, tasks and answers stop at the first bad record and name it (record, field).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class WorldgenError(Exception):
    """Base class for problems caused by user input (flags, files, worlds)."""

    exit_code = 2


class InputError(WorldgenError):
    """A flag or argument is invalid."""


class PackError(WorldgenError):
    """A domain pack is malformed."""


class PersonaError(WorldgenError):
    """A persona file or record is malformed."""


class ContractError(WorldgenError):
    """A world contract violates its schema or its structural rules."""


class WorldFormatError(WorldgenError):
    """A world or build directory on disk is unreadable or malformed."""


class BuildError(WorldgenError):
    """A world could not be built (a worker crashed or died); the finished worlds are kept."""

    exit_code = 1


class BuildInterrupted(BaseException):
    """A build stopped by a signal after committing only whole worlds; like KeyboardInterrupt, not an Exception."""

    def __init__(self, signum: int, committed: int | None = None, manifest: str | None = None) -> None:
        super().__init__(signum)
        self.signum = signum
        self.committed = committed
        self.manifest = manifest


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest choice, or '' if nothing is close."""
    close = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def raise_collected(error_type: type[WorldgenError], where: str, problems: list[str]) -> None:
    """Raise one error listing every collected problem; do nothing if there are none."""
    if problems:
        shown = "; ".join(problems[:8])
        more = f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
        raise error_type(f"{where}: {len(problems)} problem(s): {shown}{more}")

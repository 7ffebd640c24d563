"""What an agent is: something that plays an Episode to its end through the sandbox.

An agent reads the first observation, acts with `episode.step(text)` (or `episode.run_code` /
`episode.submit`) until `episode.done`, and returns its usage (tokens). Everything it computes from the data
must run in the episode's sandbox; the host side only decides what to send.
"""

from __future__ import annotations

from typing import Any, Protocol

from contracts.errors import WorldgenError
from worldgen.episode import Episode


class AgentError(WorldgenError):
    """An agent that cannot be set up (unknown name, missing key or package) or cannot go on."""


class Agent(Protocol):
    name: str
    library: tuple[str, ...]  # packages of this installation staged read-only into the sandbox

    def play(self, episode: Episode, intro: str) -> dict[str, Any]:
        """Act until the episode is done; return {"tokens": {"input": int, "output": int}, ...}."""
        ...


def final_json(stdout: str) -> dict[str, Any] | None:
    """The last line of a cell's output that parses as a JSON object, or None."""
    import json

    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None

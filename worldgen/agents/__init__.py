"""Agents that play worldgen tasks through the sandbox: `reference`, `naive` and `anthropic`.

Add one with `AGENTS[name] = factory`; a factory takes the agent's options (keyword arguments) and returns
an object with `name`, `library` and `play(episode, intro)` (see `base.Agent`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contracts.errors import did_you_mean
from worldgen.agents.base import Agent, AgentError


def _reference(**_: Any) -> Agent:
    from worldgen.agents.reference import ReferenceAgent

    return ReferenceAgent()


def _naive(**_: Any) -> Agent:
    from worldgen.agents.naive import NaiveAgent

    return NaiveAgent()


def _anthropic(**options: Any) -> Agent:
    from worldgen.agents.claude import ClaudeAgent

    return ClaudeAgent(**options)


AGENTS: dict[str, Callable[..., Agent]] = {"reference": _reference, "naive": _naive, "anthropic": _anthropic}


def make_agent(name: str, **options: Any) -> Agent:
    """The agent called `name`; an unknown name is an AgentError with a suggestion."""
    if name not in AGENTS:
        raise AgentError(f"unknown agent {name!r}{did_you_mean(name, AGENTS)}; choose from {', '.join(AGENTS)}")
    return AGENTS[name](**options)


__all__ = ["AGENTS", "Agent", "AgentError", "make_agent"]

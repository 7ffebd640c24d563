"""The `anthropic` agent: a Claude tool-use loop over the Messages API.

Two tools: `python` runs a cell in the episode's sandbox and returns its output; `answer` submits the final
answer (a JSON object following the task's schema), which ends the episode. A reply without tool calls is
read as text: `<answer>...</answer>` or `<python>...</python>` work there too. Configure with arguments or
the environment: ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL (any server speaking the Messages API),
WORLDGEN_AGENT_MODEL. Timeouts and retries are the SDK's.
"""

from __future__ import annotations

import json
import os
from typing import Any

from worldgen.agents.base import AgentError
from worldgen.episode import Episode

DEFAULT_MODEL = "claude-sonnet-4-6"
SYSTEM = (
    "You are a careful data analyst. Inspect the files by running Python with the `python` tool (the "
    "session persists between calls), clean what needs cleaning, and when you are confident submit your final "
    "answer with the `answer` tool as one JSON object that follows the schema you were given."
)
TOOLS = [
    {
        "name": "python",
        "description": "Run Python code in a persistent session (working directory holds data/ and scratch/). "
        "Returns stdout, stderr and errors. Variables persist between calls.",
        "input_schema": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the code to run"}},
            "required": ["code"],
        },
    },
    {
        "name": "answer",
        "description": "Submit the final answer and end the task. Call it once, with a JSON object that follows "
        "the answer schema.",
        "input_schema": {
            "type": "object",
            "properties": {"answer": {"type": "object", "description": "the final answer"}},
            "required": ["answer"],
        },
    },
]


class ClaudeAgent:
    name = "anthropic"
    library: tuple[str, ...] = ()

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 120.0,
        max_retries: int = 3,
        **_: Any,
    ):
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:  # checked first: it needs no import of the (slow to import) SDK
            raise AgentError("the anthropic agent needs ANTHROPIC_API_KEY in the environment")
        try:
            import anthropic
        except ImportError:
            raise AgentError(
                "the anthropic agent needs the anthropic package: pip install 'worldgen[anthropic]'"
            ) from None
        self.model = model or os.environ.get("WORLDGEN_AGENT_MODEL", DEFAULT_MODEL)
        self.max_tokens = max_tokens
        self.errors = (anthropic.APIError,)
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
            timeout=timeout,
            max_retries=max_retries,
        )

    def play(self, episode: Episode, intro: str) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": intro}]
        tokens = {"input": 0, "output": 0}
        while not episode.done:
            try:
                response = self.client.messages.create(
                    model=self.model, max_tokens=self.max_tokens, system=SYSTEM, tools=TOOLS, messages=messages
                )
            except self.errors as exc:
                raise AgentError(f"Messages API call failed: {type(exc).__name__}: {str(exc)[:160]}") from None
            tokens["input"] += getattr(response.usage, "input_tokens", 0) or 0
            tokens["output"] += getattr(response.usage, "output_tokens", 0) or 0
            content = [b for b in map(_block, response.content) if b is not None] or [
                {"type": "text", "text": "(no reply)"}
            ]
            messages.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if not calls:
                text = "".join(b.get("text", "") for b in content)
                turn = episode.step(text)
                if not episode.done:
                    messages.append({"role": "user", "content": turn.observation})
                continue
            results = []
            for call in calls:
                results.append({"type": "tool_result", "tool_use_id": call["id"], **self._use(episode, call)})
            if not episode.done:
                messages.append({"role": "user", "content": results})
        return {"tokens": tokens, "model": self.model}

    def _use(self, episode: Episode, call: dict[str, Any]) -> dict[str, Any]:
        if episode.done:
            return {"content": "The task is over.", "is_error": True}
        arguments = call.get("input") or {}
        if call["name"] == "python":
            turn = episode.run_code(str(arguments.get("code", "")), raw=f"<python>{arguments.get('code', '')}</python>")
            return {"content": turn.observation}
        if call["name"] == "answer":
            answer = arguments.get("answer", arguments)
            episode.submit(answer, raw=f"<answer>{json.dumps(answer)}</answer>")
            return {"content": "Answer received."}
        return {"content": f"Unknown tool {call['name']!r}; use python or answer.", "is_error": True}


def _block(block: Any) -> dict[str, Any] | None:
    """A response content block as a plain dict the next request can carry (other block types are dropped)."""
    kind = getattr(block, "type", None)
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "text" and block.text:
        return {"type": "text", "text": block.text}
    return None

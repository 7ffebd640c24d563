"""The LLM judge: decides each rubric item's criterion from a free-text report with the Anthropic API.

Off by default and never used offline. Configure with arguments or the environment: ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL (any server speaking the Messages API), WORLDGEN_JUDGE_MODEL. Each decision is cached
on disk per (model, task, item, report), so re-grading costs nothing; timeouts and retries are the SDK's.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from rubrics import scoring
from rubrics.grade import GradeError
from rubrics.model import RubricItem, Task

DEFAULT_MODEL = scoring.DEFAULT_JUDGE_MODEL
SYSTEM = scoring.JUDGE_SYSTEM  # the prompt text lives in rubrics/scoring.py, shared with the exported grader


class AnthropicJudge:
    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        cache_dir: Path | None = None,
    ):
        try:
            import anthropic
        except ImportError:
            raise GradeError(
                "the anthropic judge needs the anthropic package: pip install 'worldgen[anthropic]'"
            ) from None
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise GradeError("the anthropic judge needs ANTHROPIC_API_KEY in the environment")
        self.model = model or os.environ.get("WORLDGEN_JUDGE_MODEL", DEFAULT_MODEL)
        self.errors = (anthropic.APIError,)
        self.client = anthropic.Anthropic(
            api_key=key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL"),
            timeout=timeout,
            max_retries=max_retries,
        )
        self.cache_dir = (
            cache_dir or Path(os.environ.get("WORLDGEN_CACHE", Path.home() / ".cache" / "worldgen")) / "judge"
        )
        self.calls = 0

    def decide(self, task: Task, report: str) -> dict[str, bool]:
        return {item.id: self._decide(task, item, report) for item in task.rubric}

    def _decide(self, task: Task, item: RubricItem, report: str) -> bool:
        key = hashlib.sha256(
            json.dumps([self.model, task.task_id, item.id, item.criterion, report]).encode()
        ).hexdigest()
        cached = self.cache_dir / f"{key}.json"
        if cached.is_file():
            return bool(json.loads(cached.read_text())["decision"])
        question = scoring.judge_question(task.prompt, item.polarity, item.criterion, report)
        try:
            self.calls += 1
            response = self.client.messages.create(
                model=self.model,
                max_tokens=scoring.JUDGE_MAX_TOKENS,
                system=SYSTEM,
                messages=[{"role": "user", "content": question}],
            )
        except self.errors as exc:
            raise GradeError(
                f"anthropic judge failed on item {item.id!r}: {type(exc).__name__}: {str(exc)[:120]}"
            ) from None
        text = "".join(getattr(block, "text", "") for block in response.content)
        decision = scoring.judge_verdict(text)
        if decision is None:
            raise GradeError(f"anthropic judge gave no YES/NO for item {item.id!r}: {text.strip().upper()[:40]!r}")
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps({"model": self.model, "item": item.id, "decision": decision}))
        return decision

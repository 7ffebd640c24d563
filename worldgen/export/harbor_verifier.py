"""Verifier of one exported worldgen task: tests/grade.py in the task directory. Standard library only.

Run by tests/test.sh with the task image's Python (`python3 -I -S`: no site-packages, no network needed for
the rules judge). It imports nothing from worldgen: the scoring is tests/scoring.py, a verbatim copy of
worldgen's rubrics/scoring.py, so the reward is exactly the score `worldgen grade` gives.

Writes /logs/verifier/reward.json on every path, a flat object of finite numbers:
- reward: the rules judge's score of /app/answer.json (0 when it is missing or malformed; the reason is printed);
- computation, insight: the share of positive points earned per item kind; negatives_triggered: a count;
- reward_llm, when ANTHROPIC_API_KEY is set and /app/report.md exists: the LLM judge's score of the report,
  decided item by item with the prompts `worldgen grade --judge anthropic` sends (the Messages API at
  ANTHROPIC_BASE_URL, model WORLDGEN_JUDGE_MODEL). If the judge fails, reward_llm is left out and
  llm_judge_failed = 1 is written instead.
Item-level decisions go to /logs/verifier/grading.json. WORLDGEN_TASK_ROOT, when set, prefixes every
container path (`worldgen export check` runs tasks outside Docker that way).
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scoring  # noqa: E402  (tests/scoring.py, beside this file)

MAX_ANSWER_BYTES = 10_000_000  # a structured answer is a few kilobytes; larger files are refused, not parsed
MAX_REPORT_BYTES = 1_000_000
JUDGE_TIMEOUT = 60.0  # per request
JUDGE_RETRIES = 3  # on 408/409/429/5xx and connection errors, with exponential back-off (as the SDK does)
JUDGE_BUDGET = 420.0  # seconds for all judge calls: well inside task.toml's verifier timeout (600 s)
ZERO = {"reward": 0.0, "computation": 0.0, "insight": 0.0, "negatives_triggered": 0.0}


def paths() -> dict[str, str]:
    root = os.environ.get("WORLDGEN_TASK_ROOT", "")
    return {
        "answer": f"{root}/app/answer.json",
        "report": f"{root}/app/report.md",
        "logs": f"{root}/logs/verifier",
    }


def read_answer(path: str) -> tuple[dict | None, str]:
    """The answer object, or None and the reason it scores 0."""
    if not os.path.isfile(path):
        return None, f"no answer: {path} does not exist"
    if os.path.getsize(path) > MAX_ANSWER_BYTES:
        return None, f"answer refused: {path} is larger than {MAX_ANSWER_BYTES} bytes"
    try:
        with open(path, encoding="utf-8") as f:
            answer = json.loads(f.read())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"answer is not JSON: {str(exc)[:200]}"
    if not isinstance(answer, dict):
        return None, f"answer must be a JSON object, got {type(answer).__name__}"
    return answer, ""


def rules(spec: dict, answer_path: str) -> tuple[dict, dict]:
    answer, reason = read_answer(answer_path)
    if answer is None:
        print(f"verifier: {reason}; reward 0")
        return dict(ZERO), {"reason": reason}
    graded = scoring.grade_answer(spec, answer)
    decisions = {i["id"]: i["decision"] for i in graded["items"]}
    for problem in graded["schema_problems"]:
        print(f"verifier: answer: {problem}")
    print(f"verifier: rules judge score {graded['score']}")
    return {"reward": graded["score"], **scoring.sub_scores(spec["rubric"], decisions)}, graded


def ask(url: str, key: str, model: str, question: str, deadline: float) -> bool:
    import urllib.error  # only when the LLM judge runs: keeps the rules judge's start-up fast
    import urllib.request

    body = json.dumps(
        {
            "model": model,
            "max_tokens": scoring.JUDGE_MAX_TOKENS,
            "system": scoring.JUDGE_SYSTEM,
            "messages": [{"role": "user", "content": question}],
        }
    ).encode()
    headers = {"content-type": "application/json", "x-api-key": key, "anthropic-version": "2023-06-01"}
    for attempt in range(JUDGE_RETRIES + 1):
        left = deadline - time.monotonic()
        if left <= 1:
            raise RuntimeError(f"the judge's time budget ({JUDGE_BUDGET:.0f}s) ran out")
        try:
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=min(JUDGE_TIMEOUT, left)) as response:
                message = json.loads(response.read())
            break
        except urllib.error.HTTPError as exc:
            retryable = exc.code in (408, 409, 429) or exc.code >= 500
            if not retryable or attempt == JUDGE_RETRIES:
                raise RuntimeError(f"HTTP {exc.code} from the judge") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            if attempt == JUDGE_RETRIES:
                raise RuntimeError(f"cannot reach the judge: {exc}") from None
        time.sleep(min(8.0, 0.5 * 2**attempt, max(0.0, deadline - time.monotonic())))
    blocks = message.get("content", []) if isinstance(message, dict) else []
    text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    verdict = scoring.judge_verdict(text)
    if verdict is None:
        raise RuntimeError(f"the judge gave no YES/NO: {text.strip()[:40]!r}")
    return verdict


def llm(spec: dict, report_path: str) -> tuple[dict, dict]:
    """reward_llm from the LLM judge when it is configured and there is a report; {} otherwise."""
    key = os.environ.get("ANTHROPIC_API_KEY", "")
    if not key or not os.path.isfile(report_path):
        return {}, {}
    if os.path.getsize(report_path) > MAX_REPORT_BYTES:
        print(f"verifier: report larger than {MAX_REPORT_BYTES} bytes; LLM judge skipped")
        return {"llm_judge_failed": 1.0}, {}
    with open(report_path, encoding="utf-8", errors="replace") as f:
        report = f.read()
    base = os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    model = os.environ.get("WORLDGEN_JUDGE_MODEL") or scoring.DEFAULT_JUDGE_MODEL
    url = base.rstrip("/") + "/v1/messages"
    deadline = time.monotonic() + JUDGE_BUDGET
    try:
        decisions = {
            item["id"]: ask(
                url,
                key,
                model,
                scoring.judge_question(spec["prompt"], item["polarity"], item["criterion"], report),
                deadline,
            )
            for item in spec["rubric"]
        }
    except Exception as exc:  # whatever the judge does, the rules reward stands
        print(f"verifier: LLM judge failed ({type(exc).__name__}: {exc}); reward_llm left out")
        return {"llm_judge_failed": 1.0}, {}
    graded = scoring.result(spec, decisions, [])
    print(f"verifier: LLM judge score {graded['score']} ({model})")
    return {"reward_llm": graded["score"]}, graded


def write(logs: str, name: str, payload: dict) -> None:
    os.makedirs(logs, exist_ok=True)
    tmp = os.path.join(logs, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(payload, indent=1) + "\n")
    os.replace(tmp, os.path.join(logs, name))


def main() -> int:
    where = paths()
    try:
        with open(os.path.join(HERE, "rubric.json"), encoding="utf-8") as f:
            spec = json.load(f)
        reward, graded = rules(spec, where["answer"])
    except Exception as exc:  # the reward file is written on every path; the cause is printed
        print(f"verifier: internal error ({type(exc).__name__}: {exc}); reward 0")
        write(where["logs"], "reward.json", ZERO)
        return 1
    # the rules reward is on disk before any network call, so a verifier killed mid-judge still has it
    write(where["logs"], "grading.json", {"rules": graded})
    write(where["logs"], "reward.json", reward)
    extra, judged = llm(spec, where["report"])
    if extra:
        write(where["logs"], "grading.json", {"rules": graded, "llm": judged})
        write(where["logs"], "reward.json", {**reward, **extra})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One Harbor task directory (task.toml schema 1.4) for one worldgen task.

    instruction.md          the persona's question, the data's location (all the world's files, names only)
                            and the answer contract
    task.toml               metadata, verifier (LLM judge key optional), no-network agent, resources
    environment/Dockerfile  a Python image with the analysis libraries; COPY data/ /app/data/
    environment/data/       ALL the world's observed files, byte-identical
    tests/test.sh           runs tests/grade.py; writes /logs/verifier/reward.json on every path
    tests/grade.py          the verifier (worldgen/export/harbor_verifier.py), standard library only
    tests/scoring.py        a verbatim copy of rubrics/scoring.py: the code `worldgen grade` scores with
    tests/rubric.json       the grading spec: task id, prompt, answer schema, rubric
    solution/solve.sh       the oracle: writes the reference answer (and a report of it)

Hidden truth (rubric, expected and reference answers) lives only under tests/ and solution/, which Harbor
copies into the container after the agent has finished (tests/) or only for the oracle (solution/).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rubrics.scoring
from rubrics.model import Task
from worldgen.export import files as fs
from worldgen.export.source import World
from worldgen.export.text import instruction_md

SCHEMA_VERSION = "1.4"
BASE_IMAGE = "python:3.12-slim"
# The analyst's toolbox, pinned so every run of the bench sees the same libraries (the grader needs none).
ANALYSIS_PACKAGES = (
    "numpy==2.4.6",
    "pandas==3.1.1",
    "polars==2.1.0",
    "pyarrow==26.0.1",
    "openpyxl==3.1.5",
    "duckdb==2.0.1",
    "scipy==1.17.1",
    "statsmodels==0.15.0",
    "scikit-learn==1.9.1",
)
VERIFIER_TIMEOUT_SEC = 600.0  # up to ~20 rubric items, one LLM judge call each, with retries
AGENT_TIMEOUT_SEC = 3600.0  # a multi-file analysis with joins and cleaning; generous for a code-running agent
BUILD_TIMEOUT_SEC = 1200.0  # the pip layer is shared by every task, so only the first build pays for it
RESOURCES = {"cpus": 2, "memory_mb": 4096, "storage_mb": 10240}  # observed files are ~15 MB per default world
JUDGE_ENV = {
    "ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY:-}",
    "ANTHROPIC_BASE_URL": "${ANTHROPIC_BASE_URL:-https://api.anthropic.com}",
    "WORLDGEN_JUDGE_MODEL": f"${{WORLDGEN_JUDGE_MODEL:-{rubrics.scoring.DEFAULT_JUDGE_MODEL}}}",
}
VERIFIER_SOURCE = Path(__file__).with_name("harbor_verifier.py")
SCORING_SOURCE = Path(rubrics.scoring.__file__)

TEST_SH = """#!/usr/bin/env bash
# Grades /app/answer.json (and /app/report.md with the LLM judge when ANTHROPIC_API_KEY is set) and writes
# /logs/verifier/reward.json on every path, even when the grader cannot run.
# WORLDGEN_TASK_ROOT, when set, prefixes every container path (`worldgen export check` runs tasks that way).
root="${WORLDGEN_TASK_ROOT:-}"
mkdir -p "$root/logs/verifier"
rm -f "$root/logs/verifier/reward.json" "$root/logs/verifier/reward.txt"
python3 -I -S "$root/tests/grade.py"
if [ ! -s "$root/logs/verifier/reward.json" ]; then
  echo "verifier: the grader wrote no reward; reward 0"
  echo '{"reward": 0.0, "computation": 0.0, "insight": 0.0, "negatives_triggered": 0.0}' > "$root/logs/verifier/reward.json"
fi
exit 0
"""

SOLVE_SH = """#!/usr/bin/env bash
# Oracle: writes the reference answer, what worldgen's auditor found by a blind analysis of the observed files.
# WORLDGEN_TASK_ROOT, when set, prefixes every container path (`worldgen export check` runs tasks that way).
set -eu
root="${WORLDGEN_TASK_ROOT:-}"
mkdir -p "$root/app"
cp "$root/solution/answer.json" "$root/app/answer.json"
cp "$root/solution/report.md" "$root/app/report.md"
"""


def dockerfile() -> str:
    packages = " \\\n    ".join(ANALYSIS_PACKAGES)
    return (
        "# The analyst's container: the world's observed files and the analysis libraries. No answer key here.\n"
        f"FROM {BASE_IMAGE}\n"
        f"RUN pip install --no-cache-dir \\\n    {packages}\n"
        "WORKDIR /app\n"
        "COPY data/ /app/data/\n"
    )


def grading_spec(task: Task) -> dict[str, Any]:
    """tests/rubric.json: what the verifier needs, as plain data (exactly the task's own rubric and schema)."""
    dumped = task.model_dump(mode="json")
    return {k: dumped[k] for k in ("schema_version", "task_id", "prompt", "answer_schema", "rubric")}


def task_toml(name: str, description: str, keywords: list[str], metadata: dict[str, Any]) -> str:
    sections: list[tuple[str, dict[str, Any]]] = [
        ("task", {"name": name, "description": description, "keywords": keywords}),
        ("metadata", metadata),
        ("verifier", {"timeout_sec": VERIFIER_TIMEOUT_SEC, "network_mode": "public"}),
        ("verifier.env", JUDGE_ENV),
        ("agent", {"timeout_sec": AGENT_TIMEOUT_SEC, "network_mode": "no-network"}),
        ("environment", {"build_timeout_sec": BUILD_TIMEOUT_SEC, **RESOURCES, "workdir": "/app"}),
    ]
    lines = [f"schema_version = {toml_value(SCHEMA_VERSION)}"]
    for header, table in sections:
        lines += ["", f"[{header}]"] + [f"{_key(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else json.dumps(key)


def toml_value(value: Any) -> str:
    """A TOML literal for the values task.toml uses (JSON string escapes are valid TOML basic strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML literal for {type(value).__name__}")


def reference_report(task: Task) -> str:
    """solution/report.md: the reference answer in prose, for the LLM judge's oracle run."""
    answer, var = task.reference_answer, task.variable.replace("_", " ")
    lines = [f"# Findings on {var}", ""]
    if task.kind == "cause":
        change = answer.get("change", {}).get("relative_change")
        if change is not None:
            lines.append(f"Mean {var} changed by {change:+.1%} from the first to the second half of the period.")
        for d in answer.get("drivers", []):
            share = f", explaining {d['share']:.0%} of the change" if "share" in d else ""
            moved = "up" if d.get("direction", "+") == "+" else "down"
            lines.append(f"- {d['variable'].replace('_', ' ')} is a driver that pushed {var} {moved}{share}.")
    else:
        for e in answer.get("effects", []):
            moved = "rises" if e.get("direction", "+") == "+" else "falls"
            lines.append(
                f"- {e['variable'].replace('_', ' ')} is affected by {var}: it {moved} as {var} rises "
                f"({e.get('mechanism', '')} effect, {str(e.get('statistic', '')).replace('_', ' ')} {e['magnitude']:.4g})."
            )
    return "\n".join(lines) + "\n"


def write_task(
    task_dir: Path,
    world: World,
    task: Task,
    toml_text: str,
    linked_from: Path | None = None,
) -> None:
    """Write one task directory; data files are hard-linked to `linked_from`'s copies when given."""
    (task_dir / "environment").mkdir(parents=True)
    (task_dir / "instruction.md").write_text(instruction_md(task, world.observed), encoding="utf-8")
    (task_dir / "task.toml").write_text(toml_text, encoding="utf-8")
    (task_dir / "environment" / "Dockerfile").write_text(dockerfile(), encoding="utf-8")
    for name in world.observed:
        source = linked_from / "environment" / "data" / name if linked_from else None
        fs.place(world.path / "observed" / name, task_dir / "environment" / "data" / name, source)
    tests = task_dir / "tests"
    tests.mkdir()
    _script(tests / "test.sh", TEST_SH)
    (tests / "grade.py").write_bytes(VERIFIER_SOURCE.read_bytes())
    (tests / "scoring.py").write_bytes(SCORING_SOURCE.read_bytes())
    fs.write_json(tests / "rubric.json", grading_spec(task))
    solution = task_dir / "solution"
    solution.mkdir()
    _script(solution / "solve.sh", SOLVE_SH)
    fs.write_json(solution / "answer.json", task.reference_answer)
    (solution / "report.md").write_text(reference_report(task), encoding="utf-8")


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)

"""The bench's README.md: a datasheet with the split's tables (deterministic: no dates, no paths)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from worldgen import __version__


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _spread(values: list[float]) -> list[Any]:
    return [f"{statistics.mean(values):.1f}", min(values), statistics.median(values), max(values)]


# size: one markdown document, read top to bottom as the datasheet reads
def readme(cfg, build, records: list[dict], n_eligible: int) -> str:
    worlds = {r["world"]: r for r in records}
    domains = Counter(r["domain"] for r in worlds.values())
    depth = Counter((r["difficulty"], r["kind"]) for r in records)
    formats = Counter(f for r in worlds.values() for f in r["formats"])
    defects = Counter(d for r in worlds.values() for d in r["defect_kinds"])
    settings = build.settings
    example = records[0]["id"] if records else "TASK"
    parts = [
        f"# {cfg.name}",
        "",
        f"{len(records)} data-analysis tasks over {len(worlds)} synthetic data worlds made by worldgen {__version__}, "
        "one *cause* question (what drove a change?) and one *consequence* question (what does a variable "
        "affect?) per world. Each world's generating mechanism was fixed before its files were written, so every "
        "rubric item is a finding planted in the data, recovered from the files by an independent auditor.",
        "",
        "## Composition",
        "",
        f"- Worlds: {len(worlds)} of the build's {n_eligible} eligible worlds (audit passed all seven checks; a cause "
        "and a consequence task whose reference analysis of the files scores >= 0.95), drawn by seed "
        f"{cfg.seed} round-robin over domains.",
        f"- Source build: seed {settings.get('seed')}, size `{settings.get('size')}`, defect scale "
        f"{settings.get('defect_scale')}, persona pool sha256 `{str(settings.get('personas_sha256', ''))[:12]}`.",
        "- Tasks per world: the deepest cause and consequence questions (difficulty = the variable's layer in the "
        "world's dependency graph).",
        "- Training split: every other world of the build (`splits.json`), world-disjoint from these.",
        "",
        "### Worlds per domain",
        "",
        _table(["domain", "worlds"], [[d, n] for d, n in sorted(domains.items())]),
        "",
        "### Tasks by difficulty",
        "",
        _table(
            ["difficulty (layer)", "cause", "consequence"],
            [[d, depth[(d, "cause")], depth[(d, "consequence")]] for d in sorted({d for d, _ in depth})],
        ),
        "",
        "### What an agent works with, per task",
        "",
        _table(
            ["", "mean", "min", "median", "max"],
            [
                ["business systems in the environment", *_spread([r["systems"] for r in records])],
                ["files in the environment", *_spread([r["files"] for r in records])],
                ["systems the question needs", *_spread([r["task_systems"] for r in records])],
                ["files the question needs", *_spread([r["task_files"] for r in records])],
                ["rubric items", *_spread([r["rubric_items"] for r in records])],
            ],
        ),
        "",
        "### File formats and defects (worlds holding each)",
        "",
        _table(["format", "worlds"], [[f, n] for f, n in sorted(formats.items())]),
        "",
        _table(["defect kind", "worlds"], [[d, n] for d, n in sorted(defects.items())]),
        "",
        "## Running it",
        "",
        "Every directory is a Harbor task (task.toml schema 1.4):",
        "",
        "```bash",
        "harbor run -p . -a oracle                  # reference answers: reward >= 0.95 on every task",
        "harbor run -p . -a nop                     # no answer: reward 0",
        "harbor run -p . -a AGENT -m provider/model",
        "worldgen export check .                    # the same two runs without Docker, plus the hidden-truth scan",
        "```",
        "",
        "The agent has no network and sees `/app/data/` (all the world's files, not only those the question "
        "needs) and `instruction.md`. It writes `/app/answer.json` (valid against the answer schema given in the "
        "instruction) and optionally `/app/report.md`.",
        "",
        "## Rewards",
        "",
        "`tests/test.sh` writes `/logs/verifier/reward.json` on every path:",
        "",
        "- `reward`: the rules judge's rubric score of `answer.json`: (positive points earned - negative points "
        "triggered) / positive points, clipped to [0, 1]; 0 for a missing or malformed answer. The grader "
        "(`tests/grade.py` + `tests/scoring.py`, standard library only) is the code `worldgen grade` scores with.",
        "- `computation`, `insight`: the share of positive points earned per item kind; `negatives_triggered`: "
        "how many errors the answer commits.",
        "- `reward_llm` (only when `ANTHROPIC_API_KEY` is set for the verifier and the agent wrote `report.md`): the "
        "LLM judge's score of the report, decided item by item (`ANTHROPIC_BASE_URL`, `WORLDGEN_JUDGE_MODEL`).",
        "",
        "## Files",
        "",
        "- `sample_manifest.json`: one record per task (world, domain, kind, variable, difficulty, systems, files, "
        "formats, defect kinds, rubric size).",
        "- `dataset.toml`: Harbor's dataset manifest with each task's content digest.",
        "- `splits.json`: test and training world ids, the build's settings and the content hashes.",
        f"- `{example}/`: `instruction.md`, `task.toml`, `environment/` (Dockerfile + data), `tests/` (verifier, "
        "rubric), `solution/` (oracle).",
        "",
        "The answer key (rubric, expected and reference answers) is only under `tests/` and `solution/`, which "
        "the agent never sees. Do not train on these worlds.",
        "",
    ]
    return "\n".join(parts)

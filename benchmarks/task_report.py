"""Task and rubric figures over a build: every baseline's score by kind and domain, and what each loses.

python benchmarks/task_report.py BUILD [N] [--json]

Baselines: reference (the auditor's blind analysis of the observed files), prior (reads no values: the
domain pack, the concern, the answer schema), prior+files (also the hidden `files` list), naive (raw files,
correlation), empty and shuffled (another world's expected answer). "Lost" counts the positive items a
baseline misses and the negative items it triggers, by item type (the part of the id before ':').
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from contracts.model import load_contract
from rubrics.baselines import naive_answers, prior_answers, shuffled_answers
from rubrics.grade import grade_rules
from rubrics.model import Task

BASELINES = ("reference", "prior", "prior+files", "naive", "empty", "shuffled")


def load(out: Path, n: int | None) -> dict[Path, list[Task]]:
    worlds = sorted(p for p in (out / "worlds").iterdir() if (p / "tasks").is_dir())
    if n is not None:
        worlds = [w for w in worlds if json.loads((w / "world.json").read_text())["index"] < n]
    return {w: [Task.model_validate_json(f.read_text()) for f in sorted((w / "tasks").glob("*.json"))] for w in worlds}


def grade_all(tasks_by_world: dict[Path, list[Task]]) -> list[dict]:
    """One row per (task, baseline): score, domain, kind, items lost by type."""
    shuffled = shuffled_answers({w.name: ts for w, ts in tasks_by_world.items()})
    rows = []
    for world, tasks in tasks_by_world.items():
        contract = load_contract(world / "contract.json")
        answers = {
            "reference": {t.task_id: t.reference_answer for t in tasks},
            "prior": prior_answers(tasks),
            "prior+files": prior_answers(tasks, contract, use_files=True),
            "naive": naive_answers(world, tasks),
            "empty": {t.task_id: {} for t in tasks},
            "shuffled": {t.task_id: shuffled[t.task_id] for t in tasks},
        }
        for t in tasks:
            for name in BASELINES:
                graded = grade_rules(t, answers[name][t.task_id])
                lost = Counter()
                for item in graded["items"]:
                    missed = item["polarity"] == "positive" and not item["decision"]
                    triggered = item["polarity"] == "negative" and item["decision"]
                    if missed or triggered:
                        lost[f"{item['polarity'][:3]}:{item['id'].split(':')[0]}"] += 1
                rows.append(
                    {"baseline": name, "task": t.task_id, "kind": t.kind, "domain": contract.domain,
                     "score": graded["score"], "lost": lost}
                )  # fmt: skip
    return rows


def summarise(rows: list[dict]) -> dict:
    out: dict = {"tasks": len({r["task"] for r in rows}), "baselines": {}}
    for name in BASELINES:
        mine = [r for r in rows if r["baseline"] == name]
        scores = [r["score"] for r in mine]
        by = defaultdict(list)
        for r in mine:
            by[("kind", r["kind"])].append(r["score"])
            by[("domain", r["domain"])].append(r["score"])
        lost = sum((r["lost"] for r in mine), Counter())
        out["baselines"][name] = {
            "mean": round(statistics.mean(scores), 3),
            "max": round(max(scores), 3),
            "tasks_at_or_above_0.5": sum(s >= 0.5 for s in scores),
            "tasks_at_or_above_0.95": sum(s >= 0.95 for s in scores),
            "by_kind": {k: round(statistics.mean(v), 3) for (g, k), v in sorted(by.items()) if g == "kind"},
            "by_domain": {k: round(statistics.mean(v), 3) for (g, k), v in sorted(by.items()) if g == "domain"},
            "lost_per_task": {k: round(v / len(mine), 2) for k, v in lost.most_common()},
        }
    return out


def markdown(summary: dict) -> str:
    lines = [
        f"{summary['tasks']} tasks",
        "",
        "| baseline | mean | max | tasks >= 0.5 | cause | consequence |",
        "|---|---|---|---|---|---|",
    ]
    for name, b in summary["baselines"].items():
        kinds = b["by_kind"]
        lines.append(
            f"| {name} | {b['mean']:.3f} | {b['max']:.2f} | {b['tasks_at_or_above_0.5']} | "
            f"{kinds.get('cause', float('nan')):.3f} | {kinds.get('consequence', float('nan')):.3f} |"
        )
    domains = sorted(next(iter(summary["baselines"].values()))["by_domain"])
    lines += ["", "| domain | " + " | ".join(summary["baselines"]) + " |", "|---|" + "---|" * len(summary["baselines"])]
    for d in domains:
        lines.append(f"| {d} | " + " | ".join(f"{b['by_domain'][d]:.2f}" for b in summary["baselines"].values()) + " |")
    lines += ["", "Items lost per task (pos: positive items missed, neg: negative items triggered):", ""]
    for name, b in summary["baselines"].items():
        lines.append(f"- {name}: " + ", ".join(f"{k} {v}" for k, v in b["lost_per_task"].items()))
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    out = Path(args[0] if args else "output")
    n = int(args[1]) if len(args) > 1 else None
    summary = summarise(grade_all(load(out, n)))
    print(json.dumps(summary, indent=1) if "--json" in argv else markdown(summary))


if __name__ == "__main__":
    main(sys.argv[1:])

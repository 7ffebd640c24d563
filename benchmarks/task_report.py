"""Task and rubric figures over a build: reference, naive, empty and shuffled scores; counts; rubric sizes.

python benchmarks/task_report.py output/
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

from rubrics.baselines import naive_answers, shuffled_answers
from rubrics.grade import grade_rules
from rubrics.model import Task


def main(out: Path, n: int | None = None) -> None:
    worlds = sorted(p for p in (out / "worlds").iterdir() if (p / "tasks").is_dir())
    if n is not None:
        worlds = [w for w in worlds if json.loads((w / "world.json").read_text())["index"] < n]
    tasks_by_world = {
        w.name: [Task.model_validate_json(f.read_text()) for f in sorted((w / "tasks").glob("*.json"))] for w in worlds
    }
    tasks = [t for ts in tasks_by_world.values() for t in ts]
    kinds, domains, mechanisms, sizes = Counter(), Counter(), Counter(), []
    for world in worlds:
        contract = json.loads((world / "contract.json").read_text())
        kind_of = {(e["parent"], e["child"]): e["kind"] for e in contract["edges"]}
        for t in tasks_by_world[world.name]:
            kinds[t.kind] += 1
            domains[contract["domain"]] += 1
            sizes.append(len(t.rubric))
            for item in t.rubric:
                if item.phenomenon and item.phenomenon.startswith("edge:"):
                    mechanisms[kind_of[tuple(item.phenomenon[5:].split("->"))]] += 1
    shuffled = shuffled_answers(tasks_by_world)
    scores = {"reference": [], "naive": [], "empty": [], "shuffled": []}
    naive_negatives = 0
    for world in worlds:
        naive = naive_answers(world, tasks_by_world[world.name])
        for t in tasks_by_world[world.name]:
            scores["reference"].append(grade_rules(t, t.reference_answer)["score"])
            graded = grade_rules(t, naive[t.task_id])
            scores["naive"].append(graded["score"])
            naive_negatives += any(i["decision"] and i["polarity"] == "negative" for i in graded["items"])
            scores["empty"].append(grade_rules(t, {})["score"])
            scores["shuffled"].append(grade_rules(t, shuffled[t.task_id])["score"])
    print(f"worlds {len(worlds)}, tasks {len(tasks)}: {dict(kinds)}")
    for name, values in scores.items():
        print(f"{name:9s} mean {statistics.mean(values):.3f}  min {min(values):.3f}  max {max(values):.3f}")
    print(f"reference >= 0.95 on {sum(s >= 0.95 for s in scores['reference'])}/{len(tasks)} tasks")
    print(f"naive answers triggering a negative item: {naive_negatives}/{len(tasks)}")
    print("tasks by domain:", dict(sorted(domains.items())))
    print("edge items by mechanism:", dict(mechanisms.most_common()))
    print(
        f"rubric size: min {min(sizes)}, median {statistics.median(sizes)}, max {max(sizes)}; histogram {dict(sorted(Counter(sizes).items()))}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "output"), int(sys.argv[2]) if len(sys.argv) > 2 else None)

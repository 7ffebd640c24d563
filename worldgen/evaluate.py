"""`worldgen eval RUNS`: the tables a benchmark reports, with intervals.

- mean score with a 95% stratified bootstrap interval: episodes are resampled with replacement within each
  (domain, kind) stratum, so every resample keeps the benchmark's mix; an explicit numpy Generator with a
  fixed seed makes the interval reproducible;
- computation and insight sub-scores: the rubric's score formula restricted to the items of that kind
  (episodes without positive items of the kind are left out), with the same interval;
- how many negative items each trajectory triggered (0, 1, 2, 3+);
- per-domain offsets: each domain's mean minus the overall mean, with its episode count;
- per kind and per domain, the mean's 95% interval (resampled within the other dimension's strata), drawn
  after every other interval so that adding them changed none of the others.
Episodes that errored are not scored; they are counted and reported so they can be re-run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from contracts.errors import WorldgenError

BOOTSTRAP = 2000  # resamples: the customary count for percentile intervals (Efron and Tibshirani)
SEED = 0
LEVEL = 0.95


class EvalError(WorldgenError):
    """Runs that cannot be evaluated."""


def load_results(runs: Path) -> tuple[list[dict[str, Any]], int]:
    """Finished episodes' results and the number that errored."""
    if not runs.is_dir():
        raise EvalError(f"{runs}: no such runs directory")
    results, errors = [], 0
    for path in sorted(runs.glob("*/result.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise EvalError(f"{path}: unreadable result ({exc})") from None
        if result.get("status") == "done":
            results.append(result)
        else:
            errors += 1
    if not results and not errors:
        raise EvalError(f"{runs}: no episodes (no */result.json); run `worldgen run` first")
    return results, errors


def subscore(items: list[dict[str, Any]], kind: str) -> float | None:
    """The rubric score over the items of one kind (computation or insight); None if it has no positive item."""
    chosen = [i for i in items if i.get("kind") == kind]
    total = sum(i["points"] for i in chosen if i["polarity"] == "positive")
    if total == 0:
        return None
    earned = sum(i["points"] for i in chosen if i["polarity"] == "positive" and i["decision"])
    lost = sum(i["points"] for i in chosen if i["polarity"] == "negative" and i["decision"])
    return min(1.0, max(0.0, (earned - lost) / total))


def bootstrap_interval(values: np.ndarray, strata: list[str], rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the mean, resampling within strata (sizes kept)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    totals = np.zeros(BOOTSTRAP)
    labels = np.array(strata)
    for stratum in sorted(set(strata)):
        group = values[labels == stratum]
        picks = rng.integers(0, len(group), size=(BOOTSTRAP, len(group)))
        totals += group[picks].sum(axis=1)
    means = totals / len(values)
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def evaluate(results: list[dict[str, Any]], errors: int = 0, seed: int = SEED) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    strata = [f"{r.get('domain')}/{r.get('kind')}" for r in results]
    scores = np.array([float(r["score"]) for r in results])
    report: dict[str, Any] = {"episodes": len(results), "errors": errors, "bootstrap": BOOTSTRAP, "seed": seed}
    report["score"] = _summary(scores, strata, rng)
    for kind in ("computation", "insight"):
        pairs = [(subscore(r.get("items", []), kind), s) for r, s in zip(results, strata, strict=True)]
        kept = [(v, s) for v, s in pairs if v is not None]
        report[kind] = _summary(np.array([v for v, _ in kept]), [s for _, s in kept], rng)
    negatives = [sum(1 for i in r.get("items", []) if i["polarity"] == "negative" and i["decision"]) for r in results]
    report["negatives_triggered"] = {
        "0": negatives.count(0),
        "1": negatives.count(1),
        "2": negatives.count(2),
        "3+": sum(n >= 3 for n in negatives),
    }
    overall = float(scores.mean()) if len(scores) else float("nan")
    report["by_kind"] = _groups(results, "kind", overall, rng)
    report["domain_offsets"] = _groups(results, "domain", overall, rng)
    return report


def _summary(values: np.ndarray, strata: list[str], rng: np.random.Generator) -> dict[str, Any]:
    low, high = bootstrap_interval(values, strata, rng)
    mean = float(values.mean()) if len(values) else float("nan")
    return {"mean": _r(mean), "ci95": [_r(low), _r(high)], "n": int(len(values))}


def _groups(
    results: list[dict[str, Any]], key: str, overall: float, rng: np.random.Generator
) -> dict[str, dict[str, Any]]:
    other = "domain" if key == "kind" else "kind"
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(str(r.get(key)), []).append(r)
    out = {}
    for name, members in sorted(groups.items()):
        scores = np.array([float(r["score"]) for r in members])
        low, high = bootstrap_interval(scores, [str(r.get(other)) for r in members], rng)
        mean = float(scores.mean())
        out[name] = {"n": len(members), "mean": _r(mean), "offset": _r(mean - overall), "ci95": [_r(low), _r(high)]}
    return out


def _r(x: float) -> float | None:
    return None if not np.isfinite(x) else round(x, 4)


def render(report: dict[str, Any]) -> str:
    """The report as a plain-text table."""
    lines = [
        f"episodes: {report['episodes']} scored"
        + (f", {report['errors']} errored (not scored; re-run `worldgen run` to retry)" if report["errors"] else "")
    ]
    for key in ("score", "computation", "insight"):
        s = report[key]
        lines.append(f"{key:12s} mean {_f(s['mean'])}  95% CI [{_f(s['ci95'][0])}, {_f(s['ci95'][1])}]  n={s['n']}")
    n = report["negatives_triggered"]
    lines.append(f"negative items triggered per trajectory: 0: {n['0']}  1: {n['1']}  2: {n['2']}  3+: {n['3+']}")
    lines.append(
        "by kind:        " + "  ".join(f"{k} {_f(v['mean'])} (n={v['n']})" for k, v in report["by_kind"].items())
    )
    lines.append("domain offsets (domain mean - overall mean):")
    for name, v in report["domain_offsets"].items():
        lines.append(f"  {name:20s} {v['offset']:+.3f}  mean {_f(v['mean'])}  n={v['n']}")
    return "\n".join(lines)


def _f(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:.3f}"

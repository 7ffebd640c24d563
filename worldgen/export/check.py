"""`worldgen export check DIR`: validate an exported bench without Docker.

For every task directory: the required files exist; task.toml parses and holds only keys Harbor knows, with
valid values; the oracle (solution/solve.sh, then tests/test.sh) earns reward >= ORACLE_MIN and no answer
earns 0 with reward.json still written; nothing an agent can read holds hidden truth. The scripts run on
the host with every container path under a temporary root (they honour WORLDGEN_TASK_ROOT), which needs no
kernel features and works wherever bash and python3 do. With `--from BUILD`, data files are also compared
byte for byte with the worlds' observed and hidden files. Bench-wide: dataset.toml's digests match the
task directories and sample_manifest.json lists them.

Exit codes: 0 every task passes, 1 some task fails, 2 not a bench.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rubrics.scoring
from worldgen.export import ExportError, leaks
from worldgen.export import files as fs
from worldgen.export.source import open_build

ORACLE_MIN = 0.95
SCRIPT_TIMEOUT = 120
REQUIRED = (
    "instruction.md",
    "task.toml",
    "environment/Dockerfile",
    "tests/test.sh",
    "tests/grade.py",
    "tests/scoring.py",
    "tests/rubric.json",
    "solution/solve.sh",
)
HIDDEN_NAMES = {"contract.json", "projection.json", "ledger.jsonl", "audit.json", "world.json", "rubric.json"}
HIDDEN_NAMES |= {f"{t}.parquet" for t in ("units", "parties", "panel", "events")}  # canonical/ tables
NETWORK_MODES = {"public", "no-network", "allowlist"}


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _positive(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int | float) and math.isfinite(v) and v > 0


def _count(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= 0


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _env(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _authors(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(a, dict) and set(a) <= {"name", "email"} for a in v)


PHASE = {"timeout_sec": _positive, "network_mode": NETWORK_MODES.__contains__, "allowed_hosts": _strings}
TOML_KEYS: dict[str, dict[str, Any]] = {
    "task": {
        "name": lambda v: _str(v) and re.fullmatch(r"[^/\s]+/[^/\s]+", v),
        "version": _str,
        "description": _str,
        "authors": _authors,
        "keywords": _strings,
    },
    "verifier": {**PHASE, "env": _env},
    "agent": PHASE,
    "environment": {
        "network_mode": NETWORK_MODES.__contains__,
        "allowed_hosts": _strings,
        "build_timeout_sec": _positive,
        "docker_image": _str,
        "cpus": _positive,
        "memory_mb": _positive,
        "storage_mb": _positive,
        "gpus": _count,
        "env": _env,
        "workdir": lambda v: _str(v) and v.startswith("/"),
    },
    "solution": {"env": _env},
}


@dataclass
class TaskReport:
    name: str
    problems: list[str] = field(default_factory=list)
    oracle: float | None = None
    nop: float | None = None


def toml_problems(path: Path) -> list[str]:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [f"task.toml does not parse: {exc}"]
    problems = []
    version = doc.get("schema_version", doc.get("version"))
    if version != "1.4":
        problems.append(f"task.toml: schema_version {version!r}, expected '1.4'")
    for key, value in doc.items():
        if key in ("schema_version", "version", "metadata"):
            if key == "metadata" and not isinstance(value, dict):
                problems.append("task.toml: [metadata] must be a table")
            continue
        if key not in TOML_KEYS:
            problems.append(f"task.toml: unknown key {key!r}")
            continue
        if not isinstance(value, dict):
            problems.append(f"task.toml: [{key}] must be a table")
            continue
        for sub, v in value.items():
            valid = TOML_KEYS[key].get(sub)
            if valid is None:
                problems.append(f"task.toml: unknown key {key}.{sub}")
            elif not valid(v):
                problems.append(f"task.toml: invalid {key}.{sub} = {v!r}")
        if "allowed_hosts" in value and value.get("network_mode") != "allowlist":
            problems.append(f"task.toml: {key}.allowed_hosts needs network_mode = 'allowlist'")
        for name, v in (value.get("env") or {}).items():
            if isinstance(v, str) and re.search(r"\$\{\w+\}", v):
                problems.append(f"task.toml: {key}.env.{name} has no default: the task fails where it is unset")
    if "task" in doc and "name" not in doc["task"]:
        problems.append("task.toml: [task] needs a name")
    return problems


def run_task(task_dir: Path, oracle: bool, scratch: Path) -> tuple[dict | None, str]:
    """Run solve.sh (when `oracle`) then test.sh under a fresh root; the reward file and the output."""
    root = Path(tempfile.mkdtemp(dir=scratch))
    (root / "app").mkdir()
    (root / "logs" / "verifier").mkdir(parents=True)
    shutil.copytree(task_dir / "tests", root / "tests")
    if (task_dir / "solution").is_dir():
        shutil.copytree(task_dir / "solution", root / "solution")
    env = {
        "WORLDGEN_TASK_ROOT": str(root),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(root),
        "LANG": "C.UTF-8",
    }
    scripts = (["solution/solve.sh"] if oracle else []) + ["tests/test.sh"]
    output = []
    for script in scripts:
        try:
            done = subprocess.run(
                ["bash", str(root / script)],
                cwd=root / "app",
                env=env,
                capture_output=True,
                text=True,
                timeout=SCRIPT_TIMEOUT,
            )
            output.append(done.stdout + done.stderr)
        except subprocess.TimeoutExpired:
            output.append(f"{script} timed out after {SCRIPT_TIMEOUT}s")
    reward_file = root / "logs" / "verifier" / "reward.json"
    try:
        reward = json.loads(reward_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        reward = None
    shutil.rmtree(root, ignore_errors=True)
    return reward, "".join(output)


def _reward_problems(reward: dict | None, label: str) -> list[str]:
    if reward is None:
        return [f"{label}: no readable /logs/verifier/reward.json"]
    if not isinstance(reward, dict) or "reward" not in reward:
        return [f"{label}: reward.json has no 'reward'"]
    bad = [
        k for k, v in reward.items() if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
    ]
    return [f"{label}: reward.json values must be finite numbers ({', '.join(bad)})"] if bad else []


def leak_problems(task_dir: Path, world=None) -> list[str]:
    problems = []
    env = task_dir / "environment"
    data = sorted(p for p in (env / "data").iterdir()) if (env / "data").is_dir() else []
    for path in fs.tree_files(env):
        if path != env / "Dockerfile" and path.parent != env / "data":
            problems.append(f"{path.relative_to(task_dir)}: environment/ holds more than the Dockerfile and data/")
        elif path.name in HIDDEN_NAMES:
            problems.append(f"{path.relative_to(task_dir)}: named like a hidden world file")
    try:
        spec = json.loads((task_dir / "tests" / "rubric.json").read_text(encoding="utf-8"))
        answer = json.loads((task_dir / "solution" / "answer.json").read_text(encoding="utf-8"))
        needles = leaks.task_needles({**spec, "reference_answer": answer})
    except (OSError, ValueError, KeyError, TypeError):
        return problems + ["tests/rubric.json or solution/answer.json is unreadable"]
    instruction = (task_dir / "instruction.md").read_text(encoding="utf-8")
    for rel, text in (("instruction.md", instruction), ("environment/Dockerfile", (env / "Dockerfile").read_text())):
        problems += leaks.scan_text(text, needles, rel)
    listed = set(re.findall(r"^- `([^`]+)`$", instruction, flags=re.M))
    if listed != {p.name for p in data}:
        problems.append("instruction.md does not list exactly the files in environment/data/")
    if "COPY data/ /app/data/" not in (env / "Dockerfile").read_text():
        problems.append("environment/Dockerfile does not copy data/ to /app/data/")
    problems += leaks.scan_bytes(_distinct(data), needles, "environment/data")
    if world is not None:
        problems += leaks.scan_data(data, world, "environment/data")
    return problems


def _distinct(paths: list[Path]) -> list[Path]:
    """One path per inode: the two tasks of a world share hard-linked data; scan it once per task anyway."""
    seen, out = set(), []
    for p in paths:
        key = (p.stat().st_dev, p.stat().st_ino)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def check_task(task_dir: Path, scratch: Path, world=None) -> TaskReport:
    report = TaskReport(task_dir.name)
    missing = [r for r in REQUIRED if not (task_dir / r).is_file()]
    if missing:
        report.problems.append(f"missing {', '.join(missing)}")
        return report
    report.problems += toml_problems(task_dir / "task.toml")
    reward, output = run_task(task_dir, oracle=True, scratch=scratch)
    report.problems += _reward_problems(reward, "oracle")
    if reward and "reward" in reward:
        report.oracle = reward["reward"]
        if not (isinstance(report.oracle, int | float) and report.oracle >= ORACLE_MIN):
            report.problems.append(f"oracle reward {report.oracle} < {ORACLE_MIN}: {output.strip()[-200:]}")
    reward, output = run_task(task_dir, oracle=False, scratch=scratch)
    report.problems += _reward_problems(reward, "no answer")
    if reward and "reward" in reward:
        report.nop = reward["reward"]
        if report.nop != 0:
            report.problems.append(f"no answer earns {report.nop}, not 0")
    report.problems += leak_problems(task_dir, world)
    return report


def task_dirs(bench: Path) -> list[Path]:
    return sorted(p for p in bench.iterdir() if p.is_dir() and (p / "task.toml").is_file())


def scoring_drift(tasks: list[Path]) -> list[str]:
    """Tasks whose tests/scoring.py is not this worldgen's rubrics/scoring.py (exported by another version)."""
    ours = Path(rubrics.scoring.__file__).read_bytes()
    return [
        t.name
        for t in tasks
        if (t / "tests" / "scoring.py").is_file() and (t / "tests" / "scoring.py").read_bytes() != ours
    ]


def check_bench(bench: Path, source: Path | None = None) -> tuple[list[TaskReport], list[str]]:
    """Per-task reports and bench-wide problems. Raises ExportError when `bench` is not a bench at all."""
    if not bench.is_dir():
        raise ExportError(f"{bench}: no such directory")
    tasks = task_dirs(bench)
    if not tasks and not (bench / "dataset.toml").is_file():
        raise ExportError(f"{bench}: not a bench (no dataset.toml and no task directory holding task.toml)")
    problems = _bench_problems(bench, tasks)
    worlds = {}
    if source is not None:
        worlds = {w.world_id: w for w in open_build(source).worlds}
    reports = []
    with tempfile.TemporaryDirectory(prefix="worldgen-check-") as scratch:
        for task_dir in tasks:
            world = worlds.get(_world_of(task_dir)) if worlds else None
            report = check_task(task_dir, Path(scratch), world)
            if worlds and world is None:
                report.problems.append("its world is not in --from's build")
            reports.append(report)
    return reports, problems


def _world_of(task_dir: Path) -> str | None:
    try:
        return tomllib.loads((task_dir / "task.toml").read_text(encoding="utf-8"))["metadata"]["world"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _bench_problems(bench: Path, tasks: list[Path]) -> list[str]:
    problems = []
    names = {t.name for t in tasks}
    try:
        dataset = tomllib.loads((bench / "dataset.toml").read_text(encoding="utf-8"))
        listed = {t["name"].split("/", 1)[-1]: t["digest"] for t in dataset.get("tasks", [])}
        if "name" not in dataset.get("dataset", {}):
            problems.append("dataset.toml: [dataset] needs a name")
        if set(listed) != names:
            problems.append(f"dataset.toml lists {len(listed)} task(s), the directory holds {len(names)}")
        for name in sorted(set(listed) & names):
            if listed[name] != fs.harbor_digest(bench / name):
                problems.append(f"dataset.toml: digest of {name} does not match its files")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        problems.append(f"dataset.toml is missing or malformed ({exc})")
    try:
        manifest = json.loads((bench / "sample_manifest.json").read_text(encoding="utf-8"))
        if {r["id"] for r in manifest} != names:
            problems.append("sample_manifest.json does not list exactly the task directories")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problems.append(f"sample_manifest.json is missing or malformed ({exc})")
    return problems

"""`worldgen export bench` and `export check`: Harbor task directories that grade exactly as `worldgen grade`,
hide the answer key, and come out the same bytes every time."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from rubrics import scoring
from rubrics.grade import grade, grade_rules, load_task
from tests.test_tasks import StandIn
from worldgen.export import ExportError, harbor
from worldgen.export.bench import BenchConfig, export_bench
from worldgen.export.select import Pick, choose
from worldgen.export.source import World

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
TASK_DIR = re.compile(r"^dataworld-p[0-9a-f]{6}-(cause-1|consequence-2)$")
REWARD_KEYS = {"reward", "computation", "insight", "negatives_triggered"}
BASH = shutil.which("bash")


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([WORLDGEN, *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def bench(small_build, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "bench"
    done = run("export", "bench", "--from", small_build, "--out", out, "--worlds", 4, "--seed", 0)
    assert done.returncode == 0, done.stderr
    return out


def task_dirs(bench: Path) -> list[Path]:
    return sorted(p for p in bench.iterdir() if p.is_dir())


def source_task(small_build: Path, task_dir: Path):
    meta = tomllib.loads((task_dir / "task.toml").read_text())["metadata"]
    return load_task(small_build / "worlds" / meta["world"] / "tasks" / f"{meta['source_task']}.json")


def run_verifier(task_dir: Path, root: Path, answer=None, raw: bytes | None = None, env=None) -> tuple[dict, str]:
    """tests/test.sh with the container paths under `root`, as `export check` runs it."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "app").mkdir(parents=True)
    shutil.copytree(task_dir / "tests", root / "tests")
    if answer is not None or raw is not None:
        (root / "app" / "answer.json").write_bytes(raw if raw is not None else json.dumps(answer).encode())
    base = {"WORLDGEN_TASK_ROOT": str(root), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    done = subprocess.run(
        [BASH, str(root / "tests" / "test.sh")], env={**base, **(env or {})}, capture_output=True, text=True
    )
    return json.loads((root / "logs" / "verifier" / "reward.json").read_text()), done.stdout + done.stderr


# --- what is exported ------------------------------------------------------------------------------------


def test_bench_holds_one_cause_and_one_consequence_task_per_fully_audited_world(bench, small_build):
    dirs = task_dirs(bench)
    manifest = json.loads((bench / "sample_manifest.json").read_text())
    splits = json.loads((bench / "splits.json").read_text())
    assert len(dirs) == 8 and all(TASK_DIR.match(d.name) for d in dirs)
    assert sorted(r["id"] for r in manifest) == [d.name for d in dirs]
    per_world = Counter(r["world"] for r in manifest)
    assert len(per_world) == 4 and set(per_world.values()) == {2}
    for record in manifest:
        world = small_build / "worlds" / record["world"]
        audit = json.loads((world / "audit.json").read_text())
        assert audit["verdict"] == "pass" and all(c["status"] == "pass" for c in audit["checks"])
        assert record["world_token"] == "p" + hashlib.sha256(record["world"].encode()).hexdigest()[:6]
        assert record["id"].endswith({"cause": "-cause-1", "consequence": "-consequence-2"}[record["kind"]])
        layers = {v["name"]: v["layer"] for v in json.loads((world / "contract.json").read_text())["variables"]}
        same_kind = [load_task(p) for p in (world / "tasks").glob(f"*-{record['kind']}-*.json")]
        deepest = max(layers[t.variable] for t in same_kind if t.reference_score >= 0.95)
        assert record["difficulty"] == layers[record["variable"]] == deepest
    assert {w["world_id"] for w in splits["test"]} == set(per_world)
    assert not set(splits["train"]) & set(per_world)
    assert set(splits["train"]) | set(per_world) == {p.name for p in (small_build / "worlds").iterdir()}
    assert splits["build"] == json.loads((small_build / "build.json").read_text())
    assert "| domain | worlds |" in (bench / "README.md").read_text()


def test_task_toml_and_dataset_toml_follow_harbor(bench):
    dataset = tomllib.loads((bench / "dataset.toml").read_text())
    digests = {t["name"]: t["digest"] for t in dataset["tasks"]}
    assert dataset["dataset"]["name"] == "worldgen/dataworld-bench"
    for task_dir in task_dirs(bench):
        toml = tomllib.loads((task_dir / "task.toml").read_text())
        assert toml["schema_version"] == "1.4" and toml["task"]["name"] == f"worldgen/{task_dir.name}"
        assert toml["agent"]["network_mode"] == "no-network"
        assert toml["verifier"]["network_mode"] in ("public", "allowlist")
        assert toml["verifier"]["env"]["ANTHROPIC_API_KEY"] == "${ANTHROPIC_API_KEY:-}"
        assert toml["environment"]["workdir"] == "/app" and toml["environment"]["memory_mb"] > 0
        assert set(toml["metadata"]) >= {"domain", "kind", "variable", "world", "difficulty", "source_task"}
        # the digest, computed here independently: sha256 over sorted "{relative path}\0{sha256}\n" lines
        lines = sorted(
            f"{p.relative_to(task_dir).as_posix()}\0{hashlib.sha256(p.read_bytes()).hexdigest()}\n"
            for p in task_dir.rglob("*")
            if p.is_file()
        )
        assert digests[f"worldgen/{task_dir.name}"] == "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()
        assert (task_dir / "tests" / "scoring.py").read_bytes() == Path(scoring.__file__).read_bytes()
        assert os.access(task_dir / "tests" / "test.sh", os.X_OK) and os.access(
            task_dir / "solution" / "solve.sh", os.X_OK
        )


def test_the_agent_sees_the_question_all_the_files_and_no_answer_key(bench, small_build):
    for task_dir in task_dirs(bench):
        task = source_task(small_build, task_dir)
        observed = small_build / "worlds" / task.world_id / "observed"
        instruction = (task_dir / "instruction.md").read_text()
        assert task.prompt in instruction and "/app/answer.json" in instruction
        assert json.dumps(task.answer_schema, indent=2) in instruction
        assert re.findall(r"^- `([^`]+)`$", instruction, flags=re.M) == sorted(p.name for p in observed.iterdir())
        assert set(task.files) < {p.name for p in observed.iterdir()}, (
            "the listing must not single out the task's files"
        )
        env_files = sorted(p for p in (task_dir / "environment").rglob("*") if p.is_file())
        data = [p for p in env_files if p.parent.name == "data"]
        assert env_files == sorted([task_dir / "environment" / "Dockerfile", *data])
        assert {p.name: p.read_bytes() for p in data} == {p.name: p.read_bytes() for p in observed.iterdir()}
        hidden = {
            p.read_bytes()
            for p in (small_build / "worlds" / task.world_id).rglob("*")
            if p.is_file() and "observed" not in p.parts
        }
        assert not any(p.read_bytes() in hidden for p in env_files)
        visible = instruction + (task_dir / "environment" / "Dockerfile").read_text()
        for item in task.rubric:
            assert item.criterion not in visible and (":" not in item.id or item.id not in visible)
        assert f"{task.expected_answer.get('change', {}).get('relative_change', 0.123456789)!r}" not in visible
        assert "COPY data/ /app/data/" in (task_dir / "environment" / "Dockerfile").read_text()


# --- the grader is worldgen grade ------------------------------------------------------------------------


def perturbations(task, other_answer: dict, rng: random.Random) -> list[dict]:
    """Right, wrong, partial and junk answers: the exported grader must agree with worldgen grade on all."""
    expected, key = task.expected_answer, "drivers" if task.kind == "cause" else "effects"
    answers = [task.reference_answer, expected, {}, other_answer, {"variable": task.variable, key: "none"}]
    for scale in (0.5, 1.3, -1.0):
        scaled = copy.deepcopy(expected)
        if "change" in scaled:
            scaled["change"]["relative_change"] *= scale
        for entry in scaled.get(key, []):
            for field in ("share", "magnitude"):
                if field in entry:
                    entry[field] *= scale
        answers.append(scaled)
    flipped = copy.deepcopy(expected)
    for entry in flipped.get(key, []):
        entry["direction"] = "-" if entry.get("direction") == "+" else "+"
    answers.append(flipped)
    entries = expected.get(key, [])
    answers.append({**expected, key: entries[:1]})
    answers.append({**expected, key: entries + entries + [{"variable": "junk"}, 7, {"variable": task.variable}]})
    answers.append(
        {
            **expected,
            key: rng.sample(entries, len(entries))
            + [
                {"variable": v}
                for v in task.answer_schema["properties"][key]["items"]["properties"]["variable"]["enum"]
            ],
        }
    )
    return answers


def test_the_exported_grader_gives_exactly_the_worldgen_grade_score(bench, small_build, tmp_path):
    rng = random.Random(0)
    tasks = {d: source_task(small_build, d) for d in task_dirs(bench)}
    others = [t.expected_answer for t in tasks.values()]
    cases = [(d, t, a) for d, t in tasks.items() for a in perturbations(t, rng.choice(others), rng)]
    with ThreadPoolExecutor(2) as pool:
        rewards = list(
            pool.map(lambda k: run_verifier(cases[k][0], tmp_path / f"r{k}", cases[k][2]), range(len(cases)))
        )
    for (task_dir, task, answer), (reward, output) in zip(cases, rewards, strict=True):
        graded = grade_rules(task, answer)
        assert reward["reward"] == graded["score"], (task_dir.name, answer, output)
        negatives = sum(i["decision"] for i in graded["items"] if i["polarity"] == "negative")
        assert reward["negatives_triggered"] == negatives and set(reward) == REWARD_KEYS
        assert 0 <= reward["computation"] <= 1 and 0 <= reward["insight"] <= 1
    assert len(cases) >= 8 * 12 and len({r["reward"] for r, _ in rewards}) > 3, "right, partial and wrong answers"
    # and against the installed command itself, on one wrong answer per task
    for task_dir, task in list(tasks.items())[:2]:
        answer = tmp_path / "a.json"
        answer.write_text(json.dumps(perturbations(task, {}, rng)[6]))
        task_file = small_build / "worlds" / task.world_id / "tasks" / f"{task.task_id}.json"
        cli = json.loads(run("grade", task_file, answer).stdout)["score"]
        assert run_verifier(task_dir, tmp_path / "root", json.loads(answer.read_text()))[0]["reward"] == cli


@pytest.mark.parametrize(
    "raw, reason",
    [(None, "does not exist"), (b"[1, 2", "not JSON"), (b"[1, 2]", "JSON object"), (b"\xff\xfe{}", "not JSON")],
    ids=["missing", "truncated", "not-an-object", "not-utf8"],
)
def test_a_missing_or_malformed_answer_scores_zero_and_still_writes_the_reward(bench, tmp_path, raw, reason):
    task_dir = task_dirs(bench)[0]
    reward, output = (
        run_verifier(task_dir, tmp_path / "root", raw=raw) if raw else run_verifier(task_dir, tmp_path / "root")
    )
    assert reward == {"reward": 0.0, "computation": 0.0, "insight": 0.0, "negatives_triggered": 0.0}
    assert reason in output


def test_the_reward_file_is_written_even_when_python_is_missing(bench, tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("mkdir", "rm"):
        os.symlink(shutil.which(tool), tools / tool)
    reward, output = run_verifier(task_dirs(bench)[0], tmp_path / "root", {"variable": "x"}, env={"PATH": str(tools)})
    assert reward["reward"] == 0.0 and "wrote no reward" in output


@pytest.fixture()
def stand_in():
    StandIn.requests, StandIn.fail_first, StandIn.stall = [], 0, 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_llm_judge_decides_item_by_item_as_worldgen_grade_does(bench, small_build, stand_in, tmp_path):
    pytest.importorskip("anthropic")
    task_dir = task_dirs(bench)[1]
    task = source_task(small_build, task_dir)
    positives = [i.criterion for i in task.rubric if i.polarity == "positive"]
    negative = next(i.criterion for i in task.rubric if i.polarity == "negative")
    report = "# Findings\n" + "\n".join(f"- {c}" for c in positives[: len(positives) // 2 + 1] + [negative])
    root = tmp_path / "root"
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stand_in, "WORLDGEN_JUDGE_MODEL": "judge-model"}
    (root / "app").mkdir(parents=True)
    (root / "app" / "report.md").write_text(report)
    shutil.copytree(task_dir / "tests", root / "tests")
    subprocess.run(
        [BASH, str(root / "tests" / "test.sh")],
        env={"WORLDGEN_TASK_ROOT": str(root), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", **env},
        capture_output=True,
        check=True,
    )
    reward = json.loads((root / "logs" / "verifier" / "reward.json").read_text())
    sent = list(StandIn.requests)
    assert len(sent) == len(task.rubric)
    for body, item in zip(sent, task.rubric, strict=True):
        assert body["system"] == scoring.JUDGE_SYSTEM and body["max_tokens"] == 5 and body["model"] == "judge-model"
        assert body["messages"][0]["content"] == scoring.judge_question(
            task.prompt, item.polarity, item.criterion, report
        )
    expected = grade(
        task,
        None,
        judge="anthropic",
        report=report,
        base_url=stand_in,
        api_key="k",
        cache_dir=tmp_path / "c",
        model="judge-model",
    )
    assert reward["reward_llm"] == expected["score"] and 0 < reward["reward_llm"] < 1
    assert reward["reward"] == 0.0, "no answer.json: the rules judge still scores 0"
    # a judge that refuses: the rules reward is still written, reward_llm is left out and the failure counted
    StandIn.requests = []
    (root / "logs" / "verifier" / "reward.json").unlink()
    subprocess.run(
        [BASH, str(root / "tests" / "test.sh")],
        env={
            "WORLDGEN_TASK_ROOT": str(root),
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            **env,
            "ANTHROPIC_BASE_URL": stand_in + "/nope",
        },
        capture_output=True,
        check=True,
    )
    failed = json.loads((root / "logs" / "verifier" / "reward.json").read_text())
    assert failed["llm_judge_failed"] == 1.0 and "reward_llm" not in failed and failed["reward"] == 0.0


def test_the_judge_budget_fits_inside_the_verifier_timeout():
    budget = float(re.search(r"^JUDGE_BUDGET = ([0-9.]+)", harbor.VERIFIER_SOURCE.read_text(), re.M).group(1))
    assert budget + 60 <= harbor.VERIFIER_TIMEOUT_SEC, "the rules reward must be final before Harbor kills test.sh"


# --- check ------------------------------------------------------------------------------------------------


def test_check_passes_the_bench_and_catches_broken_copies(bench, small_build, tmp_path):
    ok = run("export", "check", bench, "--from", small_build)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "8/8 task(s) pass" in ok.stdout
    broken = tmp_path / "broken"
    shutil.copytree(bench, broken)
    dirs = task_dirs(broken)
    (dirs[0] / "solution" / "answer.json").write_text("{}")  # the oracle no longer solves it
    with (dirs[1] / "instruction.md").open("a") as f:  # an answer key leaked into the instruction
        f.write(json.loads((dirs[1] / "tests" / "rubric.json").read_text())["rubric"][0]["criterion"])
    world = tomllib.loads((dirs[2] / "task.toml").read_text())["metadata"]["world"]
    canonical = small_build / "worlds" / world / "canonical" / "panel.parquet"
    shutil.copy(canonical, dirs[2] / "environment" / "data" / "panel.parquet")  # the hidden state shipped
    with (dirs[3] / "task.toml").open("a") as f:
        f.write("\n[verifier.extra]\nx = 1\n")
    result = run("export", "check", broken)
    assert result.returncode == 1, result.stdout
    out = result.stdout
    assert f"{dirs[0].name}: oracle reward 0.0" in out
    assert f"{dirs[1].name}: instruction.md: holds hidden truth" in out
    assert f"{dirs[2].name}: environment/data/panel.parquet: named like a hidden world file" in out
    assert f"{dirs[3].name}: task.toml: unknown key verifier.extra" in out
    assert "digest of" in out and "4/8 task(s) pass" in out
    assert run("export", "check", tmp_path).returncode == 2


def test_export_refuses_to_finish_when_its_scan_finds_hidden_truth(small_build, tmp_path, monkeypatch):
    from worldgen.export import bench as bench_module

    def leaky(task, files, data_dir="/app/data/"):
        return task.prompt + "\n" + task.rubric[0].criterion

    monkeypatch.setattr(harbor, "instruction_md", leaky)
    out = tmp_path / "leaky"
    with pytest.raises(ExportError, match="hidden-truth"):
        bench_module.export_bench(BenchConfig(small_build, out, worlds=1))
    assert not out.exists() and not list(tmp_path.iterdir()), "nothing is left behind"


def test_an_answer_schema_the_exported_grader_cannot_judge_is_refused(small_build, tmp_path):
    build = tmp_path / "build"
    shutil.copytree(small_build, build)
    for path in (build / "worlds").glob("*/tasks/*.json"):
        task = json.loads(path.read_text())
        task["answer_schema"]["properties"]["variable"]["minLength"] = 1
        path.write_text(json.dumps(task))
    result = run("export", "bench", "--from", build, "--out", tmp_path / "o", "--worlds", 1)
    assert result.returncode == 2 and "minLength" in result.stderr and "rubrics/scoring.py" in result.stderr


# --- properties -------------------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def test_export_is_deterministic_atomic_and_refuses_a_foreign_out(bench, small_build, tmp_path):
    again = tmp_path / "again"
    export_bench(BenchConfig(small_build, again, worlds=4, seed=0))
    assert tree(again) == tree(bench)
    export_bench(BenchConfig(small_build, again, worlds=4, seed=0))  # an earlier bench is replaced in place
    assert tree(again) == tree(bench) and sorted(p.name for p in tmp_path.iterdir()) == ["again"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    result = run("export", "bench", "--from", small_build, "--out", foreign, "--worlds", 1)
    assert result.returncode == 2 and (foreign / "notes.txt").read_text() == "mine"


def _picks(sizes: dict[str, int]) -> list[Pick]:
    worlds, index = [], 0
    for domain, n in sizes.items():
        for _ in range(n):
            worlds.append(Pick(World(Path(f"/w{index}"), f"{domain}-{index}", index, domain), ()))  # type: ignore[arg-type]
            index += 1
    return worlds


def test_worlds_are_spread_over_domains_as_evenly_as_the_build_allows():
    picks = _picks({"a": 10, "b": 10, "c": 2, "d": 7, "e": 1})
    for seed in range(5):
        counts = Counter(p.world.domain for p in choose(picks, 20, seed))
        assert counts["c"] == 2 and counts["e"] == 1 and sorted([counts["a"], counts["b"], counts["d"]]) == [5, 6, 6]
    assert choose(picks, 12, 3) == choose(picks, 12, 3)
    assert len({tuple(p.world.index for p in choose(picks, 12, s)) for s in range(6)}) > 1, "the seed matters"
    with pytest.raises(ExportError, match="only 30 eligible"):
        choose(picks, 31, 0)


BAD_BENCH = {
    "not-a-build": lambda tmp, build: ["--from", tmp, "--out", tmp / "o"],
    "zero-worlds": lambda tmp, build: ["--from", build, "--out", tmp / "o", "--worlds", 0],
    "too-many-worlds": lambda tmp, build: ["--from", build, "--out", tmp / "o", "--worlds", 9],
    "bad-name": lambda tmp, build: ["--from", build, "--out", tmp / "o", "--name", "no slash"],
    "out-is-a-file": lambda tmp, build: ["--from", build, "--out", Path(__file__)],
    "out-inside-the-build": lambda tmp, build: ["--from", build, "--out", build / "bench", "--worlds", 1],
}


@pytest.mark.parametrize("case", BAD_BENCH, ids=list(BAD_BENCH))
def test_bad_bench_input_is_one_line_and_exit_2(small_build, tmp_path, case):
    result = run("export", "bench", *BAD_BENCH[case](tmp_path, small_build))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "o").exists()

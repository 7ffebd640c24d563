"""`worldgen export pool` and `worldgen.reward.compute_score`: rows each framework loads with its own reader,
world-disjoint from the bench, no answer key in prompts or data, and a reward that never raises on model text."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import worldgen.reward
from rubrics.grade import load_task
from worldgen.reward import compute_score, extract_answer

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
FORMATS = ("verl", "skyrl", "openrlhf", "dsgym", "jsonl")


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([WORLDGEN, *map(str, args)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def exported(small_build, tmp_path_factory) -> dict[str, Path]:
    """A 3-world bench and one pool per format, world-disjoint from it."""
    root = tmp_path_factory.mktemp("pool")
    bench = root / "bench"
    assert run("export", "bench", "--from", small_build, "--out", bench, "--worlds", 3).returncode == 0
    out = {"bench": bench}
    for fmt in FORMATS:
        done = run("export", "pool", "--from", small_build, "--out", root / fmt, "--format", fmt, "--exclude", bench)
        assert done.returncode == 0, done.stderr
        out[fmt] = root / fmt
    return out


def load_rows(fmt: str, pool: Path) -> list[dict]:
    """Each format read the way its framework reads it."""
    if fmt in ("verl", "skyrl"):
        table = pq.read_table(pool / "train.parquet")  # verl and SkyRL load parquet through pyarrow
        assert len(pd.read_parquet(pool / "train.parquet")) == table.num_rows
        return table.to_pylist()
    if fmt == "dsgym":
        return json.loads((pool / "train.json").read_text())
    return [json.loads(line) for line in (pool / "train.jsonl").read_text().splitlines()]


def _truth(fmt: str, row: dict) -> str:
    return {
        "verl": lambda r: r["reward_model"]["ground_truth"],
        "skyrl": lambda r: r["reward_spec"]["ground_truth"],
        "openrlhf": lambda r: r["label"],
        "dsgym": lambda r: r["metadata"]["ground_truth"],
        "jsonl": lambda r: r["ground_truth"],
    }[fmt](row)


def _prompt(fmt: str, row: dict) -> str:
    return {
        "verl": lambda r: r["prompt"][0]["content"],
        "skyrl": lambda r: r["prompt"][0]["content"],
        "openrlhf": lambda r: r["input"],
        "dsgym": lambda r: r["question"] + "\n\n" + r["context"],
        "jsonl": lambda r: r["prompt"],
    }[fmt](row)


def _info(fmt: str, row: dict) -> dict:
    return row["metadata"] if fmt == "dsgym" else row if fmt in ("openrlhf", "jsonl") else row["extra_info"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_rows_have_the_fields_each_framework_reads(exported, fmt):
    rows = load_rows(fmt, exported[fmt])
    assert rows and json.loads((exported[fmt] / "pool.json").read_text())["rows"] == len(rows)
    for k, row in enumerate(rows):
        info = _info(fmt, row)
        assert {"world_id", "task_id", "domain", "kind", "depth", "data_dir"} <= set(info) and info["index"] == k
        spec = json.loads(_truth(fmt, row))
        assert {"task_id", "answer_schema", "rubric", "expected_answer"} <= set(spec)
        assert (exported[fmt] / info["data_dir"]).is_dir()
        if fmt == "verl":
            assert row["data_source"] == "worldgen" and row["ability"] and row["reward_model"]["style"] == "rule"
            assert row["prompt"][0]["role"] == "user" and info["split"] == "train"
            assert info["tools_kwargs"]["python"]["create_kwargs"]["data_dir"] == info["data_dir"]
        elif fmt == "skyrl":
            assert row["env_class"] and row["reward_spec"]["method"] == "rule" and row["data_source"] == "worldgen"
        elif fmt == "openrlhf":
            assert isinstance(row["input"], str) and isinstance(row["label"], str)
        elif fmt == "dsgym":
            assert set(row) == {"context", "question", "answer", "data", "metadata"}
            assert json.loads(row["answer"]) == spec["expected_answer"]
            assert all((exported[fmt] / path).is_file() for path in row["data"])


def test_the_pool_is_world_disjoint_from_the_bench_and_self_contained(exported, small_build):
    test = {w["world_id"] for w in json.loads((exported["bench"] / "splits.json").read_text())["test"]}
    rows = load_rows("jsonl", exported["jsonl"])
    pool_worlds = {r["world_id"] for r in rows}
    assert pool_worlds and not pool_worlds & test
    assert pool_worlds | test <= {p.name for p in (small_build / "worlds").iterdir()}
    for world in pool_worlds:
        observed = small_build / "worlds" / world / "observed"
        shipped = exported["jsonl"] / "data" / world
        assert {p.name: p.read_bytes() for p in shipped.iterdir()} == {
            p.name: p.read_bytes() for p in observed.iterdir()
        }
    assert sorted(p.name for p in (exported["jsonl"] / "data").iterdir()) == sorted(pool_worlds)
    hidden = {
        hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (small_build / "worlds").rglob("*")
        if p.is_file() and "observed" not in p.parts
    }
    assert not any(hashlib.sha256(p.read_bytes()).hexdigest() in hidden for p in exported["verl"].rglob("data/*/*"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_prompts_hold_the_question_and_no_answer_key(exported, small_build, fmt):
    for row in load_rows(fmt, exported[fmt]):
        info = _info(fmt, row)
        task = load_task(small_build / "worlds" / info["world_id"] / "tasks" / f"{info['task_id']}.json")
        prompt = _prompt(fmt, row)
        assert task.prompt in prompt and "<answer>" in prompt
        observed = sorted(p.name for p in (small_build / "worlds" / task.world_id / "observed").iterdir())
        assert [name for name in observed if f"`{name}`" in prompt] == observed, "all files, not the task's subset"
        for item in task.rubric:
            assert item.criterion not in prompt and (":" not in item.id or item.id not in prompt)
        for number in _numbers(task.expected_answer):
            assert repr(number) not in prompt or len(repr(number)) < 5


def _numbers(node):
    if isinstance(node, float):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _numbers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _numbers(v)


def renderings(answer: dict) -> list[str]:
    text = json.dumps(answer, indent=1)
    return [
        f"I cleaned the files and ran the analysis.\n<answer>{text}</answer>",
        f"Draft: <answer>{{}}</answer> ... final:\n<answer>\n```json\n{text}\n```\n</answer>",
        f'Here is the result:\n```json\n{{"draft": 1}}\n```\nand the final one\n```json\n{text}\n```',
        f"So {{not json}} the answer is {json.dumps(answer)} as computed.",
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_compute_score_pays_the_expected_answer_and_nothing_for_no_answer(exported, fmt):
    for row in load_rows(fmt, exported[fmt]):
        truth = _truth(fmt, row)
        expected = json.loads(truth)["expected_answer"]
        for text in renderings(expected):
            assert compute_score("worldgen", text, truth, extra_info=_info(fmt, row)) >= 0.95, text[:80]
        assert compute_score("worldgen", "", truth) == 0.0
        assert compute_score("worldgen", "<answer>no idea</answer>", truth) == 0.0


def test_compute_score_is_loadable_by_path_as_verl_loads_custom_rewards(exported):
    spec = importlib.util.spec_from_file_location("custom_reward", worldgen.reward.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = load_rows("verl", exported["verl"])[0]
    truth = row["reward_model"]["ground_truth"]
    answer = json.loads(truth)["expected_answer"]
    assert (
        module.compute_score(row["data_source"], f"<answer>{json.dumps(answer)}</answer>", truth, row["extra_info"])
        == 1.0
    )


def test_compute_score_is_bounded_and_refuses_foreign_ground_truth(exported):
    truth = load_rows("jsonl", exported["jsonl"])[0]["ground_truth"]
    for text in ("x" * 10_000_000, "{" * 150_000, '{"a": ' * 50_000, "[" * 100_000 + "<answer>" + "{" * 50_000):
        started = time.perf_counter()
        assert compute_score("worldgen", text, truth) == 0.0
        assert time.perf_counter() - started < 2.0
    assert compute_score("worldgen", None, truth) == 0.0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="worldgen"):
        compute_score("worldgen", "<answer>{}</answer>", '{"style": "rule"}')


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list('{}[]":,<>/answer `json\n0.5-+drivers')), max_size=300))
def test_compute_score_never_raises_on_model_text(exported, text):
    truth = load_rows("jsonl", exported["jsonl"])[0]["ground_truth"]
    assert 0.0 <= compute_score("worldgen", text, truth) <= 1.0
    assert extract_answer(text) is None or isinstance(extract_answer(text), dict)


def test_the_pool_filters_worlds_by_audit_loosely_and_strict_on_request(exported, small_build, tmp_path):
    """A world that fails only a recoverability check stays in the loose pool and leaves the strict one; a
    world failing a structural check leaves both. (The failures are planted in a copy of the build: whether
    the small build has a failing world of its own is luck.)"""
    from worldgen.export.pool import PoolConfig, export_pool

    build = tmp_path / "build"
    shutil.copytree(small_build, build)
    loose = {w["world_id"] for w in json.loads((exported["jsonl"] / "pool.json").read_text())["worlds"]}
    weak, broken = sorted(loose)[:2]
    _fail_check(build / "worlds" / weak, "recoverability")
    _fail_check(build / "worlds" / broken, "ledger")
    pools = {}
    for strict in (False, True):
        out = tmp_path / f"strict-{strict}"
        export_pool(PoolConfig(build, out, "jsonl", (exported["bench"],), strict=strict))
        pools[strict] = {w["world_id"] for w in json.loads((out / "pool.json").read_text())["worlds"]}
    assert pools[False] == loose - {broken}
    assert pools[True] == loose - {weak, broken}


def _fail_check(world: Path, name: str) -> None:
    audit = json.loads((world / "audit.json").read_text())
    for check in audit["checks"]:
        if check["name"] == name:
            check["status"] = "fail"
    audit["verdict"], audit["failing"] = "fail", [name]
    (world / "audit.json").write_text(json.dumps(audit))


def test_pool_export_is_deterministic(exported, small_build, tmp_path):
    again = tmp_path / "again"
    assert (
        run(
            "export", "pool", "--from", small_build, "--out", again, "--format", "verl", "--exclude", exported["bench"]
        ).returncode
        == 0
    )

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert tree(again) == tree(exported["verl"])


def test_a_bench_overlapping_the_pool_and_other_bad_input_are_refused(exported, small_build, tmp_path):
    # a bench that holds a pool world under another name (same observed files): refused, not silently mixed
    fake = tmp_path / "fake"
    fake.mkdir()
    splits = json.loads((exported["bench"] / "splits.json").read_text())
    pool_world = json.loads((exported["jsonl"] / "pool.json").read_text())["worlds"][0]
    splits["test"].append({"world_id": "renamed", "observed_sha256": pool_world["observed_sha256"]})
    (fake / "splits.json").write_text(json.dumps(splits))
    cases = {
        "overlap": ["--format", "jsonl", "--exclude", fake],
        "not-a-bench": ["--format", "jsonl", "--exclude", exported["jsonl"]],
        "unknown-format": ["--format", "parquet"],
        "out-inside-bench": ["--format", "jsonl", "--exclude", exported["bench"], "--out", exported["bench"] / "pool"],
    }
    for name, args in cases.items():
        out = [] if "--out" in args else ["--out", tmp_path / name]
        result = run("export", "pool", "--from", small_build, *out, *args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (name, result.stderr)
        assert "Traceback" not in result.stderr and not (tmp_path / name).exists()
    assert (
        "overlaps the pool"
        in run("export", "pool", "--from", small_build, "--out", tmp_path / "o", *cases["overlap"]).stderr
    )

"""Agents in the loop: the reference agent reaches the reference score by computing in the sandbox, the naive
agent reproduces the naive baseline, the Claude loop works against a local Messages API stand-in, and
`worldgen run` / `eval` / `export transitions` keep their promises (resume, isolation of crashes, records
that validate against their schemas, one-line errors).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from rubrics.baselines import naive_answers
from rubrics.grade import load_task
from worldgen.agents import AGENTS
from worldgen.agents.cells import DEFINITIONS, analysis_contract
from worldgen.agents.runner import RunConfig, run_agent
from worldgen.evaluate import evaluate
from worldgen.sandbox import Limits
from worldgen.tasksource import find_tasks
from worldgen.transitions import schema

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
LIMITS = Limits(memory_mb=4096, step_timeout_s=120)


def one_per_kind(refs, worlds: int = 3):
    """The first cause and the first consequence task of the first worlds (the benchmark plays them all)."""
    chosen = {}
    for ref in refs:
        chosen.setdefault((ref.task.world_id, ref.task.kind), ref)
    keep = sorted({w for w, _ in chosen})[:worlds]
    return [ref for (w, _), ref in chosen.items() if w in keep]


@pytest.fixture(scope="module")
def reference_runs(small_build, tmp_path_factory):
    refs = [r for r in one_per_kind(find_tasks(small_build)) if r.task.reference_score >= 0.95]
    out = tmp_path_factory.mktemp("runs") / "reference"
    summary = run_agent(RunConfig(agent="reference", tasks=refs, out=out, workers=2, limits=LIMITS))
    return refs, out, summary


def same(a, b) -> bool:
    """Equal up to floating-point noise (BLAS thread counts differ between the sandbox and the host)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def results_of(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(out.glob("*/result.json"))}


def steps_of(out: Path, task_id: str) -> list[dict]:
    lines = [json.loads(x) for x in (out / task_id / "trajectory.jsonl").read_text().splitlines()]
    assert lines[0]["type"] == "episode"
    return lines[1:]


def test_reference_agent_reaches_the_reference_score_from_the_sandbox(reference_runs):
    refs, out, summary = reference_runs
    assert summary.ran == len(refs) and summary.errors == 0 and len(refs) >= 6
    results = results_of(out)
    for ref in refs:
        result = results[ref.task_id]
        assert result["status"] == "done" and result["isolated"] is not None
        assert result["score"] >= 0.95, (ref.task_id, result["score"], result.get("note"))
        steps = steps_of(out, ref.task_id)
        code = [s for s in steps if s["action"]["type"] == "code"]
        assert code and steps[-1]["action"]["type"] == "answer"
        # Provenance: every number in the answer was printed by the sandbox, computed from data/.
        printed = json.loads(code[-1]["observation"]["stdout"].strip().splitlines()[-1])
        answer = steps[-1]["action"]["answer"]
        numbers = [answer["change"]["relative_change"]] if ref.task.kind == "cause" else []
        numbers += [e.get("share", e.get("magnitude")) for e in answer.get("drivers", answer.get("effects", []))]
        for number in (n for n in numbers if n is not None):
            assert any(v is not None and math.isclose(number, v) for v in printed["values"].values()), number


def test_the_reference_agents_cells_carry_no_planted_value(small_build):
    world = sorted((small_build / "worlds").iterdir())[0]
    raw = json.loads((world / "contract.json").read_text())
    redacted = analysis_contract(raw)
    assert all(ph["target"] is None for ph in redacted["phenomena"])
    assert all(set(e["params"]) <= set(DEFINITIONS) and e["sign"] == "+" and not e["draw"] for e in redacted["edges"])
    text = json.dumps(redacted)
    # parent_sd is the parent's realised spread, a statistic of the data (and equal to a moderator's scale).
    planted = [v for e in raw["edges"] for k, v in e["params"].items() if k not in DEFINITIONS and k != "parent_sd"]
    planted += [ph["target"] for ph in raw["phenomena"]]
    for value in planted:
        if isinstance(value, float) and not value.is_integer():
            assert json.dumps(value) not in text, value
    assert raw["phenomena"][0]["target"] is not None, "the original contract is untouched"


def test_runs_resume_and_one_crash_never_stops_the_others(reference_runs, tmp_path):
    refs, out, _ = reference_runs
    again = run_agent(RunConfig(agent="reference", tasks=refs, out=out, workers=2, limits=LIMITS))
    assert again.ran == 0 and again.skipped == len(refs), "finished episodes are skipped"

    class Flaky:
        name, library = "flaky", ()

        def play(self, episode, intro):
            if episode.task.task_id == refs[0].task_id:
                raise RuntimeError("boom")
            episode.step("<python>print('ok')</python>")
            episode.step("<answer>{}</answer>")
            return {"tokens": {"input": 1, "output": 2}}

    AGENTS["flaky"] = lambda **_: Flaky()
    try:
        runs = tmp_path / "flaky"
        first = run_agent(RunConfig(agent="flaky", tasks=refs[:3], out=runs, limits=LIMITS))
        assert first.ran == 3 and first.errors == 1
        results = results_of(runs)
        assert results[refs[0].task_id]["status"] == "error" and "boom" in results[refs[0].task_id]["error"]
        assert all(results[r.task_id]["status"] == "done" for r in refs[1:3])
        assert results[refs[1].task_id]["tokens"] == {"input": 1, "output": 2}
        assert not list(runs.rglob(".*tmp*")), "no temporary files are left behind"
        retry = run_agent(RunConfig(agent="flaky", tasks=refs[:3], out=runs, limits=LIMITS))
        assert retry.ran == 1 and retry.skipped == 2, "a re-run retries only the errored episode"
    finally:
        del AGENTS["flaky"]


def test_naive_agent_reproduces_the_naive_baseline_through_the_sandbox(world_dirs, tmp_path):
    world = world_dirs[1]
    refs = find_tasks(world)[:4]
    out = tmp_path / "naive"
    summary = run_agent(RunConfig(agent="naive", tasks=refs, out=out, workers=2, limits=LIMITS))
    assert summary.errors == 0
    baseline = naive_answers(world, [r.task for r in refs])
    for ref in refs:
        answer = steps_of(out, ref.task_id)[-1]["action"]["answer"]
        expected = json.loads(json.dumps(baseline[ref.task_id], default=float))
        assert same(answer, expected), (ref.task_id, answer, expected)
    assert summary.mean is not None and summary.mean <= 0.6


# --- the anthropic agent, against a local stand-in speaking the Messages API ------------------------------


class StandIn(BaseHTTPRequestHandler):
    """Replies with scripted content blocks in order and records every request body."""

    script: list[list[dict]] = []
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        content = type(self).script.pop(0) if type(self).script else [{"type": "text", "text": "nothing more"}]
        payload = {
            "id": f"msg_{len(type(self).requests)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def stand_in():
    pytest.importorskip("anthropic")
    StandIn.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_anthropic_agent_runs_a_tool_use_loop(world_dirs, stand_in, tmp_path):
    task_file = sorted((world_dirs[0] / "tasks").glob("*.json"))[0]
    task = load_task(task_file)
    StandIn.script = [
        [
            {"type": "text", "text": "Let me look at the files."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "python",
                "input": {"code": "import os\nprint(len(os.listdir('data')))"},
            },
        ],
        [{"type": "tool_use", "id": "toolu_2", "name": "answer", "input": {"answer": task.expected_answer}}],
    ]
    options = {"base_url": stand_in, "api_key": "test-key", "max_retries": 0, "timeout": 10}
    out = tmp_path / "claude"
    summary = run_agent(
        RunConfig(agent="anthropic", tasks=find_tasks(task_file), out=out, limits=LIMITS, agent_options=options)
    )
    result = results_of(out)[task.task_id]
    assert summary.errors == 0 and result["score"] == 1.0 and result["steps"] == 2, result
    assert result["tokens"] == {"input": 200, "output": 40}
    assert len(StandIn.requests) == 2
    first, second = StandIn.requests
    assert {t["name"] for t in first["tools"]} == {"python", "answer"}
    assert first["messages"][0]["content"].startswith(task.prompt)
    tool_result = second["messages"][-1]["content"][0]
    count = len(list((world_dirs[0] / "observed").iterdir()))
    assert (
        tool_result["tool_use_id"] == "toolu_1" and tool_result["content"] == f"<information>\n{count}\n</information>"
    )
    sent = json.dumps(StandIn.requests)
    for secret in [i.criterion for i in task.rubric] + [str(world_dirs[0]), "canonical", "expected_answer"]:
        assert secret not in sent, secret


def test_anthropic_agent_without_a_key_is_one_line_and_exit_2(world_dirs, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [WORLDGEN, "run", "anthropic", "--tasks", str(world_dirs[0]), "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2 and "ANTHROPIC_API_KEY" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "r" / "run.json").exists()


# --- the command line ----------------------------------------------------------------------------------------


def test_run_eval_and_export_from_the_command_line(reference_runs, world_dirs, tmp_path):
    task_file = sorted((world_dirs[2] / "tasks").glob("*.json"))[0]
    runs = tmp_path / "runs"
    done = subprocess.run(
        [WORLDGEN, "run", "reference", "--tasks", str(task_file), "--out", str(runs), "--max-steps", "6"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((runs / load_task(task_file).task_id / "result.json").read_text())
    assert result["status"] == "done" and set(result) >= {"score", "items", "steps", "tokens", "wall_seconds"}
    _, reference_out, _ = reference_runs
    report = subprocess.run([WORLDGEN, "eval", str(reference_out), "--json"], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    parsed = json.loads(report.stdout)
    assert parsed["score"]["mean"] >= 0.95 and parsed["negatives_triggered"]["0"] >= 1
    for fmt, schema_name in (("dsworld", "dsworld"), ("mle-world", "mle-world"), ("jsonl", None)):
        exported = subprocess.run(
            [
                WORLDGEN,
                "export",
                "transitions",
                "--runs",
                str(reference_out),
                "--out",
                str(tmp_path / "t"),
                "--format",
                fmt,
            ],
            capture_output=True,
            text=True,
        )
        assert exported.returncode == 0, exported.stderr
        records = [json.loads(x) for x in (tmp_path / "t" / f"{fmt}.jsonl").read_text().splitlines()]
        assert records
        if schema_name:
            validator = jsonschema.Draft202012Validator(schema(schema_name))
            for record in records:
                validator.validate(record)
    triples = [json.loads(x) for x in (tmp_path / "t" / "dsworld.jsonl").read_text().splitlines()]
    built = next(t for t in triples if "from_observed" in t["a_t"]["code"])
    assert {"units", "panel", "events"} <= {v["name"] for v in built["s_t1"]["variables"]}
    assert not {"units", "panel", "events"} & {v["name"] for v in built["s_t"]["variables"]}


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "nosuch", "--tasks", "{world}", "--out", "{tmp}/r"], "unknown agent"),
        (["run", "refrence", "--tasks", "{world}", "--out", "{tmp}/r"], "did you mean 'reference'"),
        (["run", "reference", "--tasks", "{tmp}", "--out", "{tmp}/r"], "no tasks found"),
        (["run", "reference", "--tasks", "{tmp}/missing", "--out", "{tmp}/r"], "no such file"),
        (["run", "reference", "--tasks", "{world}", "--out", "{tmp}/r", "--workers", "0"], "--workers"),
        (["eval", "{tmp}/missing"], "no such runs directory"),
        (["export", "transitions", "--runs", "{tmp}", "--out", "{tmp}/x"], "no episodes"),
        (["export", "transitions", "--runs", "{tmp}", "--out", "{tmp}/x", "--format", "csv"], "invalid choice"),
    ],
    ids=[
        "unknown-agent",
        "did-you-mean",
        "no-tasks",
        "missing-path",
        "workers",
        "eval-missing",
        "export-empty",
        "bad-format",
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, world_dirs, tmp_path):
    argv = [a.format(world=world_dirs[0], tmp=tmp_path) for a in args]
    done = subprocess.run([WORLDGEN, *argv], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


# --- eval ----------------------------------------------------------------------------------------------------


def _result(domain: str, kind: str, score: float, negatives: int = 0) -> dict:
    items = [
        {"polarity": "positive", "kind": "computation", "points": 2.0, "decision": score >= 0.5},
        {"polarity": "positive", "kind": "insight", "points": 1.0, "decision": True},
    ] + [{"polarity": "negative", "kind": "insight", "points": 1.0, "decision": True} for _ in range(negatives)]
    return {"status": "done", "domain": domain, "kind": kind, "score": score, "items": items}


def test_eval_bootstraps_within_strata_reproducibly():
    rng = np.random.default_rng(7)
    results = [
        _result(d, k, float(rng.uniform(0.2, 0.9) + (0.1 if d == "energy" else 0)), int(rng.integers(0, 5)))
        for d in ("energy", "retail")
        for k in ("cause", "consequence")
        for _ in range(10)
    ]
    report = evaluate(results, errors=1)
    again = evaluate(results, errors=1)
    assert report == again, "a fixed seed gives the same interval"
    low, high = report["score"]["ci95"]
    assert low < report["score"]["mean"] < high and high - low < 0.3
    assert evaluate(results, seed=1)["score"]["ci95"] != [low, high]
    flat = evaluate([_result("a", "cause", 0.5), _result("b", "consequence", 0.5)])
    assert flat["score"]["ci95"] == [0.5, 0.5], "one value per stratum: resampling within strata cannot move it"
    offsets = report["domain_offsets"]
    assert math.isclose(sum(v["offset"] * v["n"] for v in offsets.values()), 0.0, abs_tol=1e-3)
    assert offsets["energy"]["offset"] > offsets["retail"]["offset"]
    histogram = report["negatives_triggered"]
    assert sum(histogram.values()) == len(results) and report["errors"] == 1
    assert report["insight"]["n"] == report["computation"]["n"] == len(results)

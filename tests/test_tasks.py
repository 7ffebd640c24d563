"""Tasks and rubrics: grounded, world-specific, discriminating; graded by rules or by an LLM judge."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest

from contracts.model import load_contract
from rubrics.baselines import naive_answers, prior_answers, shuffled_answers
from rubrics.grade import GradeError, grade, grade_rules, load_task
from rubrics.model import Task

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
DEFECT_WORDS = ("duplicate", "drift", "schema change", "missing", "delay", "cents", "renamed", "typo")


def tasks_of(world: Path) -> list[Task]:
    return [load_task(p) for p in sorted((world / "tasks").glob("*.json"))]


@pytest.fixture(scope="module")
def all_tasks(world_dirs) -> dict[str, list[Task]]:
    return {w.name: tasks_of(w) for w in world_dirs}


def test_tasks_are_selected_grounded_and_versioned(world_dirs, all_tasks):
    total = 0
    for world in world_dirs:
        tasks = all_tasks[world.name]
        meta = json.loads((world / "world.json").read_text())
        contract = json.loads((world / "contract.json").read_text())
        audit = json.loads((world / "audit.json").read_text())
        recovered = {
            r["id"] for c in audit["checks"] if c["name"] == "recoverability" for r in c["estimates"] if r["within"]
        }
        assert sorted(t.task_id for t in tasks) == sorted(meta["tasks"])
        assert len(tasks) <= 2 * len(contract["layers"])
        assert len({(t.kind, t.variable) for t in tasks}) == len(tasks), "a question is asked twice"
        observed = {p.name for p in (world / "observed").iterdir()}
        for t in tasks:
            total += 1
            assert t.schema_version == "1.0" and t.world_id == world.name
            assert set(t.files) <= observed and t.files
            names = [v["name"] for v in contract["variables"] if "_" in v["name"]]
            assert not any(n in t.prompt for n in names), "variables are asked about in words, never by column"
            assert not any(w in t.prompt.lower() for w in DEFECT_WORDS), t.prompt
            assert any(i.polarity == "positive" for i in t.rubric) and any(i.polarity == "negative" for i in t.rubric)
            for item in t.rubric:
                assert item.phenomenon is None or item.phenomenon in recovered, (
                    f"{t.task_id}: {item.id} is not backed by the audit"
                )
    assert total > 0


def test_expected_reference_and_empty_answers_score_as_they_should(all_tasks):
    for tasks in all_tasks.values():
        for t in tasks:
            assert grade_rules(t, t.expected_answer)["score"] == 1.0, t.task_id
            assert grade_rules(t, t.reference_answer)["score"] >= 0.95, t.task_id
            assert t.reference_score == grade_rules(t, t.reference_answer)["score"]
            assert grade_rules(t, {})["score"] == 0.0
            assert grade_rules(t, {"variable": t.variable, "drivers": "none", "effects": 3})["score"] == 0.0


def test_naive_and_shuffled_answers_are_penalised(world_dirs, all_tasks):
    naive_scores, negatives = [], 0
    for world in world_dirs:
        answers = naive_answers(world, all_tasks[world.name])
        for t in all_tasks[world.name]:
            graded = grade_rules(t, answers[t.task_id])
            naive_scores.append(graded["score"])
            negatives += any(i["decision"] for i in graded["items"] if i["polarity"] == "negative")
    shuffled = shuffled_answers(all_tasks)
    shuffled_scores = [grade_rules(t, shuffled[t.task_id])["score"] for ts in all_tasks.values() for t in ts]
    assert statistics.mean(naive_scores) <= 0.25 and negatives >= len(naive_scores) // 3
    assert statistics.mean(shuffled_scores) <= 0.2


def test_priors_and_hints_do_not_pay(world_dirs, all_tasks):
    """An answer that reads no data (the pack's plausible edges and signs, the concern, even shares, guessed
    magnitudes) must score low everywhere: the rubric pays for analysis, not for reciting the domain."""
    scores = []
    for world in world_dirs:
        answers = prior_answers(all_tasks[world.name])
        scores += [grade_rules(t, answers[t.task_id])["score"] for t in all_tasks[world.name]]
    assert scores and statistics.mean(scores) <= 0.15, statistics.mean(scores)
    assert max(scores) < 0.5, max(scores)


def test_shares_spread_over_variables_that_are_no_causes_earn_no_share_item(world_dirs, all_tasks):
    """An even split over guessed drivers can land a true driver's share by luck; a share is a part of the
    change explained by the causes, so share given to a non-cause is taken from the causes and pays nothing."""
    checked = 0
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        causes = {e.parent for e in contract.edges}
        for t in all_tasks[world.name]:
            if t.kind != "cause":
                continue
            parents = {e.parent for e in contract.edges if e.child == t.variable}
            outsider = next(v.name for v in contract.variables if v.name not in parents | {t.variable})
            tolerance = max(i.check.tolerance for i in t.rubric if i.id.startswith("share:"))
            padded = dict(t.expected_answer)
            padded["drivers"] = t.expected_answer["drivers"] + [
                {"variable": outsider, "direction": "+", "share": 1.5 * tolerance}
            ]
            graded = {i["id"]: i["decision"] for i in grade_rules(t, padded)["items"]}
            assert not any(v for k, v in graded.items() if k.startswith("share:")), t.task_id
            small = dict(padded, drivers=t.expected_answer["drivers"] + [
                {"variable": outsider, "direction": "+", "share": 0.5 * tolerance}
            ])  # fmt: skip
            kept = {i["id"]: i["decision"] for i in grade_rules(t, small)["items"]}
            assert all(v for k, v in kept.items() if k.startswith("share:")), "a rounding-size share is no theft"
            checked += 1 if causes else 0
    assert checked


def _observed_mean_change(world: Path, contract, variable: str) -> float:
    """The stated definition, computed straight from X: mean over the reported values of each half."""
    v = contract.variable(variable)
    table = pl.read_parquet(world / "canonical" / ("events.parquet" if v.grain == "event" else "panel.parquet"))
    if v.grain == "event" and v.observe == "scale":
        table = table.filter(pl.col(f"responded_{variable}") == 1)
    if v.grain == "panel":
        table = table.filter(pl.col("open") == 1)
    values = table.select("day", pl.col(variable).cast(pl.Float64)).drop_nulls().drop_nans()
    half = contract.timeline.periods // 2
    h1 = values.filter(pl.col("day") < half)[variable].mean()
    h2 = values.filter(pl.col("day") >= half)[variable].mean()
    return (h2 - h1) / h1


def test_answers_under_the_stated_definitions_score_full_marks_and_other_conventions_do_not(world_dirs, all_tasks):
    """relative_change, direction, share and magnitude mean exactly what the prompt and schema say."""
    checked = {"change": 0, "direction": 0, "share": 0, "effect_direction": 0, "magnitude": 0}
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        targets = {ph.id: ph.target for ph in contract.phenomena}
        for t in all_tasks[world.name]:
            if t.kind == "cause":
                change = _observed_mean_change(world, contract, t.variable)
                drivers = []
                for e in (e for e in contract.edges if e.child == t.variable):
                    share = targets.get(f"share:{e.parent}->{t.variable}")
                    if share is not None:  # '+': the driver pushed the measure up over the period
                        drivers.append(
                            {"variable": e.parent, "direction": "+" if share * change > 0 else "-", "share": share}
                        )
                answer = {"variable": t.variable, "change": {"relative_change": change}, "drivers": drivers}
                assert grade_rules(t, answer)["score"] == 1.0, t.task_id
                swapped = dict(answer, change={"relative_change": -change / (1 + change)})  # (H1 - H2) / H2
                if abs(change) > 0.05:
                    assert grade_rules(t, swapped)["score"] < 1.0
                    checked["change"] += 1
                percent = dict(answer, drivers=[d | {"share": 100 * d["share"]} for d in drivers])
                assert grade_rules(t, percent)["score"] < 1.0
                checked["share"] += 1
                graded = {i.id.split(":", 1)[1] for i in t.rubric if i.id.startswith("driver:")}
                signs = {e.parent: e.sign for e in contract.edges if e.child == t.variable}
                slope_sign = dict(answer, drivers=[d | {"direction": signs[d["variable"]]} for d in drivers])
                if any(d["direction"] != signs[d["variable"]] for d in drivers if d["variable"] in graded):
                    assert grade_rules(t, slope_sign)["score"] < 1.0, "direction is the push, not the slope's sign"
                    checked["direction"] += 1
            else:
                flipped = [
                    e | {"direction": "-" if e["direction"] == "+" else "+"}
                    for e in t.expected_answer["effects"]
                    if "direction" in e
                ]
                if flipped:  # '+' means the effect rises when the cause rises: the other convention loses it
                    graded = grade_rules(t, dict(t.expected_answer, effects=flipped))
                    assert graded["score"] < 1.0
                    assert not any(i["decision"] for i in graded["items"] if i["id"].startswith("effect:"))
                    checked["effect_direction"] += 1
                # A magnitude is in the cause's own units: the same slope per standard deviation of the cause
                # is another number, and loses its item wherever the two differ by more than the tolerance.
                sd = contract.variable(t.variable).sd
                tolerance = {i.check.variable: i.check.tolerance for i in t.rubric if i.id.startswith("magnitude:")}
                per_sd = [
                    e | {"magnitude": e["magnitude"] * sd}
                    for e in t.expected_answer["effects"]
                    if e.get("mechanism") == "monotone" and e["variable"] in tolerance
                    and abs(e["magnitude"] * sd - e["magnitude"]) > tolerance[e["variable"]]
                ]  # fmt: skip
                if per_sd:
                    decided = {
                        i["id"]: i["decision"] for i in grade_rules(t, dict(t.expected_answer, effects=per_sd))["items"]
                    }
                    assert not any(decided[f"magnitude:{e['variable']}"] for e in per_sd), t.task_id
                    checked["magnitude"] += 1
    assert all(checked.values()), checked


def test_listing_every_variable_or_junk_does_not_pay(world_dirs, all_tasks):
    for world in world_dirs:
        names = [v["name"] for v in json.loads((world / "contract.json").read_text())["variables"]]
        for t in all_tasks[world.name]:
            key = "drivers" if t.kind == "cause" else "effects"
            everything = dict(t.expected_answer)
            listed = {e["variable"] for e in everything[key]}
            filler = {"direction": "+", "share": 0.0} if t.kind == "cause" else {"direction": "+", "magnitude": 0.0}
            everything[key] = everything[key] + [{"variable": n} | filler for n in names if n not in listed]
            everything[key] += [{"variable": "junk"}, 42, {"variable": names[0], "direction": "-"}]
            graded = grade_rules(t, everything)
            assert graded["score"] < 1.0, f"{t.task_id}: listing every variable must cost something"
            assert graded["schema_problems"], "junk entries are reported"


def test_grade_command_prints_scores_and_refuses_malformed_input(world_dirs, tmp_path):
    task_file = next(world_dirs[0].glob("tasks/*.json"))
    task = load_task(task_file)
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(task.expected_answer))
    result = subprocess.run([WORLDGEN, "grade", str(task_file), str(answer)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["score"] == 1.0 and len(out["items"]) == len(task.rubric)
    bad_answer, bad_task = tmp_path / "bad.json", tmp_path / "task.json"
    bad_answer.write_text("[1, 2")
    bad_task.write_text(json.dumps({"schema_version": "1.0", "task_id": "x"}))
    for args in (
        [str(task_file), str(bad_answer)],
        [str(bad_task), str(answer)],
        [str(task_file), str(tmp_path / "none.json")],
    ):
        result = subprocess.run([WORLDGEN, "grade", *args], capture_output=True, text=True)
        assert (
            result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        )


# --- the Anthropic judge, against a local stand-in speaking the Messages API -----------------------------


class StandIn(BaseHTTPRequestHandler):
    """Answers YES when the report quotes the criterion verbatim; can fail or stall on request."""

    requests: list[dict] = []
    fail_first = 0
    stall = 0.0

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if self.path != "/v1/messages":
            return self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such path"}})
        if type(self).fail_first > 0:
            type(self).fail_first -= 1
            return self._send(529, {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded"}})
        time.sleep(type(self).stall)
        text = body["messages"][0]["content"]
        criterion = text.split("):\n", 1)[1].split("\n\nReport:\n", 1)[0]
        report = text.split("\n\nReport:\n", 1)[1]
        verdict = "YES" if criterion in report else "NO"
        self._send(
            200,
            {
                "id": "msg_local",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": verdict}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        )

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep test output clean
        pass


@pytest.fixture()
def stand_in():
    pytest.importorskip("anthropic")
    StandIn.requests, StandIn.fail_first, StandIn.stall = [], 0, 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _report_of(task: Task) -> str:
    return "# Findings\n\n" + "\n".join(f"- {i.criterion}" for i in task.rubric if i.polarity == "positive")


def test_anthropic_judge_grades_a_report_and_caches_each_decision(world_dirs, stand_in, tmp_path):
    task = load_task(next(world_dirs[0].glob("tasks/*.json")))
    options = {
        "base_url": stand_in,
        "api_key": "test-key",
        "cache_dir": tmp_path / "cache",
        "max_retries": 0,
        "timeout": 5,
    }
    result = grade(task, None, judge="anthropic", report=_report_of(task), **options)
    assert result["score"] == 1.0 and len(StandIn.requests) == len(task.rubric)
    assert all(r["model"] and r["max_tokens"] == 5 for r in StandIn.requests)
    grade(task, None, judge="anthropic", report=_report_of(task), **options)
    assert len(StandIn.requests) == len(task.rubric), "cached decisions must not call the API again"
    wrong = grade(task, None, judge="anthropic", report="Nothing useful here.", **options)
    assert wrong["score"] == 0.0


def test_anthropic_judge_retries_and_times_out_cleanly(world_dirs, stand_in, tmp_path):
    task = load_task(next(world_dirs[0].glob("tasks/*.json")))
    StandIn.fail_first = 2
    result = grade(
        task,
        None,
        judge="anthropic",
        report=_report_of(task),
        base_url=stand_in,
        api_key="k",
        cache_dir=tmp_path / "a",
        max_retries=3,
        timeout=5,
    )
    assert result["score"] == 1.0 and len(StandIn.requests) == len(task.rubric) + 2
    StandIn.stall = 1.5
    with pytest.raises(GradeError, match="anthropic judge failed"):
        grade(
            task,
            None,
            judge="anthropic",
            report="x",
            base_url=stand_in,
            api_key="k",
            cache_dir=tmp_path / "b",
            max_retries=0,
            timeout=0.3,
        )


def test_anthropic_judge_from_the_command_line(world_dirs, stand_in, tmp_path):
    task_file = next(world_dirs[0].glob("tasks/*.json"))
    report = tmp_path / "report.md"
    report.write_text(_report_of(load_task(task_file)))
    env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stand_in, "HOME": str(tmp_path)}
    result = subprocess.run(
        [WORLDGEN, "grade", str(task_file), "--report", str(report), "--judge", "anthropic"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["score"] == 1.0
    missing_key = subprocess.run(
        [WORLDGEN, "grade", str(task_file), "--report", str(report), "--judge", "anthropic"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert missing_key.returncode == 2 and "ANTHROPIC_API_KEY" in missing_key.stderr

"""rubrics/scoring.py: standard-library only, and the same decisions as `worldgen grade` on any answer."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rubrics.scoring
from rubrics import scoring
from rubrics.grade import grade_rules, load_task
from worldgen.tasks import answer_schema

VERIFIER = Path(__file__).parents[1] / "worldgen" / "export" / "harbor_verifier.py"
VARIABLES = ["daily_orders", "rating", "promo_active", "courier_load"]
# answer_schema reads only each variable's name, description and unit from the contract.
WORLD = SimpleNamespace(
    variables=[SimpleNamespace(name=v, description=v.replace("_", " "), unit="") for v in VARIABLES]
)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_scoring_and_the_exported_verifier_use_the_standard_library_only(tmp_path):
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    assert _imports(Path(rubrics.scoring.__file__)) <= allowed
    assert _imports(VERIFIER) <= allowed | {"scoring"}
    # and they run without site-packages, as the task image's `python3 -I -S` runs them
    (tmp_path / "scoring.py").write_bytes(Path(rubrics.scoring.__file__).read_bytes())
    probe = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, '.'); import scoring; print(scoring.score)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, probe.stderr


def test_every_answer_schema_keyword_is_implemented():
    for kind in ("cause", "consequence"):
        assert scoring.unsupported_keywords(answer_schema(kind, WORLD)) == []
    assert scoring.unsupported_keywords({"type": "number", "minimum": 0}) == ["minimum"]
    assert scoring.unsupported_keywords({"properties": {"x": {"pattern": "a"}}}) == ["pattern"]


JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["+", "-", "up", "", *VARIABLES, "junk"]),
)
KEYS = st.sampled_from(["variable", "direction", "share", "magnitude", "mechanism", "statistic", "change", "x"])
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON, kind=st.sampled_from(["cause", "consequence"]))
def test_the_subset_validator_agrees_with_jsonschema(value, kind):
    schema = answer_schema(kind, WORLD)
    key = "drivers" if kind == "cause" else "effects"
    for sub in (schema, schema["properties"][key]["items"], schema["properties"][key]):
        assert scoring.is_valid(sub, value) == jsonschema.Draft202012Validator(sub).is_valid(value)
        assert bool(scoring.problems(sub, value)) == (not jsonschema.Draft202012Validator(sub).is_valid(value))


def _answers(kind: str):
    key = "drivers" if kind == "cause" else "effects"
    entry = st.one_of(
        st.fixed_dictionaries(
            {"variable": st.sampled_from(VARIABLES + ["junk"])},
            optional={
                "direction": st.sampled_from(["+", "-", "up", True]),
                "share": st.floats(-2, 2) | st.integers(-1, 1),
                "magnitude": st.floats(-50, 50) | st.sampled_from([1e308, float("nan")]),
            },
        ),
        JSON_LEAF,
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "variable": st.sampled_from(VARIABLES),
            "change": st.fixed_dictionaries({}, optional={"relative_change": st.floats(-1, 1) | JSON_LEAF}),
            key: st.lists(entry, max_size=6),
            ("effects" if key == "drivers" else "drivers"): st.lists(entry, max_size=2),
        },
    )


@pytest.fixture(scope="module")
def some_tasks(world_dirs):
    return [load_task(p) for w in world_dirs[:3] for p in sorted((w / "tasks").glob("*.json"))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_plain_data_grading_is_worldgen_grade(some_tasks, data):
    task = data.draw(st.sampled_from(some_tasks))
    answer = data.draw(_answers(task.kind))
    spec = json.loads(json.dumps({k: task.model_dump(mode="json")[k] for k in ("task_id", "answer_schema", "rubric")}))
    ours, theirs = scoring.grade_answer(spec, answer), grade_rules(task, answer)
    assert ours["score"] == theirs["score"]
    assert [i["decision"] for i in ours["items"]] == [i["decision"] for i in theirs["items"]]


def test_junk_in_the_list_the_schema_does_not_describe_is_dropped_not_a_crash(some_tasks):
    cause = next(t for t in some_tasks if t.kind == "cause")
    answer = {**cause.expected_answer, "effects": [42, {"direction": "+"}, {"variable": ["x"]}, {"variable": "y"}]}
    assert grade_rules(cause, answer)["score"] == 1.0

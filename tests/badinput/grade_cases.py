"""Bad input to `worldgen grade`: unreadable, oversized or hostile tasks, answers and reports."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.badinput.harness import Case, Sandbox


def grade(sb: Sandbox, task: str | None = None, answer: str | None = None, *flags: str) -> list[str]:
    task = task or str(sb.copy_task())
    answer = answer or str(sb.json("answer.json", sb.task_json()["expected_answer"]))
    return ["grade", task, answer, *flags]


def task_file(content: str | bytes) -> Callable:
    return lambda sb: grade(sb, task=str(sb.write("task.json", content)))


def answer_file(content: str | bytes) -> Callable:
    return lambda sb: grade(sb, answer=str(sb.write("answer.json", content)))


def task_at(kind: str) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        if kind == "fifo":
            return grade(sb, task=str(sb.fifo("task.json")))
        if kind == "dir":
            sb.path("task.json").mkdir()
            return grade(sb, task=str(sb.path("task.json")))
        if kind == "huge":
            return grade(sb, task=str(sb.sparse("task.json", 5 << 20)))
        return grade(sb, task=kind)

    return make


def answer_at(kind: str) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        if kind == "fifo":
            return grade(sb, answer=str(sb.fifo("answer.json")))
        if kind == "dir":
            sb.path("answer.json").mkdir()
            return grade(sb, answer=str(sb.path("answer.json")))
        return grade(sb, answer=kind)

    return make


def task_with(edit: Callable[[dict], None]) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        task = sb.task_json()
        edit(task)
        return grade(sb, task=str(sb.json("task.json", task)))

    return make


def schema_keyword(keyword: str, value: object, where: str = "variable") -> Callable:
    """Add a JSON Schema keyword to the answer schema (at a property, or at the root)."""

    def edit(task: dict) -> None:
        schema = task["answer_schema"]
        (schema if where == "(root)" else schema["properties"][where])[keyword] = value

    return task_with(edit)


def answer_with(build: Callable[[dict], object]) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        answer = build(json.loads(json.dumps(sb.task_json()["expected_answer"])))
        return grade(sb, answer=str(sb.json("answer.json", answer)))

    return make


def drivers(n: int) -> Callable[[dict], object]:
    def build(answer: dict) -> dict:
        return answer | {"drivers": [{"variable": f"v{i}", "direction": "+"} for i in range(n)]}

    return build


def many_values(answer: dict) -> dict:
    return answer | {"notes": {f"k{i}": i for i in range(6000)}}


def report(kind: str) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        task = str(sb.copy_task())
        if kind == "fifo":
            path = sb.fifo("report.md")
        elif kind == "not-utf8":
            path = sb.write("report.md", b"# report \xff\xfe")
        elif kind == "huge":
            path = sb.sparse("report.md", 2 << 20)
        else:
            path = sb.path("none.md")
        return ["grade", task, "--judge", "anthropic", "--report", str(path), "--base-url", "http://127.0.0.1:9"]

    return make


CATASTROPHIC = "^(a+)+$"

CASES = [
    # the task file
    Case("task-missing", task_at("/nonexistent/task.json"), "cannot read task"),
    Case("task-directory", task_at("dir"), "task is a directory"),
    Case("task-fifo", task_at("fifo"), "task is a FIFO", installed=True),
    Case("task-dev-zero", task_at("/dev/zero"), "task is a character device"),
    Case("task-huge", task_at("huge"), "over the 4.0 MiB limit"),
    Case("task-not-json", task_file("{task"), "not valid JSON"),
    Case("task-not-utf8", task_file(b'{"task_id": "\xff"}'), "not UTF-8"),
    Case("task-deep", task_file("[" * 100_000 + "]" * 100_000), "nested 100000 levels deep", installed=True),
    Case("task-deep-in-schema", task_with(lambda t: t.__setitem__("answer_schema", _nest(200))), "nested"),
    Case("task-a-list", task_file("[]"), "not a task"),
    Case("task-schema-version-9.9", task_with(lambda t: t.__setitem__("schema_version", "9.9")), "'9.9'"),
    Case("task-missing-rubric", task_with(lambda t: t.pop("rubric") and None), "field rubric"),
    Case("task-extra-field", task_with(lambda t: t.__setitem__("exec", "rm -rf /")), "field exec"),
    Case("task-lone-surrogate", task_file('{"schema_version": "1.0", "task_id": "\\ud800"}'), "surrogate"),
    Case("schema-pattern-catastrophic", schema_keyword("pattern", CATASTROPHIC), "keyword 'pattern'", installed=True),
    Case("schema-pattern-properties", schema_keyword("patternProperties", {CATASTROPHIC: {}}, "(root)"), "keyword"),
    Case("schema-property-names", schema_keyword("propertyNames", {"pattern": CATASTROPHIC}, "(root)"), "keyword"),
    Case("schema-format", schema_keyword("format", "regex"), "keyword 'format'"),
    Case("schema-ref", schema_keyword("$ref", "https://example.com/s.json"), "keyword '$ref'"),
    Case("schema-dynamic-ref", schema_keyword("$dynamicRef", "#x"), "keyword '$dynamicRef'"),
    Case("schema-if-then", schema_keyword("if", {"type": "string"}), "keyword 'if'"),
    Case("schema-additional-properties", schema_keyword("additionalProperties", False, "(root)"), "keyword"),
    Case(
        "schema-other-draft", schema_keyword("$schema", "http://json-schema.org/draft-04/schema#", "(root)"), "$schema"
    ),
    Case("schema-nested-schema-keyword", schema_keyword("$schema", "x"), "keyword '$schema'"),
    Case("schema-unknown-type", schema_keyword("type", "regex"), "unknown type"),
    Case("schema-enum-of-objects", schema_keyword("enum", [{"a": 1}]), "list of plain values"),
    Case("schema-not-an-object", task_with(lambda t: t.__setitem__("answer_schema", {"properties": []})), "object"),
    Case(
        "schema-invalid",
        task_with(lambda t: t["answer_schema"].__setitem__("required", "variable")),
        "list of property names",
    ),
    # the answer
    Case("answer-missing", answer_at("/nonexistent/answer.json"), "cannot read answer"),
    Case("answer-directory", answer_at("dir"), "answer is a directory"),
    Case("answer-fifo", answer_at("fifo"), "answer is a FIFO"),
    Case("answer-dev-zero", answer_at("/dev/zero"), "answer is a character device"),
    Case("answer-not-json", answer_file("[1, 2"), "not valid JSON"),
    Case("answer-not-utf8", answer_file(b'{"variable": "\xc3("}'), "not UTF-8"),
    Case("answer-deep", answer_file('{"a": ' + "[" * 20_000 + "]" * 20_000 + "}"), "nested 20001 levels deep"),
    Case("answer-a-list", answer_file("[]"), "must be a JSON object, got list"),
    Case("answer-a-string", answer_file('"everything rose"'), "must be a JSON object, got str"),
    Case("answer-lone-surrogate", answer_file('{"variable": "\\udfff"}'), "surrogate"),
    Case("answer-a-million-entries", answer_with(drivers(1_000_000)), "over the 1.0 MiB limit", installed=True),
    Case("answer-100k-entries", answer_with(drivers(100_000)), "over the 1.0 MiB limit"),
    Case("answer-301-entries", answer_with(drivers(301)), "has 301 entries, over the limit of 300"),
    Case("answer-too-many-values", answer_with(many_values), "more than 5000 values"),
    Case("answer-huge-sparse", lambda sb: grade(sb, answer=str(sb.sparse("a.json", 3 << 20))), "limit"),
    Case("no-answer-for-rules", lambda sb: ["grade", str(sb.copy_task())], "give ANSWER.json"),
    Case("no-report-for-anthropic", lambda sb: ["grade", str(sb.copy_task()), "--judge", "anthropic"], "--report"),
    Case("report-fifo", report("fifo"), "report is a FIFO"),
    Case("report-not-utf8", report("not-utf8"), "not UTF-8"),
    Case("report-huge", report("huge"), "over the 1.0 MiB limit"),
    Case("report-missing", report("missing"), "cannot read report"),
    Case("judge-unknown", lambda sb: grade(sb, None, None, "--judge", "oracle"), "invalid choice: 'oracle'"),
    Case("grade-no-arguments", lambda sb: ["grade"], "the following arguments are required"),
]


def _nest(depth: int) -> dict:
    schema: dict = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema

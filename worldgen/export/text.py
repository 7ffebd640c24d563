"""What an agent is shown: the persona's question, where the data is, and the answer contract.

Built from public parts only: the task's prompt, the names of ALL the world's observed files (never the
task's own `files` list: finding the relevant systems is part of the analysis) and the answer schema.
Rubric items, expected values and the generation record never reach this module's output.
"""

from __future__ import annotations

import json

from rubrics.model import Task

FIELD_NOTES = {
    "cause": (
        "`change.relative_change` is (mean in the second half - mean in the first half) / mean in the first half, "
        "as a fraction (0.12 means +12%).",
        "List each driver once in `drivers`: its `variable` (one of the names the schema allows), its `direction` "
        '("+" if it pushed the variable up over the period, "-" if down) and, where you can, its `share` of the '
        "change, as a fraction (0.4 means 40%).",
    ),
    "consequence": (
        "List each measure the variable affects once in `effects`: its `variable` (one of the names the schema "
        'allows), its `direction` ("+" if it rises as the variable rises, "-" if it falls), and the effect\'s '
        "`mechanism`, `statistic` and `magnitude` as the schema describes them.",
    ),
}
COMMON_NOTES = (
    "Name only what your analysis of the files supports: wrong or unsupported entries can cost points.",
    "Variable names are the schema's own (snake_case), whatever the files call the columns.",
)


def schema_text(schema: dict) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False)


def file_list(files: list[str]) -> str:
    return "\n".join(f"- `{name}`" for name in files)


def instruction_md(task: Task, files: list[str], data_dir: str = "/app/data/") -> str:
    """A Harbor task's instruction.md."""
    notes = "\n".join(f"- {n}" for n in FIELD_NOTES[task.kind] + COMMON_NOTES)
    return (
        f"{task.prompt}\n\n"
        f"## The data\n\n"
        f"The files exported from our business systems are in `{data_dir}` ({len(files)} files; not every file "
        f"bears on the question):\n\n"
        f"{file_list(files)}\n\n"
        f"## Your answer\n\n"
        f"Write your answer to `/app/answer.json`: one JSON object, valid against this JSON Schema.\n\n"
        f"```json\n{schema_text(task.answer_schema)}\n```\n\n"
        f"{notes}\n\n"
        f"Optionally, also write `/app/report.md`: a short report of your analysis and findings in prose. "
        f"The structured answer is what is scored; the report may be read by an LLM judge.\n"
    )


def pool_context(task: Task, files: list[str], data_dir: str = "data/") -> str:
    """An RL row's context: where the files are and the answer contract (the answer comes back in the reply)."""
    notes = "\n".join(f"- {n}" for n in FIELD_NOTES[task.kind] + COMMON_NOTES)
    return (
        f"The files exported from our business systems are in `{data_dir}` ({len(files)} files; not every file "
        f"bears on the question):\n"
        f"{file_list(files)}\n\n"
        f"Analyse them, then give your final answer as one JSON object inside <answer>...</answer>, valid "
        f"against this JSON Schema:\n\n"
        f"```json\n{schema_text(task.answer_schema)}\n```\n\n"
        f"{notes}\n"
    )


def pool_prompt(task: Task, files: list[str], data_dir: str = "data/") -> str:
    """An RL row's user message: the persona's question, then the context."""
    return f"{task.prompt}\n\n{pool_context(task, files, data_dir)}"

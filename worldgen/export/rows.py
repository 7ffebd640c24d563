"""RL rows, one writer per framework: the exact shapes verl, SkyRL, OpenRLHF and DSGym load (FORMATS.md).

Every format is built from the same `Example` (one task of one world). The ground truth is the task's
grading spec as a JSON string (task id, answer schema, rubric, expected answer): what
`worldgen.reward.compute_score` grades against. Paths are relative to the pool's root, where `data/<world>/`
holds the world's observed files; the prompt tells the model its files are in `data/`, so an environment
mounts or copies `data_dir` there. Adding a format is one function and one FORMATS entry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA_SOURCE = "worldgen"
ABILITY = "data_analysis"
SKYRL_ENV_CLASS = "worldgen"  # register a SkyRL env under this id (e.g. a code-execution env using compute_score)
CODE_TOOL = "python"  # the verl tool whose instances receive the world's data directory at create time


@dataclass(frozen=True)
class Example:
    index: int
    world_id: str
    task_id: str
    domain: str
    kind: str
    variable: str
    depth: int
    audit: str
    prompt: str
    question: str
    context: str
    data_dir: str
    data_files: list[str]
    ground_truth: str
    expected_answer: dict
    answer_schema: dict
    reference_score: float

    def info(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "split": "train",
            "world_id": self.world_id,
            "task_id": self.task_id,
            "domain": self.domain,
            "kind": self.kind,
            "variable": self.variable,
            "depth": self.depth,
            "audit": self.audit,
            "data_dir": self.data_dir,
            "data_files": self.data_files,
        }

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.prompt}]


def verl_row(e: Example) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": e.messages(),
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": e.ground_truth},
        "extra_info": {**e.info(), "tools_kwargs": {CODE_TOOL: {"create_kwargs": {"data_dir": e.data_dir}}}},
    }


def skyrl_row(e: Example) -> dict:
    return {
        "data_source": DATA_SOURCE,
        "prompt": e.messages(),
        "env_class": SKYRL_ENV_CLASS,
        "reward_spec": {"method": "rule", "ground_truth": e.ground_truth},
        "extra_info": e.info(),
        "data_dir": e.data_dir,  # every other column reaches the env as `extras`
    }


def openrlhf_row(e: Example) -> dict:
    return {"input": e.prompt, "label": e.ground_truth, "datasource": DATA_SOURCE, **e.info()}


def dsgym_row(e: Example) -> dict:
    return {
        "context": e.context,
        "question": e.question,
        "answer": json.dumps(e.expected_answer, sort_keys=True),
        "data": [f"{e.data_dir}/{name}" for name in e.data_files],
        "metadata": {**e.info(), "ground_truth": e.ground_truth, "answer_schema": e.answer_schema},
    }


def plain_row(e: Example) -> dict:
    return {
        "id": e.task_id,
        **e.info(),
        "prompt": e.prompt,
        "answer_schema": e.answer_schema,
        "ground_truth": e.ground_truth,
        "expected_answer": e.expected_answer,
        "reference_score": e.reference_score,
    }


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd")


def write_jsonl(rows: list[dict], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_json(rows: list[dict], path: Path) -> None:
    path.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


# format -> (row builder, writer, file name)
FORMATS: dict[str, tuple[Callable[[Example], dict], Callable[[list[dict], Path], None], str]] = {
    "verl": (verl_row, write_parquet, "train.parquet"),
    "skyrl": (skyrl_row, write_parquet, "train.parquet"),
    "openrlhf": (openrlhf_row, write_jsonl, "train.jsonl"),
    "dsgym": (dsgym_row, write_json, "train.json"),
    "jsonl": (plain_row, write_jsonl, "train.jsonl"),
}

"""Where episodes come from: task files plus the observed files an agent may see.

`find_tasks(path)` accepts a build directory (worlds/*/tasks/*.json), a world directory (tasks/*.json) or one
task file, and returns `TaskRef`s in a stable order. Other layouts (e.g. exported Harbor task directories)
plug in with `register_task_source(fn)`: `fn(path)` returns a list of TaskRefs, or None if the path is not
its format. Only the harness reads a TaskRef; the agent sees the prompt, the data files and the schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from contracts.errors import WorldgenError
from rubrics.grade import load_task
from rubrics.model import Task


class TaskSourceError(WorldgenError):
    """A path that holds no tasks, or tasks without their data."""


@dataclass(frozen=True)
class TaskRef:
    """A task (with its rubric: harness only), the directory of its data files, and its world (if any)."""

    task: Task
    data_dir: Path
    world_dir: Path | None = None
    source: str = "world"

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def domain(self) -> str:
        """The world's domain: from world.json when the world is at hand, else the task id's prefix."""
        if self.world_dir is not None and (self.world_dir / "world.json").is_file():
            import json

            try:
                return str(json.loads((self.world_dir / "world.json").read_text())["domain"])
            except (OSError, ValueError, KeyError):
                pass
        return self.task.world_id.split("-s", 1)[0]


TaskSource = Callable[[Path], "list[TaskRef] | None"]
_SOURCES: list[TaskSource] = []


def register_task_source(source: TaskSource) -> TaskSource:
    """Add a task layout; sources registered later are tried first."""
    _SOURCES.insert(0, source)
    return source


def task_ref(task_file: Path) -> TaskRef:
    """A task file inside a world directory (<world>/tasks/<task_id>.json)."""
    task = load_task(task_file)
    world = task_file.resolve().parent.parent
    if not (world / "observed").is_dir():
        raise TaskSourceError(f"{task_file}: not inside a world directory (no {world / 'observed'})")
    return TaskRef(task=task, data_dir=world / "observed", world_dir=world, source="world")


@register_task_source
def _world_layout(path: Path) -> list[TaskRef] | None:
    if path.is_file() and path.suffix == ".json":
        return [task_ref(path)]
    if (path / "tasks").is_dir() and (path / "observed").is_dir():
        return [task_ref(p) for p in sorted((path / "tasks").glob("*.json"))]
    if (path / "worlds").is_dir():
        worlds = sorted(p for p in (path / "worlds").iterdir() if p.is_dir() and not p.name.startswith("."))
        return [task_ref(p) for w in worlds for p in sorted((w / "tasks").glob("*.json"))]
    return None


def find_tasks(path: Path) -> list[TaskRef]:
    """Every task under `path`; a path that is missing or holds none is a TaskSourceError."""
    path = Path(path)
    if not path.exists():
        raise TaskSourceError(f"{path}: no such file or directory")
    for source in _SOURCES:
        refs = source(path)
        if refs is not None:
            if not refs:
                raise TaskSourceError(f"{path}: no tasks found")
            return refs
    raise TaskSourceError(
        f"{path}: no tasks found (expected a build directory, a world directory or a tasks/<task_id>.json file)"
    )

"""Bad input to `worldgen audit`: paths that are not worlds, and worlds that would make the auditor block,
read files outside the world, or write through a link. All are refused before the first check runs."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable

from tests.badinput.harness import Case, Sandbox


def audit(*paths: str) -> list[str]:
    return ["audit", *paths]


def world_with(change: Callable[[Sandbox, object], object]) -> Callable:
    """A copy of a sound world with one thing changed, audited."""

    def make(sb: Sandbox) -> list[str]:
        world = sb.copy_world()
        change(sb, world)
        return audit(str(world))

    return make


def replace(rel: str, kind: str, target: str | None = None, content: str | bytes | None = None) -> Callable:
    """Replace world/<rel> by a FIFO, a socket, a link, a directory or other content."""

    def change(sb: Sandbox, world) -> None:
        path = world / rel
        if path.is_dir() and not path.is_symlink():
            import shutil

            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":  # bound by a relative name: AF_UNIX paths are limited to ~100 bytes
            here = os.getcwd()
            os.chdir(path.parent)
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.bind(path.name)
            finally:
                os.chdir(here)
        elif kind == "link":
            os.symlink(target if target is not None else sb.write("outside/victim.txt", "outside\n"), path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "content":
            sb.write(path.relative_to(sb.root).as_posix(), content)

    return world_with(change)


def edit_json(rel: str, edit: Callable[[dict], object]) -> Callable:
    def change(sb: Sandbox, world) -> None:
        value = json.loads((world / rel).read_text())
        result = edit(value)
        (world / rel).write_text(json.dumps(value if result is None else result))

    return world_with(change)


def edit_ledger(edit: Callable[[list[dict]], None]) -> Callable:
    def change(sb: Sandbox, world) -> None:
        records = [json.loads(line) for line in (world / "ledger.jsonl").read_text().splitlines()]
        edit(records)
        (world / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    return world_with(change)


def first_observed(sb: Sandbox) -> str:
    return "observed/" + sorted(os.listdir(sb.sources.world / "observed"))[0]


def observed(kind: str, target: str | None = None) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        return replace(first_observed(sb), kind, target)(sb)

    return make


def build_dir_with(setup: Callable[[Sandbox, object], None]) -> Callable:
    """A build directory whose worlds/ holds something that is not a world."""

    def make(sb: Sandbox) -> list[str]:
        build = sb.path("build")
        (build / "worlds").mkdir(parents=True)
        setup(sb, build / "worlds")
        return audit(str(build))

    return make


def linked_world(sb: Sandbox, worlds) -> None:
    os.symlink(sb.copy_world("elsewhere/world"), worlds / "linked")


def fifo_world(sb: Sandbox, worlds) -> None:
    os.mkfifo(worlds / "pipe")


def set_files(value) -> Callable:
    return lambda meta: meta.__setitem__("files", value)


def deliverable_file(name: str) -> Callable:
    def edit(contract: dict) -> None:
        contract["deliverables"][0]["file"] = name

    return edit


def projection_output(name: str) -> Callable:
    def edit(records: list[dict]) -> None:
        step = next(r for r in records if r.get("name") == "projection")
        step["outputs"][name] = "0" * 64

    return edit


CASES = [
    # not a world at all
    Case("missing-path", lambda sb: audit(str(sb.path("nowhere"))), "no such file or directory", installed=True),
    Case("empty-directory", lambda sb: audit(str(sb.path(".") / "")), "neither a world"),
    Case("a-regular-file", lambda sb: audit(str(sb.write("notes.txt", "hi"))), "neither a world"),
    Case("a-fifo", lambda sb: audit(str(sb.fifo("pipe"))), "neither a world"),
    Case("dev-null", lambda sb: audit("/dev/null"), "neither a world"),
    Case("no-paths", lambda sb: ["audit"], "the following arguments are required"),
    Case("unknown-flag", lambda sb: audit(str(sb.path(".")), "--jsno"), "unrecognized arguments"),
    Case("empty-build", build_dir_with(lambda sb, worlds: None), "no worlds under"),
    Case("build-with-linked-world", build_dir_with(linked_world), "a world must be a directory, not a symbolic link"),
    Case("build-with-fifo-entry", build_dir_with(fifo_world), "a world must be a directory, not a FIFO"),
    Case("world-missing-contract", replace("contract.json", "dir"), "contract is a directory"),
    Case(
        "world-missing-ledger",
        world_with(lambda sb, w: (w / "ledger.jsonl").unlink()),
        "not a complete world (missing ledger.jsonl)",
    ),
    # files that would block the auditor forever
    Case("observed-fifo", observed("fifo"), "FIFO (named pipe) in a world; refusing to open it", installed=True),
    Case("observed-socket", observed("socket"), "a socket in a world"),
    Case("world-json-fifo", replace("world.json", "fifo"), "FIFO"),
    Case("contract-fifo", replace("contract.json", "fifo"), "FIFO"),
    Case("ledger-fifo", replace("ledger.jsonl", "fifo"), "FIFO"),
    Case("projection-fifo", replace("projection.json", "fifo"), "FIFO"),
    Case("canonical-fifo", replace("canonical/units.parquet", "fifo"), "FIFO"),
    Case("task-fifo", replace("tasks/extra.json", "fifo"), "FIFO"),
    Case("audit-json-fifo", replace("audit.json", "fifo"), "FIFO"),
    # links that leave the world
    Case(
        "observed-link-to-passwd", observed("link", "/etc/passwd"), "a symbolic link out of the world", installed=True
    ),
    Case("observed-dir-link-to-etc", replace("observed", "link", "/etc"), "a symbolic link out of the world"),
    Case("observed-link-to-dev-zero", observed("link", "/dev/zero"), "a symbolic link out of the world"),
    Case("canonical-link-out", replace("canonical/events.parquet", "link"), "a symbolic link out of the world"),
    Case("world-json-link-out", replace("world.json", "link"), "a symbolic link out of the world"),
    Case("contract-link-out", replace("contract.json", "link"), "a symbolic link out of the world"),
    Case(
        "audit-json-link-out",  # the auditor must never write through this link to the user's file
        replace("audit.json", "link"),
        "a symbolic link out of the world",
        installed=True,
    ),
    Case(
        "link-up-and-back", replace("observed/x.csv", "link", "../../world/../.."), "a symbolic link out of the world"
    ),
    Case("link-loop-out", replace("observed/loop", "link", "../observed/loop"), "a symbolic link that leads nowhere"),
    Case(
        "dangling-link", replace("observed/gone.csv", "link", "/nonexistent/file"), "a symbolic link out of the world"
    ),
    Case("link-in-world-to-fifo", lambda sb: _inner_fifo_link(sb), "FIFO"),
    # world.json and contract.json that are not ours to trust
    Case("world-json-not-json", replace("world.json", "content", content="{not json"), "not valid JSON"),
    Case("world-json-not-utf8", replace("world.json", "content", content=b'{"a": "\xff"}'), "not UTF-8"),
    Case("world-json-deep", replace("world.json", "content", content="[" * 9000 + "]" * 9000), "nested 9000"),
    Case("world-json-a-list", replace("world.json", "content", content="[]"), "must hold JSON objects"),
    Case("world-json-huge", lambda sb: _sparse_in_world(sb, "world.json", 17 << 20), "over the 16.0 MiB limit"),
    Case(
        "world-json-schema-9.9",
        edit_json("world.json", lambda m: m.__setitem__("schema_version", "9.9")),
        "schema_version '9.9' is not the supported",
        installed=True,
    ),
    Case(
        "world-json-no-schema-version",
        edit_json("world.json", lambda m: m.pop("schema_version") and None),
        "schema_version None is not the supported",
    ),
    Case(
        "world-json-lone-surrogate",
        replace("world.json", "content", content='{"schema_version": "1.0", "world_id": "\\udc80"}'),
        "lone UTF-16 surrogate",
    ),
    Case("files-escape-up", edit_json("world.json", set_files({"../../x": "0"})), "'files' must map paths inside"),
    Case("files-absolute", edit_json("world.json", set_files({"/etc/passwd": "0"})), "'files' must map paths inside"),
    Case("files-not-a-map", edit_json("world.json", set_files(["observed/a.csv"])), "'files' must map paths inside"),
    Case("contract-deep", replace("contract.json", "content", content="[" * 50_000 + "]" * 50_000), "nested 50000"),
    Case("contract-not-json", replace("contract.json", "content", content="{"), "not valid JSON"),
    Case("contract-huge", lambda sb: _sparse_in_world(sb, "contract.json", 17 << 20), "over the 16.0 MiB limit"),
    Case(
        "deliverable-escapes",
        edit_json("contract.json", deliverable_file("../../../../etc/passwd")),
        "leaves observed/",
    ),
    Case("deliverable-absolute", edit_json("contract.json", deliverable_file("/etc/passwd")), "leaves observed/"),
    Case("ledger-output-escapes", edit_ledger(projection_output("../../../etc/passwd")), "leaves the world"),
    Case("ledger-output-absolute", edit_ledger(projection_output("/etc/passwd")), "leaves the world"),
    Case("observed-huge", lambda sb: _sparse_in_world(sb, "observed/huge.csv", 5 << 30), "larger than 4096 MiB"),
    Case("audit-json-a-directory", replace("audit.json", "dir"), "cannot write audit.json (it is a directory)"),
]


def _inner_fifo_link(sb: Sandbox) -> list[str]:
    world = sb.copy_world()
    os.mkfifo(world / "canonical" / "pipe")
    os.symlink("../canonical/pipe", world / "observed" / "pipe.csv")
    return audit(str(world))


def _sparse_in_world(sb: Sandbox, rel: str, size: int) -> list[str]:
    world = sb.copy_world()
    sb.sparse(f"world/{rel}", size)
    return audit(str(world))

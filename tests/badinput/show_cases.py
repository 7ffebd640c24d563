"""Bad input to `worldgen show` and `worldgen eval --html`: paths that are not worlds or builds, worlds that are
broken or unsafe to read, and outputs the command may not write (a file it did not write, a link, a FIFO, a
directory of someone else's, anywhere inside a world or an export). All refused in one line, nothing written."""

from __future__ import annotations

import json

from tests.badinput.harness import Case, Sandbox


def show(*args: str) -> list[str]:
    return ["show", *args]


def world_with(rel: str, content: str | None = None, link: str | None = None):
    """A copy of a sound world with one file replaced (or turned into a link), shown into the sandbox."""

    def make(sb: Sandbox) -> list[str]:
        world = sb.copy_world()
        path = world / rel
        if path.exists() or path.is_symlink():
            path.unlink()
        if link is not None:
            path.symlink_to(link)
        else:
            sb.write(f"world/{rel}", content or "")
        return show(str(world), "--out", str(sb.path("card.html")))

    return make


def build_of_one(sb: Sandbox) -> str:
    """A build directory holding a copy of the sound world."""
    sb.copy_world(f"build/worlds/{sb.sources.world.name}")
    return str(sb.path("build"))


def runs(sb: Sandbox) -> str:
    result = {"status": "done", "agent": "reference", "domain": "retail", "kind": "cause", "score": 0.5, "items": []}
    sb.json("runs/t1/result.json", result)
    return str(sb.path("runs"))


CASES: list[Case] = [
    Case("missing-path", lambda sb: show(str(sb.path("nowhere"))), "no such file or directory", installed=True),
    Case("empty-directory", lambda sb: show(str(sb.path("empty").mkdir() or sb.path("empty"))), "neither a world"),
    Case("unknown-flag", lambda sb: show(str(sb.copy_world()), "--pgn", "x.png"), "unrecognized arguments"),
    Case(
        "out-is-someone-elses-file",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.write("notes.html", "<p>my notes</p>"))),
        "was not written by worldgen show",
        installed=True,
    ),
    Case(
        "png-is-someone-elses-file",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.path("c.html")), "--png", str(sb.write("p.png", "x"))),
        "--png",
    ),
    Case("out-is-a-directory", lambda sb: show(str(sb.copy_world()), "--out", str(sb.copy_world("d"))), "a directory"),
    Case("out-is-a-fifo", lambda sb: show(str(sb.copy_world()), "--out", str(sb.fifo("card.html"))), "FIFO"),
    Case(
        "out-is-a-link",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.link("card.html", sb.write("mine.txt", "x")))),
        "symbolic link",
    ),
    Case(
        "out-inside-the-world",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.path("world/observed/card.html"))),
        "must stay out of what analysts receive",
        installed=True,
    ),
    Case(
        "out-inside-an-export",
        lambda sb: show(
            str(sb.copy_world()), "--out", str(sb.json("bench/splits.json", {"export": "bench"}).parent / "c.html")
        ),
        "inside an exported bench or pool",
    ),
    Case(
        "out-same-as-png",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.path("c.html")), "--png", str(sb.path("c.html"))),
        "name the same file",
    ),
    Case(
        "png-height-without-png",
        lambda sb: show(str(sb.copy_world()), "--out", str(sb.path("c.html")), "--png-height", "100"),
        "--png-height needs --png",
    ),
    Case(
        "png-height-zero",
        lambda sb: show(
            str(sb.copy_world()), "--out", str(sb.path("c.html")), "--png", str(sb.path("c.png")), "--png-height", "0"
        ),
        "--png-height must be a positive",
    ),
    Case("png-for-a-build", lambda sb: show(build_of_one(sb), "--png", str(sb.path("b.png"))), "--png is for a world"),
    Case(
        "site-over-someone-elses-directory",
        lambda sb: show(build_of_one(sb), "--out", str(sb.write("site/mine.txt", "x").parent)),
        "did not write",
    ),
    Case(
        "site-marker-is-a-fifo",
        lambda sb: show(build_of_one(sb), "--out", str(sb.fifo("site/show.json").parent)),
        "did not write",
    ),
    Case("site-is-a-file", lambda sb: show(build_of_one(sb), "--out", str(sb.write("site", "x"))), "not a directory"),
    Case("contract-not-a-contract", world_with("contract.json", "{}"), "invalid contract"),
    Case(
        "contract-is-a-fifo",
        lambda sb: show(str(_fifo_in_world(sb, "contract.json")), "--out", str(sb.path("c.html"))),
        "FIFO",
    ),
    Case("link-out-of-the-world", world_with("projection.json", link="/etc/hostname"), "out of the world"),
    Case("projection-not-a-record", world_with("projection.json", "[1, 2]"), "not a projection record"),
    Case("audit-not-a-report", world_with("audit.json", json.dumps({"verdict": "maybe"})), "not an audit report"),
    Case("task-not-a-task", world_with("tasks/extra.json", "{}"), "task schema_version"),
    Case("panel-not-parquet", world_with("canonical/panel.parquet", "not parquet"), "unreadable canonical panel"),
    Case(
        "eval-html-over-someone-elses-file",
        lambda sb: ["eval", runs(sb), "--html", str(sb.write("report.html", "mine"))],
        "was not written by worldgen show",
        installed=True,
    ),
    Case(
        "eval-html-inside-a-world",
        lambda sb: ["eval", runs(sb), "--html", str(sb.copy_world() / "observed" / "r.html")],
        "must stay out of what analysts receive",
    ),
]


def _fifo_in_world(sb: Sandbox, rel: str):
    world = sb.copy_world()
    (world / rel).unlink()
    sb.fifo(f"world/{rel}")
    return world

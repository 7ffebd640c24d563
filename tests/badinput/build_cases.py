"""Bad input to `worldgen build`: flags, persona files, and output directories that are not ours to touch."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.badinput.harness import Case, Sandbox

PERSONA = {
    "id": "p-1",
    "domain": "food_delivery",
    "role": "operations manager",
    "organisation": "a delivery app",
    "region": "Lyon",
    "concern": "orders are falling",
}


def build(sb: Sandbox, *flags: str, out: str = "out") -> list[str]:
    return ["build", "--n", "1", "--size", "small", "--quiet", "--out", str(sb.path(out)), *flags]


def flags(*args: str) -> Callable:
    return lambda sb: build(sb, *args)


def personas(lines: list[str] | bytes) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        content = lines if isinstance(lines, bytes) else "\n".join(lines) + "\n"
        return build(sb, "--personas", str(sb.write("personas.jsonl", content)))

    return make


def persona(**changes) -> str:
    return json.dumps({k: v for k, v in (PERSONA | changes).items() if v is not None})


def personas_at(kind: str) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        if kind == "dir":
            sb.path("personas.jsonl").mkdir()
            path = sb.path("personas.jsonl")
        elif kind == "fifo":
            path = sb.fifo("personas.jsonl")
        elif kind == "link-to-fifo":
            sb.fifo("pipe")
            path = sb.link("personas.jsonl", sb.path("pipe"))
        elif kind == "huge":
            path = sb.sparse("personas.jsonl", 17 << 20)
        else:
            path = Path(kind)
        return build(sb, "--personas", str(path))

    return make


# --- the output directory ----------------------------------------------------------------------------------


def foreign_out(sb: Sandbox) -> list[str]:
    """The issue's case: a directory that looks like a build but has no build.json of ours."""
    sb.write("out/manifest.jsonl", '{"index": 0, "mine": true}\n')
    sb.write("out/timings.jsonl", '{"user": "data"}\n')
    sb.write("out/worlds/.tmp-x/keep.txt", "a user's file")
    sb.json("out/worlds/x/world.json", {"index": 0, "world_id": "x", "seed": 0, "domain": "d", "status": "pass"})
    return build(sb)


def out_at(setup: Callable[[Sandbox], object], out: str) -> Callable:
    """Prepare something at --out, then build into it."""

    def make(sb: Sandbox) -> list[str]:
        setup(sb)
        return build(sb, out=out)

    return make


def out_with(rel: str, content: str | bytes | None = None, kind: str = "file") -> Callable:
    """An owned build directory with one of its own entries replaced by something else."""

    def make(sb: Sandbox) -> list[str]:
        out = sb.owned_out()
        target = out / rel
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        if kind == "file":
            sb.write(f"out/{rel}", content)
        elif kind == "dir":
            (target / "inner").mkdir(parents=True)
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "link-out":
            sb.write("victim.txt", "a user's file outside the build\n")
            os.symlink(sb.path("victim.txt"), target)
        return build(sb)

    return make


def other_settings(**settings) -> Callable:
    """A build of other settings already holds --out."""

    def make(sb: Sandbox) -> list[str]:
        sb.owned_out(**settings)
        return build(sb)

    return make


def world_entry(name_of: Callable[[Sandbox], str], kind: str = "dir", meta: object | None = None) -> Callable:
    """An owned build whose worlds/ holds an entry this build did not make (or a tampered one)."""

    def make(sb: Sandbox) -> list[str]:
        out = sb.owned_out()
        name = name_of(sb)
        path = out / "worlds" / name
        if kind == "dir":
            path.mkdir()
            if meta is not None:
                sb.write(f"out/worlds/{name}/world.json", meta if isinstance(meta, str | bytes) else json.dumps(meta))
        elif kind == "link-out":
            sb.write("elsewhere/precious.txt", "a user's file the build must never delete")
            os.symlink(sb.path("elsewhere"), path)
        elif kind == "file":
            sb.write(f"out/worlds/{name}", "not a world")
        return build(sb)

    return make


def real_meta(sb: Sandbox, **changes) -> dict:
    """A world.json as this build would write it for world 0, with some fields changed."""
    from contracts.model import SCHEMA_VERSION
    from personas import builtin_personas
    from worldgen.build import persona_for

    persona = persona_for(0, 0, sorted(builtin_personas(), key=lambda p: p.id))
    meta = {
        "schema_version": SCHEMA_VERSION,
        "world_id": sb.world_id(0),
        "seed": 0,
        "index": 0,
        "domain": persona.domain,
        "persona_id": persona.id,
        "size": "small",
        "status": "pass",
        "audit": {"verdict": "pass", "failing": []},
        "tasks": [],
    }
    return meta | changes


def tampered(**changes) -> Callable:
    def make(sb: Sandbox) -> list[str]:
        sb.owned_out()
        sb.json(f"out/worlds/{sb.world_id(0)}/world.json", real_meta(sb, **changes))
        return build(sb)

    return make


def locked(sb: Sandbox) -> list[str]:
    """Another build holds the lock: this process, for the duration of the case."""
    out = sb.owned_out()
    fd = os.open(out / "build.lock", os.O_RDWR | os.O_CREAT)
    os.write(fd, f"{os.getpid()}\n".encode())
    fcntl.flock(fd, fcntl.LOCK_EX)
    _HELD.append(fd)
    return build(sb)


_HELD: list[int] = []


def release_locks() -> None:
    while _HELD:
        os.close(_HELD.pop())


def big_machine_skip() -> str | None:
    import psutil

    from worldgen.build import WORKER_PEAK_MIB

    large = WORKER_PEAK_MIB["large"] << 20
    return "this machine could run 256 large workers" if psutil.virtual_memory().total > 256 * large else None


def no_ray() -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("ray") else "Ray is not installed (the ray extra)"


CASES = [
    # flags
    Case("n-negative", flags("--n", "-1"), "--n must be a positive integer", installed=True),
    Case("n-zero", flags("--n", "0"), "--n must be a positive integer"),
    Case("n-huge", flags("--n", "1000000000"), "over the limit of 10,000,000", installed=True),
    Case("n-not-a-number", flags("--n", "many"), "invalid int value"),
    Case("n-float", flags("--n", "1.5"), "invalid int value"),
    Case("n-missing", lambda sb: ["build", "--out", str(sb.path("out"))], "--n"),
    Case("unknown-flag", flags("--wrokers", "2"), "unrecognized arguments", installed=True),
    Case("workers-zero", flags("--workers", "0"), "--workers must be between 1 and 256"),
    Case("workers-negative", flags("--workers", "-3"), "--workers must be between 1 and 256"),
    Case("workers-huge", flags("--workers", "100000"), "--workers must be between 1 and 256"),
    Case(
        "workers-beyond-memory",
        lambda sb: ["build", "--n", "300", "--size", "large", "--workers", "256", "--out", str(sb.path("o"))],
        "but this machine has",
        skip=big_machine_skip,
    ),
    Case("executor-unknown", flags("--executor", "dask"), "invalid choice: 'dask'"),
    Case("address-without-ray", flags("--address", "10.0.0.1:6379"), "it needs --executor ray"),
    Case("address-not-host-port", flags("--executor", "ray", "--address", "cluster"), "is not host:port", skip=no_ray),
    Case(
        "address-unreachable",
        flags("--executor", "ray", "--address", "127.0.0.1:1"),
        "cannot reach the Ray cluster at 127.0.0.1:1",
        skip=no_ray,
    ),
    Case("seed-negative", flags("--seed", "-4"), "seed must be an integer"),
    Case("seed-huge", flags("--seed", str(2**64)), "seed must be an integer"),
    Case("size-unknown", flags("--size", "huge"), "--size 'huge'"),
    Case("size-typo", flags("--size", "smal"), "did you mean 'small'"),
    Case("defect-scale-negative", flags("--defect-scale", "-1"), "--defect-scale must be in [0, 5]"),
    Case("defect-scale-nan", flags("--defect-scale", "nan"), "--defect-scale must be in [0, 5]"),
    Case("defect-scale-inf", flags("--defect-scale", "inf"), "--defect-scale must be in [0, 5]"),
    Case("defect-scale-too-big", flags("--defect-scale", "6"), "--defect-scale must be in [0, 5]"),
    Case("domain-unknown", flags("--domains", "astrology"), "unknown domain 'astrology'"),
    Case("domain-typo", flags("--domains", "food_delivry"), "did you mean 'food_delivery'", installed=True),
    # persona files
    Case("personas-missing", personas_at("/nonexistent/p.jsonl"), "cannot read persona file"),
    Case("personas-directory", personas_at("dir"), "is a directory"),
    Case("personas-fifo", personas_at("fifo"), "FIFO", installed=True),
    Case("personas-link-to-fifo", personas_at("link-to-fifo"), "FIFO"),
    Case("personas-dev-zero", personas_at("/dev/zero"), "character device"),
    Case("personas-huge", personas_at("huge"), "over the 16.0 MiB limit"),
    Case("personas-empty", personas([]), "no persona records"),
    Case("personas-not-json", personas(["{not json"]), "record 1: not valid JSON"),
    Case("personas-not-utf8", personas(b'{"id": "\xff\xfe"}\n'), "not UTF-8"),
    Case("personas-deeply-nested", personas(["[" * 5000 + "]" * 5000]), "nested 5000 levels deep"),
    Case("personas-nested-in-field", personas([persona(role={"a": [[[[[]]]]]})]), "field 'role'"),
    Case("personas-lone-surrogate", personas([persona(role="\\ud800 manager").replace("\\\\", "\\")]), "surrogate"),
    Case("personas-array-record", personas(["[1, 2, 3]"]), "expected a JSON object, got list"),
    Case("personas-missing-concern", personas([persona(concern=None)]), "record 1: field 'concern'"),
    Case("personas-blank-role", personas([persona(role="   ")]), "field 'role' must be a non-empty string"),
    Case("personas-number-role", personas([persona(role=5)]), "field 'role' must be a non-empty string"),
    Case("personas-unknown-domain", personas([persona(domain="food_delivry")]), "did you mean 'food_delivery'"),
    Case("personas-unknown-focus", personas([persona(focus="moonphase")]), "field 'focus': unknown variable"),
    Case("personas-duplicate-id", personas([persona(), persona()]), "duplicate persona id"),
    Case("personas-long-field", personas([persona(concern="x" * 5000)]), "longer than 2000 characters"),
    Case("personas-long-record", personas([persona(extra="y" * 20_000)]), "longer than 16384 characters"),
    Case(
        "personas-outside-domains",
        lambda sb: personas([persona()])(sb) + ["--domains", "energy"],
        "no persona belongs to the domains energy",
    ),
    # the output directory
    Case("out-is-a-file", out_at(lambda sb: sb.write("f", "data"), "f"), "not a directory"),
    Case("out-under-a-file", out_at(lambda sb: sb.write("f", "x"), "f/out"), "cannot write to --out", installed=True),
    Case("out-is-a-fifo", out_at(lambda sb: sb.fifo("p"), "p"), "FIFO"),
    Case("out-foreign-build-layout", foreign_out, "is not a worldgen build (no build.json)", installed=True),
    Case(
        "out-foreign-single-file", out_at(lambda sb: sb.write("out/thesis.tex", "years"), "out"), "not a worldgen build"
    ),
    Case(
        "out-placeholder-with-content", out_at(lambda sb: sb.write("out/.keep", "notes"), "out"), "not a worldgen build"
    ),
    Case("build-json-a-list", out_with("build.json", "[1, 2]"), "not a worldgen build record"),
    Case("build-json-a-directory", out_with("build.json", kind="dir"), "is a directory"),
    Case("build-json-a-fifo", out_with("build.json", kind="fifo"), "FIFO"),
    Case("build-json-a-link", out_with("build.json", kind="link-out"), "symbolic link"),
    Case("build-json-not-json", out_with("build.json", "{seed: 0"), "not valid JSON"),
    Case("build-json-deep", out_with("build.json", "[" * 20_000 + "]" * 20_000), "nested 20000 levels deep"),
    Case("build-json-not-utf8", out_with("build.json", b"\xc3\x28"), "not UTF-8"),
    Case("build-json-huge", out_at(lambda sb: sb.owned_out() and sb.sparse("out/build.json", 1 << 20), "out"), "limit"),
    Case("build-json-foreign-format", out_with("build.json", '{"format": "other-tool"}'), "format 'other-tool'"),
    Case(
        "build-json-no-marker",
        out_with("build.json", '{"seed": 0, "size": "small", "notes": "mine"}'),
        "no 'format' marker",
    ),
    Case(
        "build-json-future-version",
        out_with("build.json", '{"format": "worldgen-build", "format_version": 99}'),
        "build format version 99",
    ),
    Case("other-seed", other_settings(seed=1), "holds a build with different seed", installed=True),
    Case("other-size", other_settings(size="default"), "holds a build with different size"),
    Case("other-defect-scale", other_settings(defect_scale=0.5), "holds a build with different defect_scale"),
    Case("other-domains", other_settings(domains=("energy",)), "different domains, personas_sha256"),
    Case("manifest-corrupt", out_with("manifest.jsonl", '{"index": 0}\n{not json\n'), "line 2: not valid JSON"),
    Case("manifest-not-an-entry", out_with("manifest.jsonl", '{"index": 0}\n[1]\n'), "line 2 is not a manifest entry"),
    Case("manifest-bool-index", out_with("manifest.jsonl", '{"index": true}\n'), "line 1 is not a manifest entry"),
    Case("manifest-a-directory", out_with("manifest.jsonl", kind="dir"), "is a directory"),
    Case("manifest-a-fifo", out_with("manifest.jsonl", kind="fifo"), "FIFO"),
    Case("manifest-a-link", out_with("manifest.jsonl", kind="link-out"), "symbolic link"),
    Case("manifest-not-utf8", out_with("manifest.jsonl", b'{"index": 0, "x": "\xff"}\n'), "not UTF-8"),
    Case("manifest-deep", out_with("manifest.jsonl", "[" * 10_000 + "]" * 10_000 + "\n"), "nested 10000 levels"),
    Case("manifest-long-line", out_with("manifest.jsonl", '{"index": 0, "x": "' + "z" * 70_000 + '"}\n'), "longer"),
    Case("timings-a-directory", out_with("timings.jsonl", kind="dir"), "is a directory"),
    Case("timings-a-link", out_with("timings.jsonl", kind="link-out"), "symbolic link"),
    Case("lock-a-directory", out_with("build.lock", kind="dir"), "is a directory"),
    Case("lock-a-fifo", out_with("build.lock", kind="fifo"), "FIFO"),
    Case("lock-held-by-another-build", locked, f"being built by another worldgen build (pid {os.getpid()})"),
    Case("worlds-a-file", out_with("worlds", "not a folder"), "not the dir worldgen writes"),
    Case("worlds-a-link", out_with("worlds", kind="link-out"), "symbolic link"),
    Case("foreign-world", world_entry(lambda sb: "x", meta={"index": 0}), "'x' was not made by this build"),
    Case("foreign-tmp", world_entry(lambda sb: ".tmp-x"), "'.tmp-x' was not made by this build"),
    Case("other-seeds-world", world_entry(lambda sb: sb.world_id(0, seed=1)), "was not made by this build"),
    Case("wrong-domain-for-index", world_entry(lambda sb: "energy-s0-00000"), "was not made by this build"),
    Case("stray-file-in-worlds", world_entry(lambda sb: "notes.txt", kind="file"), "was not made by this build"),
    Case(
        "world-link-out",
        world_entry(lambda sb: sb.world_id(0), kind="link-out"),
        "a symbolic link was not made by this build",
    ),
    Case(
        "tmp-link-out",  # deleting through this link would destroy the user's files: refuse, delete nothing
        world_entry(lambda sb: ".tmp-" + sb.world_id(0), kind="link-out"),
        "a symbolic link was not made by this build",
        installed=True,
    ),
    Case("world-without-world-json", world_entry(lambda sb: sb.world_id(0)), "cannot read world manifest"),
    Case(
        "world-json-deep",
        world_entry(lambda sb: sb.world_id(0), meta="[" * 5000 + "]" * 5000),
        "nested 5000 levels deep",
    ),
    Case("world-json-a-list", world_entry(lambda sb: sb.world_id(0), meta=[1]), "not a JSON object"),
    Case("world-json-other-persona", tampered(persona_id="someone-else"), "persona_id is 'someone-else'"),
    Case("world-json-schema-9.9", tampered(schema_version="9.9"), "schema_version is '9.9'"),
    Case("world-json-other-size", tampered(size="large"), "size is 'large'"),
    Case("world-json-index-mismatch", tampered(index=3), "index is 3"),
    Case("world-json-unfinished", tampered(status="built"), "status is 'built'"),
    Case(
        "world-json-verdict-disagrees",
        tampered(audit={"verdict": "fail", "failing": ["edges"]}),
        "recorded audit verdict disagrees with its status",
    ),
    Case("world-json-tasks-not-a-list", tampered(tasks=3), "tasks is not a list"),
]

"""`worldgen show` and `worldgen eval --html` without a browser: what the pages hold, the same bytes every time,
and a card never reaching what an analyst receives. (tests/test_show_browser.py opens them in Chromium.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from contracts.errors import InputError
from contracts.model import load_contract, structural_edges
from rubrics.baselines import shuffled_answers
from rubrics.grade import grade, load_task
from worldgen.export import ExportError
from worldgen.export.bench import BenchConfig, export_bench
from worldgen.export.pool import PoolConfig, export_pool
from worldgen.show import show_build, show_world
from worldgen.show.dag import wrap
from worldgen.show.marker import HTML_MARKER, PNG_SIGNATURE, is_show_output
from worldgen.show.output import check_out_file, mark_png

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))
SVG = "{http://www.w3.org/2000/svg}"


def dag_svg(html: str) -> ET.Element:
    """The DAG's SVG element of a card (the SVG parts of our pages are well-formed XML)."""
    match = re.search(r'<svg xmlns="http://www.w3.org/2000/svg" class="dag".*?</svg>', html, re.S)
    assert match, "no DAG in the card"
    return ET.fromstring(match.group(0))


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def make_runs(build: Path, runs: Path) -> Path:
    """A runs directory as `worldgen run` writes it: every task of the build graded, half of them answered with
    the reference answer and half with another world's expected answer (so negative items trigger)."""
    tasks = {}
    for world in sorted((build / "worlds").iterdir()):
        tasks[world.name] = [load_task(p) for p in sorted((world / "tasks").glob("*.json"))]
    wrong = shuffled_answers(tasks)
    domains = {w: json.loads((build / "worlds" / w / "world.json").read_text())["domain"] for w in tasks}
    for k, (world, task) in enumerate((w, t) for w, ts in sorted(tasks.items()) for t in ts):
        answer = task.reference_answer if k % 2 == 0 else wrong[task.task_id]
        graded = grade(task, answer)
        result = {"status": "done", "agent": "reference", "domain": domains[world], "kind": task.kind, "steps": 1}
        result |= {"end_reason": "answer", "world_id": world} | graded
        (runs / task.task_id).mkdir(parents=True)
        (runs / task.task_id / "result.json").write_text(json.dumps(result, indent=1))
    return runs


def tiny_png() -> bytes:
    """A valid 1x1 grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b"")


def run(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([WORLDGEN, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def test_each_card_draws_one_node_per_variable_and_every_edge(world_dirs, tmp_path):
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        show_world(world, tmp_path / f"{world.name}.html")
        html = (tmp_path / f"{world.name}.html").read_text()
        svg = dag_svg(html)
        nodes = [g for g in svg.iter(f"{SVG}g") if "node" in classes(g)]
        assert sorted(g.get("data-variable") for g in nodes) == sorted(v.name for v in contract.variables), world.name
        drawn = {g.get("data-edge") for g in svg.iter(f"{SVG}g") if "edge" in classes(g)}
        causal = {f"{e.parent}->{e.child}" for e in contract.edges}
        structural = {f"{p}->{c}" for p, c in structural_edges(contract.variables)}
        assert drawn == causal | structural, world.name
        labels = [t.text for t in svg.iter(f"{SVG}text") if "elabel" in classes(t)]
        assert len(labels) == len(contract.edges), "one label per causal edge"
        for e in contract.edges:  # mechanism on every label; the planted value unless the edge is unidentified
            assert any(label.startswith(f"{e.kind} ") for label in labels)
        tasks = [json.loads(p.read_text()) for p in sorted((world / "tasks").glob("*.json"))]
        tagged = {g.get("data-variable") for g in nodes if "task" in classes(g)}
        assert {t["variable"] for t in tasks} <= tagged, "every task variable is marked"
        for section in ("Persona and question", "Systems and files", "Defects", "Timeline", "Phenomena", "Audit"):
            assert section in html
        assert contract.persona.concern.replace("'", "&#39;") in html
        assert html.count('class="badge pass"') + html.count('class="badge fail"') >= 7, "a verdict per check"


def test_the_dag_nodes_never_overlap_and_stay_in_their_layer_column(world_dirs, tmp_path):
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        show_world(world, tmp_path / "card.html")
        svg = dag_svg((tmp_path / "card.html").read_text())
        boxes = {}
        for g in svg.iter(f"{SVG}g"):
            if "node" in classes(g):
                r = g.find(f"{SVG}rect")
                x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
                boxes[g.get("data-variable")] = (x, y, x + w, y + h)
        names = sorted(boxes)
        for i, a in enumerate(names):
            for b in names[:i]:
                (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes[a], boxes[b]
                assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, f"{world.name}: {a} overlaps {b}"
        lefts = {}
        for v in contract.variables:
            lefts.setdefault(v.layer, []).append(boxes[v.name][0])
        columns = [(min(xs), max(xs)) for _, xs in sorted(lefts.items())]
        assert all(prev[1] < nxt[0] for prev, nxt in zip(columns, columns[1:], strict=False)), "one column per layer"


def test_long_names_wrap_at_an_underscore_near_the_middle():
    assert wrap("rating") == ("rating",)
    assert wrap("soil_organic_matter_pct") == ("soil_organic", "matter_pct")
    assert wrap("averylongnamewithoutanyunderscore") == ("averylongnamewithoutanyunderscore",)


def test_pages_are_self_contained(world_dirs, small_build, tmp_path):
    runs = make_runs(small_build, tmp_path / "runs")
    assert run("eval", str(runs), "--html", str(tmp_path / "eval.html")).returncode == 0
    show_build(small_build, tmp_path / "site")
    pages = sorted((tmp_path / "site").rglob("*.html")) + [tmp_path / "eval.html"]
    assert len(pages) == len(world_dirs) + 2
    for page in pages:
        html = page.read_text()
        assert html.startswith("<!DOCTYPE html>") and HTML_MARKER in html[:400], page
        assert "default-src 'none'" in html
        assert "<script" not in html and " src=" not in html and "@import" not in html
        external = set(re.findall(r"(?:https?:)?//[^\s\"'<>)]+", html)) - {"http://www.w3.org/2000/svg"}
        assert not external, (page.name, sorted(external)[:3])
        assert not re.findall(r"url\((?!#)", html), "no CSS url() but SVG markers"
    index = (tmp_path / "site" / "index.html").read_text()
    links = re.findall(r'href="(worlds/[^"]+)"', index)
    assert len(links) == len(world_dirs) and all((tmp_path / "site" / link).is_file() for link in links)


def test_the_same_inputs_give_the_same_bytes_in_any_process(small_build, world_dirs, tmp_path):
    runs = make_runs(small_build, tmp_path / "runs")
    outputs = []
    for k, hashseed in enumerate(("1", "2")):  # another hash seed: no dict or set order may leak into a page
        env = dict(os.environ, PYTHONHASHSEED=hashseed)
        out = tmp_path / f"try{k}"
        assert run("show", str(small_build), "--out", str(out / "site"), env=env).returncode == 0
        assert run("show", str(world_dirs[0]), "--out", str(out / "card.html"), env=env).returncode == 0
        assert run("eval", str(runs), "--html", str(out / "eval.html"), env=env).returncode == 0
        outputs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outputs[0].keys() == outputs[1].keys() and len(outputs[0]) == len(world_dirs) + 4
    assert outputs[0] == outputs[1]
    again = run("show", str(small_build), "--out", str(tmp_path / "try0" / "site"))  # our own site is replaced
    assert (
        again.returncode == 0
        and (tmp_path / "try0" / "site" / "index.html").read_bytes() == outputs[0]["site/index.html"]
    )
    assert outputs[0]["card.html"] == outputs[0][f"site/worlds/{world_dirs[0].name}.html"].replace(
        b'  <p class="small"><a href="../index.html">\xe2\x86\x90 build overview</a></p>\n', b""
    ), "a card is the same page alone or in its build's site (but for the link back)"


def test_a_card_never_reaches_an_export(small_build, tmp_path):
    build = tmp_path / "build"
    shutil.copytree(small_build, build, symlinks=True)
    shown = run("show", str(build))  # the default: BUILD/show, beside the worlds
    assert shown.returncode == 0 and (build / "show" / "index.html").is_file()
    export_bench(BenchConfig(build, tmp_path / "bench", worlds=2))
    export_pool(PoolConfig(build, tmp_path / "pool", "jsonl"))
    for root in (tmp_path / "bench", tmp_path / "pool"):
        for path in root.rglob("*"):
            if path.is_file():
                assert not is_show_output(path.read_bytes()[:4096]), path
                assert b"worldgen show" not in path.read_bytes(), path
    # Refused where it would travel with the data: inside a world, and inside an export.
    world = next(p for p in sorted((build / "worlds").iterdir()) if p.is_dir())
    for out in (world / "observed" / "card.html", world / "card.html", tmp_path / "bench" / "card.html"):
        refused = run("show", str(world), "--out", str(out))
        assert refused.returncode == 2 and "must stay out of what analysts receive" in refused.stderr
        assert not out.exists()
    # Even a card put there by hand stops the export, and the check of an exported bench finds a screenshot.
    worlds = [p for p in sorted((build / "worlds").iterdir()) if p.is_dir()]
    for w in worlds:
        shutil.copyfile(build / "show" / "worlds" / f"{world.name}.html", w / "observed" / "zz_notes.html")
    with pytest.raises(ExportError, match="worldgen show page"):
        export_bench(BenchConfig(build, tmp_path / "bench2", worlds=1))
    with pytest.raises(ExportError, match="worldgen show page"):
        export_pool(PoolConfig(build, tmp_path / "pool2", "jsonl"))
    assert not (tmp_path / "bench2").exists() and not (tmp_path / "pool2").exists()
    task_dir = next(p for p in sorted((tmp_path / "bench").iterdir()) if (p / "environment").is_dir())
    (task_dir / "environment" / "data" / "card.png").write_bytes(mark_png(tiny_png()))
    checked = run("export", "check", str(tmp_path / "bench"))
    assert checked.returncode == 1 and "worldgen show page or screenshot" in checked.stdout


def test_the_eval_page_shows_the_eval_numbers(small_build, tmp_path):
    runs = make_runs(small_build, tmp_path / "runs")
    report = json.loads(run("eval", str(runs), "--json").stdout)
    result = run("eval", str(runs), "--html", str(tmp_path / "report.html"))
    assert result.returncode == 0 and "wrote the report page" in result.stdout
    html = (tmp_path / "report.html").read_text()
    for kind, group in report["by_kind"].items():
        low, high = group["ci95"]
        assert low <= group["mean"] <= high
        assert f"{kind}: " in html
    assert html.count('class="dot"') == 3 + len(report["by_kind"]) + len(report["domain_offsets"])
    assert sum(report["negatives_triggered"].values()) == report["episodes"] == html.count('<tr><td class="mono">')
    assert "Negative items by type" in html


def test_bad_html_output_for_eval_is_refused_before_any_work(small_build, tmp_path):
    runs = make_runs(small_build, tmp_path / "runs")
    (tmp_path / "notes.html").write_text("mine")
    refused = run("eval", str(runs), "--html", str(tmp_path / "notes.html"))
    assert refused.returncode == 2 and refused.stdout == "" and len(refused.stderr.splitlines()) == 1
    assert (tmp_path / "notes.html").read_text() == "mine"


def test_only_our_own_pages_and_screenshots_are_overwritten(tmp_path):
    ours = tmp_path / "card.png"
    ours.write_bytes(mark_png(tiny_png()))
    check_out_file(ours, "--png")  # ours: may be replaced
    theirs = tmp_path / "photo.png"
    theirs.write_bytes(tiny_png())
    with pytest.raises(InputError, match="not written by worldgen show"):
        check_out_file(theirs, "--png")
    page = tmp_path / "page.html"
    page.write_text(f"<!DOCTYPE html><html><head>{HTML_MARKER}</head></html>")
    check_out_file(page, "--out")
    page.write_text("<!DOCTYPE html><html><head><title>mine</title></head></html>")
    with pytest.raises(InputError, match="not written by worldgen show"):
        check_out_file(page, "--out")


def test_png_without_a_browser_is_one_line_and_writes_nothing(world_dirs, tmp_path, monkeypatch, capsys):
    from worldgen.cli import main

    monkeypatch.setenv("WORLDGEN_CHROMIUM", str(tmp_path / "no-such-browser"))
    code = main(["show", str(world_dirs[0]), "--out", str(tmp_path / "c.html"), "--png", str(tmp_path / "c.png")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "--png needs Chromium or Chrome" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []

"""The pages as a person sees them: every card, the build overview and the eval report opened in headless
Chromium (selenium + chromedriver), screenshotted, with no console error, no request leaving the page's own
file, one DAG node per contract variable, no two nodes overlapping and every name inside its box.

Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); skipped, saying so, without them.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from contracts.model import load_contract
from tests.test_show import WORLDGEN, make_runs
from worldgen.evaluate import evaluate, load_results
from worldgen.show import show_build, write_eval_page
from worldgen.show.browser import find_browser
from worldgen.show.marker import PNG_TEXT

BROWSER, DRIVER = find_browser(), shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
pytestmark = pytest.mark.skipif(
    BROWSER is None or DRIVER is None,
    reason="needs headless Chromium and chromedriver (Debian: apt-get install -y chromium chromium-driver; .ci/run does)",
)
WIDTH = 1280
LOCAL = ("file:", "data:", "about:")


@pytest.fixture(scope="module")
def driver():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for arg in ("--headless=new", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},900"):
        options.add_argument(arg)
    options.add_argument("--disable-dev-shm-usage")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium will not sandbox itself as root (containers, CI)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    chrome = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield chrome
    chrome.quit()


@pytest.fixture(scope="module")
def pages(small_build, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pages")
    show_build(small_build, root / "site")
    runs = make_runs(small_build, root / "runs")
    results, errors = load_results(runs)
    write_eval_page(evaluate(results, errors), results, runs, root / "eval.html")
    found = {"index": root / "site" / "index.html", "eval": root / "eval.html"}
    found |= {p.stem: p for p in sorted((root / "site" / "worlds").glob("*.html"))}
    return found


def visit(chrome, page: Path, shots: Path) -> tuple[list[str], list[str], bytes]:
    """Open a page; its console errors, the URLs it requested beyond local files, and a full-page PNG."""
    chrome.get_log("browser"), chrome.get_log("performance")  # drop what earlier pages left
    chrome.get(page.as_uri())
    assert chrome.execute_script("return document.readyState") == "complete"
    errors = [e["message"] for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    requests = []
    for entry in chrome.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append(message["params"]["request"]["url"])
    assert any(url == page.as_uri() for url in requests), "the network log sees the page's own load"
    height = chrome.execute_script("return document.documentElement.scrollHeight")
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": height, "scale": 1}
    shot = chrome.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "optimizeForSpeed": True, "captureBeyondViewport": True, "clip": clip},
    )
    png = __import__("base64").b64decode(shot["data"])
    (shots / f"{page.stem}.png").write_bytes(png)
    return errors, [u for u in requests if not u.startswith(LOCAL)], png


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


def distinct_bytes(png: bytes) -> int:
    """How many different byte values the decoded image data holds: a blank page has a handful."""
    data, pos = b"", 8
    while pos < len(png):
        length, kind = struct.unpack(">I", png[pos : pos + 4])[0], png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            data += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(data)))


def test_every_page_loads_clean_and_looks_like_something(driver, pages, small_build, tmp_path):
    assert len(pages) >= 4
    for name, page in pages.items():
        errors, external, png = visit(driver, page, tmp_path)
        assert not errors, f"{name}: console errors {errors[:3]}"
        assert not external, f"{name}: requests beyond the page {external[:3]}"
        width, height = png_size(png)
        assert width == WIDTH and height > 600, (name, width, height)
        assert distinct_bytes(png) > 50, f"{name}: the screenshot is blank"


def test_each_card_shows_one_node_per_variable_every_name_inside_its_box(driver, pages, small_build):
    script = """
    const svg = document.querySelector('svg.dag').getBoundingClientRect();
    return [...document.querySelectorAll('svg.dag g.node')].map(g => {
      const r = g.querySelector('rect'), box = r.getBoundingClientRect();
      const texts = [...g.querySelectorAll('text')].map(t => t.getBBox().width);
      return {name: g.dataset.variable, box: [box.left, box.top, box.right, box.bottom],
              inside: box.left >= svg.left - 1 && box.right <= svg.right + 1 && box.bottom <= svg.bottom + 1,
              widest: Math.max(...texts), width: r.getBBox().width};
    });"""
    for world in sorted((small_build / "worlds").iterdir()):
        contract = load_contract(world / "contract.json")
        driver.get(pages[world.name].as_uri())
        nodes = driver.execute_script(script)
        assert sorted(n["name"] for n in nodes) == sorted(v.name for v in contract.variables), world.name
        for n in nodes:
            assert n["inside"], f"{world.name}: {n['name']} is drawn outside the figure"
            assert n["widest"] <= n["width"], f"{world.name}: {n['name']}'s text overflows its box"
        for i, a in enumerate(nodes):
            for b in nodes[:i]:
                (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = a["box"], b["box"]
                assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, f"{a['name']} overlaps {b['name']}"


def test_the_checks_catch_a_page_that_reaches_out(driver, pages, tmp_path):
    """The console and network checks are not vacuous: a page asking for a remote image is caught."""
    card = pages[next(k for k in pages if k not in ("index", "eval"))].read_text()
    beacon = '<img alt="" src="http://127.0.0.1:9/pixel.png">'  # a closed local port: no traffic leaves
    with_csp = tmp_path / "with_csp.html"
    with_csp.write_text(card.replace("</main>", beacon + "</main>"))
    errors, _, _ = visit(driver, with_csp, tmp_path)
    assert any("Content Security Policy" in e for e in errors), errors
    without = tmp_path / "without_csp.html"
    start = card.index('<meta http-equiv="Content-Security-Policy"')
    stripped = card[:start] + card[card.index(">", start) + 1 :]
    without.write_text(stripped.replace("</main>", beacon + "</main>"))
    _, external, _ = visit(driver, without, tmp_path)
    assert external == ["http://127.0.0.1:9/pixel.png"], external


def test_the_png_option_writes_a_marked_screenshot(small_build, tmp_path):
    world = sorted(p for p in (small_build / "worlds").iterdir() if p.is_dir())[0]
    out, png = tmp_path / "card.html", tmp_path / "card.png"
    done = subprocess.run(
        [WORLDGEN, "show", str(world), "--out", str(out), "--png", str(png), "--png-height", "900"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = png.read_bytes()
    assert png_size(data) == (WIDTH, 900) and PNG_TEXT in data[:200] and distinct_bytes(data) > 50

"""`python -m worldgen.packcheck`, the tool pack authors run, accepts good packs and names what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from worldgen.packs import _domains_folder

PERSONAS = Path(__file__).resolve().parents[1] / "personas" / "library"


def packcheck(*args: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "worldgen.packcheck", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_shipped_pack_and_its_personas_pass():
    result = packcheck(_domains_folder() / "food_delivery.yaml", PERSONAS / "food_delivery.jsonl")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok ") == 2 and "FAIL" not in result.stdout


def test_broken_pack_fails_with_every_problem_named(tmp_path):
    raw = yaml.safe_load((_domains_folder() / "food_delivery.yaml").read_text())
    raw["variables"][0]["system"] = "crn"
    raw["edges"].append({"parent": "rating", "child": "menu_price", "kinds": ["monotone"]})
    raw["edges"].append({"parent": "rain_mm", "child": "daily_orders", "kinds": ["wobble"]})
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = packcheck(path)
    assert result.returncode == 1
    assert "FAIL" in result.stdout and "unknown system 'crn'" in result.stdout
    assert "policy variables are set by management" in result.stdout and "unknown mechanism 'wobble'" in result.stdout


def test_persona_with_a_focus_the_pack_lacks_fails(tmp_path):
    personas = tmp_path / "p.jsonl"
    personas.write_text(
        '{"id": "x-1", "domain": "food_delivery", "role": "r", "organisation": "o", "region": "g", '
        '"concern": "c", "focus": "weather"}\n'
    )
    result = packcheck(_domains_folder() / "food_delivery.yaml", personas)
    assert result.returncode == 1 and "unknown variable 'weather'" in result.stdout

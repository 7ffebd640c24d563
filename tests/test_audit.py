"""The auditor passes sound worlds and catches every planted corruption, for the right reason."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from auditors import audit_world
from contracts.model import load_contract
from personas import builtin_personas
from worldgen.build import persona_for
from worldgen.contract import WorldSpec
from worldgen.observe import DefectSettings
from worldgen.packs import get_pack
from worldgen.pipeline import build_world

WORLDGEN = str(Path(sys.executable).with_name("worldgen"))


@pytest.fixture(scope="module")
def sound_world(small_build) -> Path:
    """The first world of the shared small build that passes its own audit."""
    passing = [json.loads(line) for line in (small_build / "manifest.jsonl").read_text().splitlines()]
    passing = [m for m in passing if m["status"] == "pass"]
    assert len(passing) >= 4, "most small worlds must pass their audit"
    return small_build / passing[0]["path"]


def _copy(world: Path, tmp: Path) -> Path:
    target = tmp / world.name
    shutil.copytree(world, target)
    (target / "audit.json").unlink()
    return target


def _rewrite_parquet(path: Path, change) -> None:
    change(pl.read_parquet(path)).write_parquet(path)


def permute_edge_child(world: Path) -> None:
    contract = load_contract(world / "contract.json")
    edge = next(
        e
        for e in contract.edges
        if any(v.name == e.child and v.grain == "panel" and v.role is None for v in contract.variables)
    )
    rng = np.random.default_rng(0)
    _rewrite_parquet(
        world / "canonical" / "panel.parquet",
        lambda df: df.with_columns(pl.Series(edge.child, rng.permutation(df[edge.child].to_numpy()))),
    )


def delete_observed(world: Path) -> None:
    next((world / "observed").glob("*.csv")).unlink()


def truncate_observed(world: Path) -> None:
    path = next((world / "observed").glob("*.csv"))
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[: len(lines) // 2]) + "\n")


def edit_canonical_value(world: Path) -> None:
    _rewrite_parquet(world / "canonical" / "parties.parquet", lambda df: df.with_columns(pl.col("signup_day") + 1))


def break_foreign_key(world: Path) -> None:
    _rewrite_parquet(
        world / "canonical" / "events.parquet",
        lambda df: df.with_columns(
            pl.when(pl.int_range(pl.len()) == 0).then(99_999).otherwise(pl.col("unit_id")).alias("unit_id")
        ),
    )


def unrecorded_unit_drift(world: Path) -> None:
    """A value column of a daily file silently switches to a unit 100x smaller half-way through."""
    contract = load_contract(world / "contract.json")
    d = next(d for d in contract.deliverables if d.grain == "panel")
    column = next(c.name for c in d.columns if c.source.split(".")[1] in {v.name for v in contract.variables})
    path = world / "observed" / d.file
    read, write = {
        "csv": (pl.read_csv, lambda df: df.write_csv(path)),
        "parquet": (pl.read_parquet, lambda df: df.write_parquet(path)),
        "jsonl": (pl.read_ndjson, lambda df: df.write_ndjson(path)),
        "json": (
            lambda p: pl.DataFrame(json.loads(p.read_text())["records"]),
            lambda df: path.write_text(json.dumps({"records": df.to_dicts()})),
        ),
    }[d.format]
    df = read(path)
    late = pl.int_range(pl.len()) > pl.len() // 2
    write(df.with_columns(pl.when(late).then(pl.col(column) * 100).otherwise(pl.col(column)).alias(column)))


def change_a_target(world: Path) -> None:
    raw = json.loads((world / "contract.json").read_text())
    ph = next(p for p in raw["phenomena"] if p["kind"] == "edge_effect")
    ph["target"] = ph["target"] + 10 * ph["tolerance"]
    (world / "contract.json").write_text(json.dumps(raw, indent=2))


def record_a_defect_never_applied(world: Path) -> None:
    """projection.json claims a cell was blanked that the file still holds."""
    record = json.loads((world / "projection.json").read_text())
    for f in record["files"]:
        for defect in f["defects"]:
            if defect["kind"] == "missing":
                row = next(r for r in range(10_000) if r not in set(defect["rows"]))
                defect["rows"].append(row)
                defect["values"].append(0.0)
                (world / "projection.json").write_text(json.dumps(record))
                return
    raise AssertionError("no missing-value defect to tamper with")


def inflate_a_tolerance(world: Path) -> None:
    """A tolerance so wide that 'no effect at all' would count as recovering the effect."""
    raw = json.loads((world / "contract.json").read_text())
    ph = next(p for p in raw["phenomena"] if p["kind"] == "edge_effect")
    ph["tolerance"] = abs(ph["target"]) * 1e6 + 1e6
    (world / "contract.json").write_text(json.dumps(raw, indent=2))


MUTATIONS = {
    "tolerance-inflated": (inflate_a_tolerance, "contract"),
    "defect-recorded-but-not-applied": (record_a_defect_never_applied, "projection"),
    "edge-child-permuted-in-X": (permute_edge_child, "edges"),
    "observed-file-deleted": (delete_observed, "projection"),
    "observed-file-truncated": (truncate_observed, "projection"),
    "canonical-file-edited": (edit_canonical_value, "ledger"),
    "foreign-key-broken": (break_foreign_key, "invariants"),
    "unrecorded-unit-drift": (unrecorded_unit_drift, "projection"),
    "phenomenon-target-changed": (change_a_target, "recoverability"),
}


def test_sound_world_passes_every_check(sound_world):
    report = audit_world(sound_world, write=False)
    assert report.verdict == "pass", report.failing
    assert [c.name for c in report.checks] == [
        "contract",
        "ledger",
        "invariants",
        "edges",
        "projection",
        "recoverability",
        "non_triviality",
    ]


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutation_flips_the_verdict_for_the_right_reason(sound_world, tmp_path, mutation):
    corrupt, expected_check = MUTATIONS[mutation]
    world = _copy(sound_world, tmp_path)
    corrupt(world)
    report = audit_world(world)
    assert report.verdict == "fail"
    assert expected_check in report.failing, report.failing
    assert json.loads((world / "audit.json").read_text())["verdict"] == "fail"


def test_a_defect_too_heavy_to_clean_fails_recoverability_only(tmp_path):
    persona = persona_for(0, 0, builtin_personas())
    heavy = DefectSettings(missing_rate=0.97)  # recorded, so the projection still undoes exactly
    result = build_world(WorldSpec(0, 0, "small", persona), get_pack(persona.domain), tmp_path, heavy)
    report = json.loads((result.path / "audit.json").read_text())
    status = {c["name"]: c["status"] for c in report["checks"]}  # the file on disk, as users read it
    assert report["verdict"] == "fail" and status["recoverability"] == "fail"
    assert status["projection"] == "pass" and status["ledger"] == "pass"


def test_audit_command_exit_codes(sound_world, tmp_path):
    ok = subprocess.run([WORLDGEN, "audit", str(sound_world)], capture_output=True, text=True)
    assert ok.returncode == 0 and "1/1 world(s) pass" in ok.stdout
    broken = _copy(sound_world, tmp_path)
    break_foreign_key(broken)
    bad = subprocess.run([WORLDGEN, "audit", str(sound_world), str(broken), "--json"], capture_output=True, text=True)
    assert bad.returncode == 1
    verdicts = [json.loads(line)["verdict"] for line in bad.stdout.splitlines() if line.startswith("{")]
    assert verdicts == ["pass", "fail"]
    for args in (["audit", str(tmp_path / "missing")], ["audit", str(tmp_path)]):
        result = subprocess.run([WORLDGEN, *args], capture_output=True, text=True)
        assert (
            result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        )
    (broken / "world.json").write_text("{not json")
    corrupt = subprocess.run([WORLDGEN, "audit", str(broken)], capture_output=True, text=True)
    assert corrupt.returncode == 2 and "world.json" in corrupt.stderr

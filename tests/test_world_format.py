"""A built world has the documented layout, its invariants hold in X, and its records are exact."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import polars as pl
import pytest

from contracts.audit import AuditReport
from contracts.hashing import column_sha256, file_sha256
from contracts.model import SCHEMA_VERSION, load_contract
from contracts.schema import AUDIT_SCHEMA_PATH, SCHEMA_PATH, render, render_audit
from worldgen.defects import DEFECTS, undo_all
from worldgen.observe import DAY, DefectSettings, with_day
from worldgen.phenomena import focus_variable
from worldgen.pipeline import regenerate
from worldgen.write import write_observed, write_parquet

LAYOUT = {
    "world.json",
    "contract.json",
    "ledger.jsonl",
    "projection.json",
    "audit.json",
    "canonical",
    "observed",
    "tasks",
}


def canonical_tables(world: Path) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in (world / "canonical").glob("*.parquet")}


def test_schema_file_is_current():
    assert SCHEMA_PATH.read_text() == render(), "run `python -m contracts.schema`"
    assert AUDIT_SCHEMA_PATH.read_text() == render_audit(), "run `python -m contracts.schema`"


def test_layout_manifest_and_contract_schema(small_build, world_dirs):
    manifest = [json.loads(line) for line in (small_build / "manifest.jsonl").read_text().splitlines()]
    assert [m["index"] for m in manifest] == list(range(8))
    schema = json.loads(SCHEMA_PATH.read_text())
    for world in world_dirs:
        assert LAYOUT <= {p.name for p in world.iterdir()}
        meta = json.loads((world / "world.json").read_text())
        assert meta["schema_version"] == SCHEMA_VERSION and meta["status"] in {"pass", "fail"}
        audit = json.loads((world / "audit.json").read_text())
        jsonschema.validate(audit, json.loads(AUDIT_SCHEMA_PATH.read_text()))
        assert AuditReport.model_validate(audit).verdict == audit["verdict"]
        assert audit["verdict"] == meta["status"] == next(m["status"] for m in manifest if m["world_id"] == world.name)
        for rel, digest in meta["files"].items():
            assert file_sha256(world / rel) == digest, rel
        raw = json.loads((world / "contract.json").read_text())
        jsonschema.validate(raw, schema)
        contract = load_contract(world / "contract.json")
        assert contract.sealed and all(ph.target is not None for ph in contract.phenomena)


def test_every_invariant_holds_in_canonical_state(world_dirs):
    checked = set()
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        tables = canonical_tables(world)
        for inv in contract.invariants:
            df = tables[inv.table]
            match inv.kind:
                case "unique_key":
                    cols = inv.column.split(",")
                    assert df.select(cols).is_duplicated().sum() == 0, inv.id
                case "foreign_key":
                    ref_table, ref_col = inv.references.split(".")
                    assert df[inv.column].is_in(tables[ref_table][ref_col].implode()).all(), inv.id
                case "range":
                    values = df[inv.column].drop_nulls()
                    assert inv.min is None or values.min() >= inv.min - 1e-9, inv.id
                    assert inv.max is None or values.max() <= inv.max + 1e-9, inv.id
                case "conservation":
                    counts = tables["events"].group_by(["unit_id", "day"]).len()
                    joined = df.join(counts, on=["unit_id", "day"], how="left").with_columns(pl.col("len").fill_null(0))
                    assert (joined[inv.column] == joined["len"]).all(), inv.id
            checked.add(inv.kind)
    assert checked == {"unique_key", "foreign_key", "range", "conservation"}


def test_ledger_hashes_match_canonical_files_and_layers_run_in_order(world_dirs):
    for world in world_dirs:
        tables = canonical_tables(world)
        ledger = [json.loads(line) for line in (world / "ledger.jsonl").read_text().splitlines()]
        contract = load_contract(world / "contract.json")
        assert [r["step"] for r in ledger] == list(range(len(ledger)))
        layer_steps = [r for r in ledger if r["name"].startswith("layer ")]
        assert [r["variables"] for r in layer_steps] == contract.layers
        produced: set[str] = set()
        for record in ledger[:-1]:
            assert record["checks"]["parents_unchanged"]
            assert set(record["inputs"]) <= produced, "a step read a column no earlier step produced"
            for name, digest in record["outputs"].items():
                table, column = name.split(".", 1)
                assert column_sha256(tables[table][column].to_numpy()) == digest, name
            produced |= set(record["outputs"])
        for rel, digest in ledger[-1]["outputs"].items():
            assert file_sha256(world / rel) == digest


def test_every_observed_file_reads_with_pandas_and_polars(world_dirs):
    formats = set()
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        for d in contract.deliverables:
            path = world / "observed" / d.file
            formats.add(d.format)
            if d.format == "md":  # a system's data dictionary documents every column of its files
                text = path.read_text()
                documented = [c for x in contract.deliverables if x.system == d.system for c in x.columns]
                assert documented and all(f"| {c.name} | {c.doc}" in text for c in documented), d.file
                continue
            match d.format:
                case "csv":
                    a, b = pd.read_csv(path), pl.read_csv(path, infer_schema_length=None)
                case "parquet":
                    a, b = pd.read_parquet(path), pl.read_parquet(path)
                case "jsonl":
                    a, b = pd.read_json(path, lines=True), pl.read_ndjson(path, infer_schema_length=None)
                case "json":
                    records = json.loads(path.read_text())["records"]
                    a, b = pd.DataFrame(records), pl.DataFrame(records, infer_schema_length=None)
                case "xlsx":
                    a = pd.concat(pd.read_excel(path, sheet_name=None).values())
                    b = pl.concat(pl.read_excel(path, sheet_id=0, engine="openpyxl").values(), how="vertical_relaxed")
            assert len(a) == len(b) > 0, d.file
            assert {c.name for c in d.columns} <= set(a.columns), d.file
    assert formats == {"csv", "parquet", "jsonl", "json", "xlsx", "md"}


def test_worlds_meet_the_observation_minimums(world_dirs):
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        systems = {d.system for d in contract.deliverables}
        assert 4 <= len(systems) <= 12
        assert len({d.format for d in contract.deliverables}) >= 3
        kinds = {r["kind"] for f in json.loads((world / "projection.json").read_text())["files"] for r in f["defects"]}
        assert kinds == set(DEFECTS), world.name
        assert any(len(ph.files) >= 2 for ph in contract.phenomena)


@pytest.fixture(scope="module")
def regenerated(world_dirs):
    """X and E of the first two worlds rebuilt in memory from their contract.json alone."""
    out = []
    for world in world_dirs[:2]:
        contract = load_contract(world / "contract.json")
        scale = json.loads((world / "projection.json").read_text())["settings"]["defect_scale"]
        state, files = regenerate(contract, DefectSettings(scale=scale))
        out.append((world, contract, state, files))
    return out


def test_contract_alone_regenerates_canonical_and_observed_bytes(regenerated, tmp_path):
    compared = 0
    for world, contract, state, files in regenerated:
        for table, columns in state.tables.items():
            path = tmp_path / f"{world.name}-{table}.parquet"
            write_parquet(pl.DataFrame(dict(columns), strict=False), path)
            assert file_sha256(path) == file_sha256(world / "canonical" / f"{table}.parquet"), table
            compared += 1
        for f in files:
            d = f.deliverable
            sheets_by = next((c.name for c in d.columns if c.source == "units.region"), None) if d.sheets else None
            path = tmp_path / f"{world.name}-{d.file}"
            write_observed(f.rendered(contract), path, d.format, d.system, sheets_by)
            assert file_sha256(path) == file_sha256(world / "observed" / d.file), d.file
            compared += 1
    assert compared >= 2 * (4 + 8), "every canonical table and observed file of two worlds is compared"


def test_each_defect_is_undone_exactly_by_its_recorded_entry(regenerated):
    undone_kinds = set()
    for world, _contract, _state, files in regenerated:
        record = {f["file"]: f["defects"] for f in json.loads((world / "projection.json").read_text())["files"]}
        for f in files:
            shipped = record[f.deliverable.file]  # the JSON record, not the in-memory one
            frame = with_day(f.frame, f.deliverable) if shipped else f.frame
            restored = undo_all(frame, shipped).drop(DAY, strict=False)
            assert restored.equals(f.clean), f.deliverable.file
            undone_kinds |= {r["kind"] for r in shipped}
            if shipped:
                assert not f.frame.equals(f.clean)
    assert undone_kinds == set(DEFECTS)


def test_canonical_volume_matches_events_and_focus_change_target(world_dirs):
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        tables = canonical_tables(world)
        volume = contract.volume.name
        counts = tables["events"].group_by("unit_id", "day").len()
        panel = tables["panel"].join(counts, on=["unit_id", "day"], how="left").fill_null(0)
        assert panel["len"].sum() == tables["events"].height > 0
        assert (panel[volume] == panel["len"]).all(), "the volume of every unit-day is its number of events"
        focus = focus_variable(contract)
        change = next(ph for ph in contract.phenomena if ph.id == f"change:{focus}")
        v = contract.variable(focus)
        df = tables["events" if v.grain == "event" else "panel"]
        if v.grain == "panel":  # reported values: open unit-days with a value
            df = df.filter(pl.col("open") == 1)
        if v.observe == "scale":  # survey answers: the events whose customer answered
            df = df.filter(pl.col(f"responded_{focus}") == 1)
        df = df.select("day", pl.col(focus).cast(pl.Float64)).drop_nulls().drop_nans()
        half = contract.timeline.periods // 2
        h1 = df.filter(pl.col("day") < half)[focus].mean()
        h2 = df.filter(pl.col("day") >= half)[focus].mean()
        assert np.isclose((h2 - h1) / h1, change.target, atol=1e-5)


def test_rows_are_listed_the_way_their_system_lists_them_not_in_canonical_order(regenerated):
    """A master listed in canonical id order would pin each misspelled name to its id by position alone."""
    by_name = 0
    for _world, _contract, state, files in regenerated:
        names = state.column("units", "name")
        for f in files:
            assert f.order and f.clean.equals(f.clean.sort(f.order, maintain_order=True)), f.deliverable.file
            name_column = next((c.name for c in f.deliverable.columns if c.source == "units.name"), None)
            if f.deliverable.grain != "units" or name_column is None or not f.deliverable.file:
                continue
            position = {name: i for i, name in enumerate(names)}
            ids = [position[n] for n in f.clean[name_column].to_list() if n in position]
            assert ids != sorted(ids), f"{f.deliverable.file} lists units in canonical order"
            by_name += 1
    assert by_name, "no units master compared"


def test_a_prompt_voices_the_personas_worry_only_when_the_world_moved_that_way(world_dirs):
    voiced = silenced = contrary = 0
    for world in world_dirs:
        contract = load_contract(world / "contract.json")
        persona = contract.persona
        change = next((ph.target for ph in contract.phenomena if ph.id == f"change:{persona.focus}"), None)
        contrary += persona.trend is not None and change is not None and (change > 0) != (persona.trend == "up")
        for task_file in (world / "tasks").glob("*.json"):
            prompt = json.loads(task_file.read_text())["prompt"]
            if persona.concern not in prompt:
                silenced += 1
                continue
            voiced += 1
            if persona.trend is not None:
                assert change is not None and (change > 0) == (persona.trend == "up"), task_file.name
    assert voiced and silenced, (voiced, silenced)


def test_a_worry_the_world_contradicts_is_withheld(world_dirs):
    """The persona fears the focus went one way; flip the fear in a world that moved the other way and the
    prompt must not voice it (a fixture world need not happen to be contrary: the flip makes one)."""
    from contracts.audit import AuditReport
    from worldgen.tasks import World, _intro

    world = next(
        w
        for w in world_dirs
        if load_contract(w / "contract.json").persona.trend is not None
        and any(t.name.endswith(".json") for t in (w / "tasks").iterdir())
    )
    contract = load_contract(world / "contract.json")
    report = AuditReport.model_validate_json((world / "audit.json").read_text())
    persona = contract.persona
    change = next(ph.target for ph in contract.phenomena if ph.id == f"change:{persona.focus}")
    agreeing = "up" if change > 0 else "down"
    for trend, voiced in ((agreeing, True), ("down" if agreeing == "up" else "up", False)):
        flipped = contract.model_copy(update={"persona": persona.model_copy(update={"trend": trend})})
        assert (persona.concern in _intro(World.of(flipped, report), persona.focus)) is voiced, trend

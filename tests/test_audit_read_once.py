"""The audit reads each file it hashes and parses once: the ledger check keeps the bytes it hashed for the
reader that parses the file later (worldio.read_and_keep / taken_bytes). Same digests, same frames, same
verdicts; a file beyond the limits is read twice as before; kept bytes a parser refuses are read by path."""

from __future__ import annotations

import hashlib
import json
import shutil

import polars as pl
import pytest

from auditors import audit_world, checks, worldio
from auditors.checks import check_ledger
from contracts.hashing import file_sha256

TABLES = ("units", "parties", "panel", "events")


def _copy(world_dirs, tmp_path):
    return shutil.copytree(world_dirs[0], tmp_path / "w")


def test_the_ledger_keeps_what_the_readers_read_and_each_reader_takes_it(world_dirs, tmp_path, monkeypatch):
    """After the ledger check every file read later is kept (and only those); each reader then takes its
    file's kept bytes instead of reading the file (reading is made to fail), giving the same tables."""
    root = _copy(world_dirs, tmp_path)
    plain = worldio.load_world(root)
    expected = {d.file: worldio.read_observed(plain, d) for d in plain.contract.deliverables if d.grain != "dictionary"}
    world = worldio.load_world(root)
    monkeypatch.setattr(worldio.Path, "read_bytes", lambda self: pytest.fail(f"{self} read again"))
    monkeypatch.setattr(worldio, "read_bytes", lambda *a, **k: pytest.fail("an observed file read again"))
    real = pl.read_parquet

    def from_bytes_only(source, **options):
        return real(source, **options) if isinstance(source, bytes) else pytest.fail(f"{source} read by path")

    monkeypatch.setattr(pl, "read_parquet", from_bytes_only)
    assert check_ledger(world).status == "pass"  # it reads the canonical tables: from the bytes it hashed
    later = worldio.files_read_later(world)
    assert set(world.file_bytes) == (later & set(world.meta["files"])) - set(worldio.CANONICAL_FILES)
    for rel, data in world.file_bytes.items():
        assert hashlib.sha256(data).hexdigest() == file_sha256(root / rel) == world.meta["files"][rel]
    for d in world.contract.deliverables:
        if d.grain != "dictionary" and d.format != "xlsx":
            assert worldio.read_observed(world, d).equals(expected[d.file]), d.file
    assert world.projection == json.loads((root / "projection.json").read_text())
    assert all(
        world.canonical[name].equals(real(root / rel))
        for name, rel in zip(TABLES, worldio.CANONICAL_FILES, strict=True)
    )
    assert world.file_bytes == {}  # every kept file was taken


def test_kept_bytes_are_what_is_parsed(world_dirs, tmp_path):
    """A reader parses the kept bytes, not the file (so the file is not read twice): kept bytes that differ
    from the file show in the frame."""
    root = _copy(world_dirs, tmp_path)
    world = worldio.load_world(root)
    d = next(d for d in world.contract.deliverables if d.format == "csv")
    world.file_bytes[f"observed/{d.file}"] = b"a,b\n1,x\n"
    assert worldio.read_observed(world, d).equals(pl.DataFrame({"a": [1], "b": ["x"]}))


def test_limits_keep_nothing_beyond_them(world_dirs, tmp_path, monkeypatch):
    """A file over MAX_KEPT_BYTES, or one that would take the kept total over MAX_KEPT_TOTAL, is not kept:
    hashed by streaming as before, and read again by its reader."""
    root = _copy(world_dirs, tmp_path)
    world = worldio.load_world(root)
    rel = next(r for r in worldio.files_read_later(world) if r.startswith("observed/"))
    size = (root / rel).stat().st_size
    monkeypatch.setattr(worldio, "MAX_KEPT_BYTES", size - 1)
    assert worldio.read_and_keep(world, rel) is None and world.file_bytes == {}
    monkeypatch.setattr(worldio, "MAX_KEPT_BYTES", size)
    monkeypatch.setattr(worldio, "MAX_KEPT_TOTAL", size + 10)
    world.file_bytes["other"] = b"x" * 11
    assert worldio.read_and_keep(world, rel) is None and rel not in world.file_bytes
    world.file_bytes["other"] = b"x" * 10
    assert worldio.read_and_keep(world, rel) == (root / rel).read_bytes() == world.file_bytes[rel]
    assert check_ledger(worldio.load_world(root)).status == "pass"


def test_a_parquet_file_its_bytes_do_not_read_reports_the_path_error(world_dirs, tmp_path):
    """Broken parquet bytes: the error reported is the one reading the path gives (the plain way's)."""
    root = _copy(world_dirs, tmp_path)
    (root / "canonical" / "units.parquet").write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(Exception) as by_path:
        pl.read_parquet(root / "canonical" / "units.parquet")
    world = worldio.load_world(root)
    world.file_bytes["canonical/units.parquet"] = b"PAR1 not a parquet file"
    with pytest.raises(worldio.WorldFormatError) as kept:
        _ = world.canonical
    assert type(by_path.value).__name__ in str(kept.value)
    panel = root / "canonical" / "panel.parquet"
    assert worldio.read_parquet(panel, b"junk").equals(pl.read_parquet(panel))  # read by path instead


def test_corrupted_files_fail_the_audit_as_before(world_dirs, tmp_path, monkeypatch):
    """A changed byte in an observed file or in projection.json: the hashes (from the kept bytes) no longer
    match, and the report is the one of a world whose files are read twice (keeping disabled)."""
    root = _copy(world_dirs, tmp_path)
    world = worldio.load_world(root)
    rel = next(r for r in sorted(worldio.files_read_later(world)) if r.endswith(".csv") or r.endswith(".jsonl"))
    data = bytearray((root / rel).read_bytes())
    data[len(data) // 2] ^= 1
    (root / rel).write_bytes(bytes(data))
    kept = audit_world(root, write=False)
    assert kept.verdict == "fail" and "ledger" in kept.failing
    monkeypatch.setattr(checks, "files_read_later", lambda world: set())  # nothing kept: every file read twice
    plain = audit_world(root, write=False)
    assert kept.to_json() == plain.to_json()


def _outcome(load):
    try:
        return ("ok", load().model_dump(mode="json"))
    except Exception as exc:  # noqa: BLE001 - the error, type and words, is the outcome compared
        return (type(exc).__name__, str(exc))


def _mutated(raw, rng):
    """The contract with one random part removed, retyped or renamed (at any depth)."""
    import copy

    raw = copy.deepcopy(raw)
    node = raw
    for _ in range(int(rng.integers(0, 4))):
        children = [v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, dict | list) and v]
        if not children:
            break
        node = children[int(rng.integers(0, len(children)))]
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    if not keys:
        return raw
    key = keys[int(rng.integers(0, len(keys)))]
    match int(rng.integers(0, 4)):
        case 0:
            del node[key]
        case 1:
            node[key] = ["x", 1.5, None, {"a": 1}][int(rng.integers(0, 4))]
        case 2 if isinstance(node, dict) and isinstance(node[key], str):
            node[key] = node[key] + "_renamed"
        case _:
            node[key] = copy.deepcopy(node[keys[0]])
    return raw


@pytest.mark.parametrize("seed", range(60))
def test_the_contract_read_once_validates_as_load_contract(world_dirs, tmp_path, seed):
    """load_world validates the contract it read (worldio.contract_of) instead of load_contract reading it
    again: the same contract, or the same error in the same words, on the world's own and on broken ones."""
    import numpy as np

    from contracts.model import load_contract

    rng = np.random.default_rng(seed)
    raw = json.loads((world_dirs[seed % len(world_dirs)] / "contract.json").read_text())
    if seed % 10 == 1:
        raw["schema_version"] = "0.0"
    elif seed % 10 == 2:
        raw = [raw]
    elif seed % 10 == 3:
        raw["edges"][0]["child"] = raw["edges"][0]["parent"]  # schema-valid, refused by validate_contract
    elif seed % 10:
        raw = _mutated(raw, rng)
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(raw))
    assert _outcome(lambda: worldio.contract_of(json.loads(path.read_text()), path)) == _outcome(
        lambda: load_contract(path)
    )

"""Golden hashes: world 0 of seed 0 at every size, byte for byte.

A pure refactor must leave these unchanged. A change that is meant to alter worlds updates them in the
same commit and says why in its message and in the README's changelog line. On failure the test prints
the new digest to paste here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from personas import builtin_personas
from worldgen.build import persona_for
from worldgen.contract import WorldSpec
from worldgen.observe import DefectSettings
from worldgen.packs import get_pack
from worldgen.pipeline import synthesize
from worldgen.seeding import Streams
from worldgen.write import write_world

# sha256 over the sorted lines "<relative path>\0<sha256 of the file>\n" of contract.json, ledger.jsonl,
# projection.json, canonical/ and observed/ (everything synthesis writes; the audit and tasks follow from them).
GOLDEN = {
    "small": "bda47c2da549c242ed539342b9834d4b84feb15695514c8a2e1b676903bb2f2f",
    "default": "12f14bb2966dce5b638a3ac4a82cf2391509a37bf756177814c625e3070d7f29",
    "large": "c5280ad0f050969353e37e11a29adfe68f258c6d1a43aa382a59ef61b56a2bf9",
}


def digest(world: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in world.rglob("*") if p.is_file() and p.name != "world.json"):
        h.update(path.relative_to(world).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


@pytest.mark.parametrize("size", sorted(GOLDEN))
def test_world_zero_is_byte_identical_to_its_golden_hash(size, tmp_path):
    world = WorldSpec(seed=0, index=0, size=size, persona=persona_for(0, 0, builtin_personas()))
    settings = DefectSettings()
    contract, state, observed = synthesize(world, get_pack(world.persona.domain), settings)
    root = tmp_path / world.world_id
    write_world(root, contract, state, observed, Streams(0, 0), settings)
    assert digest(root) == GOLDEN[size], f"world 0 at size {size!r} changed: new digest {digest(root)}"

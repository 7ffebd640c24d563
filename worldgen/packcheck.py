"""`python -m worldgen.packcheck FILE...`: validate domain packs and persona files for authors."""

from __future__ import annotations

import sys
from pathlib import Path

from contracts.errors import WorldgenError
from personas import check_against_packs, load_persona_file
from worldgen.packs import load_pack_file
from worldgen.skeleton import check_pack_sampling


def main(argv: list[str]) -> int:
    packs = {}
    status = 0
    pack_files = [Path(a) for a in argv if a.endswith(".yaml")]
    for path in pack_files:
        try:
            pack = load_pack_file(path)
            problems = check_pack_sampling(pack, [None])
            if problems:
                raise WorldgenError("; ".join(problems))
            packs[pack.domain] = pack
            print(f"ok   {path}: {len(pack.variables)} variables, {len(pack.edges)} edges")
        except WorldgenError as exc:
            print(f"FAIL {exc}")
            status = 1
    for arg in argv:
        if not arg.endswith(".jsonl"):
            continue
        try:
            personas = load_persona_file(Path(arg))
            check_against_packs(personas, packs, arg)
            for domain, pack in packs.items():
                focuses = sorted({p.focus for p in personas if p.domain == domain and p.focus})
                problems = check_pack_sampling(pack, focuses, draws=10)
                if problems:
                    raise WorldgenError("; ".join(problems))
            print(f"ok   {arg}: {len(personas)} personas")
        except WorldgenError as exc:
            print(f"FAIL {exc}")
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

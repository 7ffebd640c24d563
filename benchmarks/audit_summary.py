"""Summarise the audits of a build: pass rate, failing checks, which phenomena miss, audit vs synthesis time.

python benchmarks/audit_summary.py output/
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path

from contracts.audit import AuditReport


def main(out: Path) -> None:
    worlds = sorted(p for p in (out / "worlds").iterdir() if (p / "audit.json").is_file())
    if not worlds:
        sys.exit(f"no audited worlds under {out}")
    failing, missed, kinds = Counter(), Counter(), Counter()
    passed = 0
    for world in worlds:
        audit = AuditReport.model_validate_json((world / "audit.json").read_text())
        passed += audit.verdict == "pass"
        failing.update(audit.failing)
        contract = json.loads((world / "contract.json").read_text())
        edge_kind = {f"edge:{e['parent']}->{e['child']}": e["kind"] for e in contract["edges"]}
        for check in audit.checks:
            if check.name in ("edges", "recoverability") and check.status == "fail":
                for row in check.estimates:
                    if not row.within:
                        missed[(check.name, row.id.split(":")[0])] += 1
                        kinds[(check.name, edge_kind.get(row.id, row.id.split(":")[0]))] += 1
    print(f"worlds {len(worlds)}, pass {passed} ({passed / len(worlds):.1%})")
    print("failing checks:", dict(failing.most_common()))
    print("missed phenomena by check and kind:", dict(kinds.most_common()))
    timings = (
        [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
        if (out / "timings.jsonl").exists()
        else []
    )
    if timings:
        synth = [sum(t[s] for s in ("dag", "contract", "canonical", "projection", "write")) for t in timings]
        audit = [t.get("audit", 0.0) for t in timings]
        print(
            f"median synthesis {statistics.median(synth):.3f} s/world, median audit {statistics.median(audit):.3f} s/world"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "output"))

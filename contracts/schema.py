"""Write the JSON Schemas next to their models: `python -m contracts.schema`.

contracts/world_contract.schema.json (the world contract) and contracts/audit_report.schema.json (the
auditor's report); a test fails when either is stale.
"""

from __future__ import annotations

import json
from pathlib import Path

from contracts import audit, model

SCHEMA_PATH = Path(__file__).with_name("world_contract.schema.json")
AUDIT_SCHEMA_PATH = Path(__file__).with_name("audit_report.schema.json")


def render(schema: dict | None = None) -> str:
    return json.dumps(model.json_schema() if schema is None else schema, indent=2, sort_keys=True) + "\n"


def render_audit() -> str:
    return render(audit.json_schema())


if __name__ == "__main__":
    SCHEMA_PATH.write_text(render(), encoding="utf-8")
    AUDIT_SCHEMA_PATH.write_text(render_audit(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH} and {AUDIT_SCHEMA_PATH}")

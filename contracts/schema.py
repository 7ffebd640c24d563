"""Write the contract's JSON Schema next to the model: `python -m contracts.schema`."""

from __future__ import annotations

import json
from pathlib import Path

from contracts.model import json_schema

SCHEMA_PATH = Path(__file__).with_name("world_contract.schema.json")


def render() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    SCHEMA_PATH.write_text(render(), encoding="utf-8")
    print(f"wrote {SCHEMA_PATH}")

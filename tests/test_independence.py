"""The auditor and the contract model never import the generator (an AST scan, so it cannot be fooled by laziness)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(package: str) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
    return found


@pytest.mark.parametrize("package", ["auditors", "contracts"])
def test_package_never_imports_worldgen(package):
    assert not {m for m in imported_modules(package) if m == "worldgen" or m.startswith("worldgen.")}

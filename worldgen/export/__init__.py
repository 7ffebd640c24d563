"""Exports: ship built worlds to their users.

- `worldgen export bench` (bench.py): a held-out, fully audited test split as Harbor task directories
  (harbor.py writes one task; its grader is harbor_verifier.py plus a verbatim copy of rubrics/scoring.py).
- `worldgen export pool` (pool.py): every other world's tasks as RL rows, one writer per format (rows.py).
- `worldgen export check` (check.py): validates an exported bench without Docker.

Shared pieces: reading a build (source.py), atomic output directories and hashes (files.py), the text an
agent is shown (text.py), the hidden-truth scan (leaks.py). Adding a pool format is one entry in
rows.FORMATS; adding an export command is one entry in worldgen/cli_export.py's EXPORTS.
"""

from __future__ import annotations

from contracts.errors import WorldgenError


class ExportError(WorldgenError):
    """An export that cannot be made: bad source build, too few eligible worlds, a refused --out, a leak."""

"""The independent auditor: proves a world realises its contract and its phenomena are recoverable from E.

It reads world directories from disk and imports `contracts` (the shared data model), never `worldgen`;
its readers, cleaning and estimators are its own. Use `audit_world(path)` or `worldgen audit PATH...`.
"""

import contracts  # noqa: F401  (first: it pins numpy's kernels before numpy loads; contracts/kernels.py)
from auditors.audit import CHECKS, audit_world

__all__ = ["CHECKS", "audit_world"]

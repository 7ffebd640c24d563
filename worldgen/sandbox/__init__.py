"""Sandboxed Python sessions for agents: one fresh workspace and one persistent interpreter per episode.

    from worldgen.sandbox import Session
    with Session(world / "observed") as session:
        session.run("import polars as pl; pl.read_csv('data/orders.csv').shape")

The workspace holds the world's observed files read-only at `data/` and a writable `scratch/`; nothing else
of the host is visible under bubblewrap (see `isolation.py`), and resource limits apply either way.
"""

from worldgen.sandbox.session import Limits, SandboxError, SandboxWarning, Session, StepResult

__all__ = ["Limits", "SandboxError", "SandboxWarning", "Session", "StepResult"]

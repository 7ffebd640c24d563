"""Code that scripted agents send into the sandbox: an analysis world built from data/ and a data dictionary.

The auditor's analysis (`auditors.dataset.from_observed`, `auditors.estimate.recover_phenomena`) works
from a `World`: a contract plus an `observed/` directory. Inside the sandbox the observed files are data/,
so the cell links a private `observed/` to it and builds the World from the contract the cell carries.
That contract is the task author's data dictionary and structure with every answer taken out
(`analysis_contract`): no phenomenon targets or tolerances, no effect sizes, thresholds, lags or signs;
only what the estimators read (which column holds what, the DAG, mechanism kinds and fixed definitions).
"""

from __future__ import annotations

import copy
import json
from typing import Any

# Mechanism parameters that define a feature rather than answer the question (see auditors/estimate.py).
DEFINITIONS = ("transform", "origin", "center", "moderator", "moderator_center", "moderator_scale", "denominator")


def analysis_contract(contract: dict[str, Any], question: tuple[str, str] | None = None) -> dict[str, Any]:
    """The contract with every planted value removed: what an analyst's data dictionary would say.

    With `question` = (kind, variable), only the phenomena that question is about are kept (plus any
    file-level measure the cleaning needs), so the session estimates what the answer needs and no more.
    """
    redacted = copy.deepcopy(contract)
    if question is not None:
        redacted["phenomena"] = [ph for ph in redacted["phenomena"] if _asks(ph, *question) or ph.get("column")]
    files = sorted({d["file"] for d in redacted["deliverables"]})
    for edge in redacted["edges"]:
        edge["params"] = {k: v for k, v in edge["params"].items() if k in DEFINITIONS}
        edge["draw"], edge["sign"], edge["note"] = {}, "+", ""
    for ph in redacted["phenomena"]:
        ph["target"], ph["tolerance"], ph["files"], ph["description"] = None, 1.0, files, ""
    redacted["invariants"], redacted["sealed"] = [], False
    redacted["unidentified"], redacted["attempt"] = [], 0  # which effects are weak is an answer too
    return redacted


def _asks(ph: dict[str, Any], kind: str, variable: str) -> bool:
    """Whether a cause (what drove `variable`) or consequence (what `variable` drives) question needs it."""
    if kind == "cause":
        return bool(ph["variables"]) and ph["variables"][-1] == variable
    return ph["kind"] == "edge_effect" and bool(ph["variables"]) and ph["variables"][0] == variable


def world_cell(contract: dict[str, Any], clean: bool, question: tuple[str, str] | None = None) -> str:
    """Build `contract`, `world` and the analysis tables (`data`, `units`, `panel`, `events`) in the session."""
    text = json.dumps(analysis_contract(contract, question), separators=(",", ":"))
    return f"""import json, math, pathlib, tempfile
from auditors.dataset import from_observed
from auditors.worldio import World
from contracts.model import Contract

# The data dictionary: which column of which file holds which variable, and the structure to estimate.
contract = Contract.model_validate_json({text!r})
root = pathlib.Path(tempfile.mkdtemp())
(root / "observed").symlink_to(pathlib.Path("data").resolve())
world = World(path=root, meta={{}}, raw_contract={{}}, contract=contract, contract_error=None)
data = from_observed(world, clean={clean!r})
units, panel, events = data.units, data.panel, data.events
print({{"units": units.shape, "panel": panel.shape, "events": events.shape}})
"""


LIST_CELL = """import os
for name in sorted(os.listdir("data")):
    print(name, os.path.getsize(os.path.join("data", name)))
"""

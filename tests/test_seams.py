"""The seams between stages: one mechanism has both sides, constants that must agree do, functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from auditors.checks import ABSOLUTE_BOUNDS, LOCATED_BOUND_SD, tolerance_is_a_finding
from auditors.estimators import ESTIMATORS
from contracts.model import MECHANISM_KINDS, MECHANISM_PARAMS
from worldgen import phenomena
from worldgen.mechanisms import MECHANISMS, Scale

ROOT = Path(__file__).resolve().parents[1]
PARENT, CHILD = Scale(mean=10.0, sd=3.0, levels=("a", "b", "c")), Scale(mean=50.0, sd=5.0)
EXTRA = {"moderator": Scale(mean=2.0, sd=1.0), "denominator": Scale(mean=6.0, sd=2.0)}


def test_every_mechanism_kind_has_a_generator_and_an_auditor_side():
    assert tuple(MECHANISMS) == MECHANISM_KINDS
    assert set(ESTIMATORS) == set(MECHANISM_KINDS) == set(MECHANISM_PARAMS)
    for kind, mechanism in MECHANISMS.items():
        assert mechanism.kind == kind == ESTIMATORS[kind].kind
        assert mechanism.magnitude_doc and mechanism.summary, kind


@pytest.mark.parametrize("kind", MECHANISM_KINDS)
def test_generator_tolerances_stay_inside_the_auditor_bounds(kind):
    """The business tolerance of every planted statistic must be one the auditor accepts as a finding."""
    mechanism = MECHANISMS[kind]
    for seed in range(200):
        rng = np.random.default_rng(seed)
        params = mechanism.sample_params(PARENT, CHILD, "+-"[seed % 2], rng, **EXTRA)
        params["parent_sd"] = PARENT.sd
        missing = [p for p in MECHANISM_PARAMS[kind] if p not in params and p not in ("moderator", "denominator")]
        assert not missing, f"{kind} sampler misses contract parameters {missing}"
        statistic, target, tolerance = mechanism.statistic(params)
        assert tolerance_is_a_finding(statistic, target, tolerance, PARENT.sd), (kind, params, tolerance)


def test_phenomenon_tolerances_stay_inside_the_auditor_bounds():
    assert tolerance_is_a_finding("relative_change_h2_vs_h1", 0.2, phenomena.CHANGE_TOLERANCE, 1.0)
    assert tolerance_is_a_finding("share_of_change", 0.5, phenomena.SHARE_TOLERANCE, 1.0)
    assert not tolerance_is_a_finding("share_of_change", 0.5, 0.31, 1.0), "the auditor's bound must bite"
    # What the generator calls unidentifiable is exactly what the auditor would reject as no finding.
    assert phenomena.CHANGE_BOUND == ABSOLUTE_BOUNDS["relative_change_h2_vs_h1"]
    assert phenomena.SHARE_BOUND == ABSOLUTE_BOUNDS["share_of_change"]
    assert phenomena.LAG_BOUND_DAYS == ABSOLUTE_BOUNDS["lag_periods"]
    assert phenomena.SEASONAL_BOUND == ABSOLUTE_BOUNDS["seasonal_amplitude"]
    assert phenomena.LOCATED_BOUND_SD == LOCATED_BOUND_SD


def _functions(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                above = lines[first - 2].strip() if first >= 2 else ""
                yield path.relative_to(ROOT), node, len(params), above


MAX_LINES, MAX_PARAMS = 60, 6


@pytest.mark.parametrize("package", ["worldgen", "auditors", "contracts", "rubrics"])
def test_functions_stay_small_or_say_why(package):
    """No function over 60 lines or 6 parameters without a `# size:` comment above it giving the reason."""
    offenders = []
    for path, node, params, above in _functions(package):
        length = node.end_lineno - node.lineno + 1
        if (length > MAX_LINES or params > MAX_PARAMS) and not above.startswith("# size:"):
            offenders.append(f"{path}:{node.lineno} {node.name} ({length} lines, {params} parameters)")
    assert not offenders, offenders

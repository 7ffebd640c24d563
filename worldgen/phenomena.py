"""Draft contract + canonical state -> sealed contract: resolved parameters and the phenomena I, with targets.

The phenomena are the findings an analyst must be able to make from the observed files:
- one `edge_effect` per edge: the statistic its mechanism is identified by (slope, step location, half-
  saturation point, lag, interaction coefficient, seasonal swing, level-shift range, per-capacity slope),
  with the planted value as target;
- a `period_change` (H1 -> H2 relative change of the mean) of every cause-task variable and of the event
  amount, computed from X;
- an `attribution` share per parent of every cause-task variable, from the recorded contributions.

Tolerances are the business tolerance widened to what the data can support: three standard errors of the
effect in X (from regressing the child on its parents' true contributions), and the delta method for shares.
This module imports the contract, the state and the mechanisms, and nothing imports it but the pipeline and
the task builder: one direction of imports.
"""

from __future__ import annotations

import math

import networkx as nx
import numpy as np

from contracts.model import Contract, Edge, Phenomenon, validate_contract
from worldgen.canonical import CanonicalState, grain_series, table_of
from worldgen.mechanisms import LINEAR_STATISTICS, MECHANISMS
from worldgen.plan import file_of

CHANGE_TOLERANCE = 0.03  # H1 -> H2 relative changes: +-3 percentage points
SHARE_TOLERANCE = 0.15  # attribution shares: +-15 percentage points
STANDARD_ERRORS = 3.0  # tolerances never demand more precision than three standard errors of the estimate
SATURATION_ON_COUNTS_SD = 0.5  # Poisson counts blur the bend of a curve: +-0.5 parent sd on the volume
MATERIAL_CHANGE_SD = 0.1  # a change smaller than 0.1 child sd has no meaningful attribution
CANCELLATION_RATIO = 1.5  # drivers whose absolute deltas exceed 1.5x the net change largely cancel out


def seal(contract: Contract, state: CanonicalState) -> Contract:
    """Fill what depends on realised data (resolved parameters, phenomena, counts) and mark C sealed."""
    sealed = contract.model_copy(deep=True)
    for edge in sealed.edges:
        edge.params = state.params[f"{edge.parent}->{edge.child}"]
        summary = MECHANISMS[edge.kind].describe(edge.params)
        edge.note = f"{edge.note}: {summary}" if edge.note else summary
    errors = _standard_errors(sealed, state)
    findings = _period_changes(sealed, state) + _attributions(sealed, state)
    for ph in findings:  # a share is only as precise as the effects it is computed from
        se = errors.get(f"share:{ph.variables[0]}->{ph.variables[1]}") if ph.kind == "attribution" else None
        if se is not None and np.isfinite(se):
            ph.tolerance = max(ph.tolerance, round(STANDARD_ERRORS * se, 6))
    sealed.phenomena = edge_phenomena(sealed, errors) + findings
    for entity in sealed.entities:
        entity.count = len(state.column(entity.table, entity.key))
    sealed.sealed = True
    validate_contract(sealed)
    return sealed


def edge_phenomena(contract: Contract, standard_errors: dict[str, float] | None = None) -> list[Phenomenon]:
    """One edge_effect phenomenon per edge, from its resolved parameters.

    For effects estimated by regression the tolerance is the larger of the business tolerance and three
    standard errors of the estimate in X: with correlated parents or Poisson counts a quarter of the effect
    can be below what any analyst could resolve from the data.
    """
    units_file = next(d.file for d in contract.deliverables if d.grain == "units")
    volume = contract.volume.name
    out = []
    for e in contract.edges:
        mechanism = MECHANISMS[e.kind]
        stat, target, tol = mechanism.statistic(e.params)
        se = (standard_errors or {}).get(f"{e.parent}->{e.child}")
        if stat in LINEAR_STATISTICS and se is not None and math.isfinite(se):
            tol = max(tol, round(STANDARD_ERRORS * se, 6))
        if stat == "half_saturation" and e.child == volume:
            tol = SATURATION_ON_COUNTS_SD * e.params["parent_sd"]
        files = [file_of(contract, e.parent), file_of(contract, e.child)]
        if "moderator" in mechanism.inputs:
            files.append(file_of(contract, e.params["moderator"]))
        if "denominator" in mechanism.inputs:
            files.append(units_file)
        out.append(
            Phenomenon(
                id=f"edge:{e.parent}->{e.child}",
                kind="edge_effect",
                statistic=stat,
                variables=[e.parent, e.child],
                edge=f"{e.parent}->{e.child}",
                target=target,
                tolerance=max(tol, 1e-6),
                files=sorted(set(files)),
                description=f"{e.parent} -> {e.child} ({e.kind}): {mechanism.describe(e.params)}",
            )
        )
    return out


def _period_change(contract: Contract, values: np.ndarray, day: np.ndarray, ph: Phenomenon) -> Phenomenon:
    half = contract.timeline.periods // 2
    a, b = float(values[day < half].mean()), float(values[day >= half].mean())
    ph.target = round((b - a) / a, 6) if a else 0.0
    ph.description += f" (H1 mean {a:.4g}, H2 mean {b:.4g})"
    return ph


def _period_changes(contract: Contract, state: CanonicalState) -> list[Phenomenon]:
    """The H1 -> H2 change of every cause-task variable, then of the mean event amount."""
    half, periods = contract.timeline.periods // 2, contract.timeline.periods
    out = []
    for node in cause_nodes(contract):
        ph = Phenomenon(
            id=f"change:{node}",
            kind="period_change",
            statistic="relative_change_h2_vs_h1",
            variables=[node],
            tolerance=CHANGE_TOLERANCE,
            files=[file_of(contract, node)],
            description=f"relative change of mean {node} from periods [0, {half}) to [{half}, {periods})",
        )
        out.append(_period_change(contract, *grain_series(contract, state, node), ph))
    amount = contract.measures.amount
    event = contract.entity("event").name
    ph = Phenomenon(
        id=f"change:{amount.name}",
        kind="period_change",
        statistic="relative_change_h2_vs_h1",
        variables=[],
        column=f"events.{amount.name}",
        tolerance=CHANGE_TOLERANCE,
        files=[next(d.file for d in contract.deliverables if d.grain == "events")],
        description=f"relative change of the mean {event} {amount.name} ({amount.unit}) from H1 to H2",
    )
    values, day = state.column("events", amount.name).astype(float), state.column("events", "day")
    out.append(_period_change(contract, values, day, ph))
    return out


def _attributions(contract: Contract, state: CanonicalState) -> list[Phenomenon]:
    """Each parent's share of a cause-task variable's change, when the change is material and not cancelling."""
    graph = nx.DiGraph([(e.parent, e.child) for e in contract.edges])
    half = contract.timeline.periods // 2
    out = []
    for node in cause_nodes(contract):
        deltas = _deltas(state.contributions[node], grain_series(contract, state, node)[1], half)
        total = sum(deltas.values())
        # Shares are only a finding when the change is material and its drivers do not largely cancel
        # (otherwise "explains 500% of the change" is noise over noise).
        material = abs(total) >= MATERIAL_CHANGE_SD * contract.variable(node).sd
        if not material or sum(abs(d) for d in deltas.values()) > CANCELLATION_RATIO * abs(total):
            continue
        for parent in sorted(graph.predecessors(node)):
            out.append(
                Phenomenon(
                    id=f"share:{parent}->{node}",
                    kind="attribution",
                    statistic="share_of_change",
                    variables=[parent, node],
                    edge=f"{parent}->{node}",
                    target=round(deltas[parent] / total, 6),
                    tolerance=SHARE_TOLERANCE,
                    files=sorted({file_of(contract, parent), file_of(contract, node)}),
                    description=f"share of the H1->H2 change in {node} explained by {parent}",
                )
            )
    return out


def _deltas(contributions: dict[str, np.ndarray], day: np.ndarray, half: int) -> dict[str, float]:
    out = {}
    for parent, contribution in contributions.items():
        flat = contribution.reshape(-1)
        out[parent] = float(flat[day >= half].mean() - flat[day < half].mean())
    return out


def _standard_errors(contract: Contract, state: CanonicalState) -> dict[str, float]:
    """Standard errors of each edge's effect size and of each attribution share, as the data allow them.

    The child is regressed on its parents' true contributions (coefficient 1 each), with a categorical
    parent expanded into one column per level as an analyst must estimate it. A column's standard error,
    scaled by the planted effect, is the precision of that effect; shares get theirs by the delta method.
    """
    out: dict[str, float] = {}
    edges = {(e.parent, e.child): e for e in contract.edges}
    half = contract.timeline.periods // 2
    for child, contributions in state.contributions.items():
        y = state.column(table_of(contract.variable(child)), child).astype(float).reshape(-1)
        day = grain_series(contract, state, child)[1]
        X, owner = _contribution_design(y, contributions, edges, child)
        ok = np.isfinite(X).all(axis=1) & np.isfinite(y)
        if ok.sum() <= X.shape[1] + 2:
            continue
        Xo, yo = X[ok], y[ok]
        coef, *_ = np.linalg.lstsq(Xo, yo, rcond=None)
        sigma2 = float(np.sum((yo - Xo @ coef) ** 2)) / (len(yo) - X.shape[1])
        try:
            cov = sigma2 * np.linalg.pinv(Xo.T @ Xo)
        except np.linalg.LinAlgError:
            continue
        level_cols: dict[str, list[int]] = {}
        for j, name in enumerate(owner):
            if name is None:
                continue
            if name.endswith("#level"):
                level_cols.setdefault(name[:-6], []).append(j)
                continue
            size = MECHANISMS[edges[(name, child)].kind].effect_size(edges[(name, child)].params)
            if size is not None:
                out[f"{name}->{child}"] = float(np.sqrt(max(cov[j, j], 0.0)) * abs(size))
        for parent, cols in level_cols.items():  # a level-shift range: the noisiest level's error, twice over
            out[f"{parent}->{child}"] = float(2 * np.sqrt(max(cov[j, j] for j in cols)))
        single = [j for j, name in enumerate(owner) if name is not None and not name.endswith("#level")]
        if single:
            late, early = ok & (day >= half), ok & (day < half)
            deltas = np.array([float(X[late, j].mean() - X[early, j].mean()) for j in single])
            out |= _share_errors(deltas, [owner[j] for j in single], cov[np.ix_(single, single)], child)
    return out


def _contribution_design(
    y: np.ndarray, contributions: dict[str, np.ndarray], edges: dict[tuple[str, str], Edge], child: str
) -> tuple[np.ndarray, list[str | None]]:
    """Intercept plus one column per parent's contribution (one per level for a categorical parent)."""
    columns, owner = [np.ones_like(y)], [None]
    for parent in sorted(contributions):
        c = contributions[parent].reshape(-1)
        if edges[(parent, child)].kind == "categorical":
            for value in np.unique(c)[1:]:
                columns.append((c == value).astype(float))
                owner.append(parent + "#level")
        else:
            columns.append(c)
            owner.append(parent)
    return np.column_stack(columns), owner


def _share_errors(d: np.ndarray, parents: list[str], cov: np.ndarray, child: str) -> dict[str, float]:
    """Shares s_p = D_p / sum D with D_p = b_p d_p (b_p = 1 for the true model); delta method on b.

    `d` holds each parent's H1 -> H2 contribution delta and `cov` the covariance of the parents' b.
    """
    total = d.sum()
    if abs(total) < 1e-12:
        return {}
    out = {}
    for k, name in enumerate(parents):
        grad = -d[k] * d / total**2
        grad[k] += d[k] / total
        out[f"share:{name}->{child}"] = float(np.sqrt(max(grad @ cov @ grad, 0.0)))
    return out


def task_nodes(contract: Contract) -> list[tuple[str, str]]:
    """(kind, variable) per depth bucket: the largest in-degree node asks why it changed (cause), the
    largest out-degree node asks what it changed (consequence). The persona's focus always gets the cause
    task of its bucket. Unit attributes do not change over time, so they never get a cause task."""
    indeg = {v.name: 0 for v in contract.variables}
    outdeg = dict(indeg)
    for e in contract.edges:
        indeg[e.child] += 1
        outdeg[e.parent] += 1
    grain = {v.name: v.grain for v in contract.variables}
    focus = focus_variable(contract)
    chosen: list[tuple[str, str]] = []
    for layer in contract.layers:
        causes = [n for n in sorted(layer) if indeg[n] >= 2 and grain[n] != "unit"]
        if causes:
            chosen.append(("cause", focus if focus in causes else max(causes, key=lambda n: indeg[n])))
        effects = [n for n in sorted(layer) if outdeg[n] >= 2]
        if effects:
            chosen.append(("consequence", max(effects, key=lambda n: outdeg[n])))
    return chosen


def cause_nodes(contract: Contract) -> list[str]:
    return [node for kind, node in task_nodes(contract) if kind == "cause"]


def focus_variable(contract: Contract) -> str:
    """The persona's focus when the world kept it with >= 2 parents, else the largest in-degree node."""
    indeg = {v.name: 0 for v in contract.variables}
    for e in contract.edges:
        indeg[e.child] += 1
    focus = contract.persona.focus
    if focus in indeg and indeg[focus] >= 2:
        return focus
    return max(sorted(indeg), key=lambda n: indeg[n])

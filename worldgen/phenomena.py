"""Draft contract + canonical state -> sealed contract: resolved parameters and the phenomena I, with targets.

The phenomena are the findings an analyst must be able to make from the observed files:
- one `edge_effect` per edge: the statistic its mechanism is identified by (slope, step location, half-
  saturation point, lag, interaction coefficient, seasonal swing, level-shift range, per-capacity slope);
- a `period_change` (H1 -> H2 relative change of the mean) of every cause-task variable and of the event
  amount, over the rows an analyst can see (open unit-days, answered surveys);
- an `attribution` share per parent of every cause-task variable, from the recorded contributions.

Each child is regressed, on the rows an analyst can see, on its parents' true contributions (plus the
calendar for the volume). The coefficient of a contribution is 1 when the reported scale preserves the mean
and smaller where it cannot (a rating scale's ends): an effect's target is the planted value times that
coefficient, i.e. the effect as the reported data carry it, and its tolerance is the larger of the business
tolerance and three standard errors. Step locations, curve bends and lags get theirs from a profile of the
fit over the candidate values; an effect the data cannot pin down is listed as unidentified instead.
This module imports the contract, the state and the mechanisms; only the pipeline and the task builder
import it: one direction of imports.
"""

from __future__ import annotations

import math
import pickle

import numpy as np

from contracts.model import Contract, Edge, Phenomenon, Unidentified, validate_contract
from worldgen.canonical import CanonicalState, grain_series, rows_where
from worldgen.estimation import (
    PROFILED,
    Fit,
    co_location_gap,
    fit_child,
    located_share_gaps,
    profile_tolerance,
)
from worldgen.mechanisms import LINEAR_STATISTICS, MECHANISMS
from worldgen.plan import file_of

CHANGE_TOLERANCE = 0.03  # H1 -> H2 relative changes: +-3 percentage points
CHANGE_NOISE = 1.0  # or one standard error of the change, ~6x what a few percent of missing values move it
CHANGE_BOUND = 0.1  # a change known no better than +-10 points is not a finding (auditor's bound)
SHARE_TOLERANCE = 0.1  # attribution shares: +-10 percentage points
STANDARD_ERRORS = 3.0  # tolerances never demand more precision than three standard errors of the estimate
MATERIAL_CHANGE_SD = 0.1  # a change smaller than 0.1 child sd has no meaningful attribution
CANCELLATION_RATIO = 1.5  # drivers whose absolute deltas exceed 1.5x the net change largely cancel out
LOCATED_BOUND_SD = 1.0  # a step or bend located no better than +-1 parent sd is not located (auditor's bound)
LAG_BOUND_DAYS = 3.0  # a delay known no better than +-3 days is not known (auditor's bound)
SEASONAL_BOUND = 0.3  # a seasonal swing known no better than +-0.3 is not known (auditor's bound)
SHARE_BOUND = 0.3  # shares known no better than +-30 points are not known (auditor's bound)
REALISED_RANGE = (0.5, 1.5)  # a mean-preserving report carries an effect at 0.5x to 1.5x its planted size
SCALE_REALISED_LOW = 0.3  # a rating scale's ends flatten effects more, down to 0.3x
LOCATED_KINDS = tuple(kind for kind, m in MECHANISMS.items() if m.shaped)  # shapes a share depends on being right


def seal(contract: Contract, state: CanonicalState, rows_lost: float = 0.0) -> Contract:
    """Fill what depends on realised data (resolved parameters, phenomena, counts) and mark C sealed.
    `rows_lost`: the share of a child's rows blanks will take from an analyst's fit (shares move with it)."""
    sealed = _deep_copy(contract)
    for edge in sealed.edges:
        edge.params = state.params[f"{edge.parent}->{edge.child}"]
        summary = MECHANISMS[edge.kind].describe(edge.params)
        edge.note = f"{edge.note}: {summary}" if edge.note else summary
    fits = {child: fit_child(sealed, state, child) for child in sorted({e.child for e in sealed.edges})}
    effects, unidentified = edge_phenomena(sealed, state, fits)
    unsure = {u.edge for u in unidentified}
    sealed.phenomena = (
        effects
        + _period_changes(sealed, state)
        + _attributions(sealed, state, fits, unsure, {ph.edge: ph.tolerance for ph in effects}, rows_lost)
    )
    sealed.unidentified = unidentified
    for entity in sealed.entities:
        entity.count = len(state.column(entity.table, entity.key))
    sealed.sealed = True
    validate_contract(sealed)
    return sealed


def _deep_copy(contract: Contract) -> Contract:
    """`contract.model_copy(deep=True)`: the same fields, values and fields set, through one pickle round
    trip (C code over the whole tree) instead of `copy.deepcopy`'s Python call per node, ~2x faster."""
    return pickle.loads(pickle.dumps(contract, protocol=pickle.HIGHEST_PROTOCOL))


def edge_phenomena(
    contract: Contract, state: CanonicalState, fits: dict[str, Fit | None]
) -> tuple[list[Phenomenon], list[Unidentified]]:
    """One edge_effect phenomenon per identifiable edge, and the edges the data cannot pin down."""
    units_file = next(d.file for d in contract.deliverables if d.grain == "units")
    located = _located_tolerances(contract, state, fits)
    out, unidentified = [], []
    for e in contract.edges:
        mechanism = MECHANISMS[e.kind]
        stat, target, tol = mechanism.statistic(e.params)
        fit = fits.get(e.child)
        if fit is None:
            unidentified.append(Unidentified(edge=_id(e), statistic=stat, reason="too few rows to estimate"))
            continue
        if stat in LINEAR_STATISTICS:
            target, se = fit.realised(e, mechanism)
            # A co-parent located elsewhere within its tolerance moves this slope: the tolerance covers it.
            moved = co_location_gap(contract, state, fit, e, located)
            tol = max(mechanism.business_share * abs(target), STANDARD_ERRORS * se + moved)
            identified = math.isfinite(tol) and tol < abs(target) and _carried(e, fit, contract)
        else:
            tol = located[_id(e)]
            identified = tol <= _bound(stat, e)
        if not identified:
            unidentified.append(Unidentified(edge=_id(e), statistic=stat, reason=f"tolerance {tol:.4g} too wide"))
            continue
        files = [file_of(contract, e.parent), file_of(contract, e.child)]
        if "moderator" in mechanism.inputs:
            files.append(file_of(contract, e.params["moderator"]))
        if "denominator" in mechanism.inputs:
            files.append(units_file)
        out.append(
            Phenomenon(
                id=f"edge:{_id(e)}",
                kind="edge_effect",
                statistic=stat,
                variables=[e.parent, e.child],
                edge=_id(e),
                target=round(target, 6),
                tolerance=round(max(tol, 1e-6), 6),
                files=sorted(set(files)),
                description=f"{e.parent} -> {e.child} ({e.kind}): {mechanism.describe(e.params)}",
            )
        )
    return out, unidentified


def _located_tolerances(contract: Contract, state: CanonicalState, fits: dict[str, Fit | None]) -> dict[str, float]:
    """Edge id -> how far from the planted value the data let its location (step, bend, lag, swing) lie."""
    out = {}
    for e in contract.edges:
        stat, _, tol = MECHANISMS[e.kind].statistic(e.params)
        fit = fits.get(e.child)
        if fit is not None and stat not in LINEAR_STATISTICS:
            out[_id(e)] = max(tol, profile_tolerance(contract, state, fit, e) or math.inf)
    return out


def _carried(e: Edge, fit: Fit, contract: Contract) -> bool:
    """Whether the reported data carry the planted effect at about its size. A measurement clipped at its
    range's end for most rows where the cause acts (a cause that pushes the child to zero) does not: the
    unclipped rows barely see the cause, and what they show is not the planted effect."""
    if e.kind == "categorical":
        return True
    j = fit.columns(e.parent)[0]
    low = REALISED_RANGE[0] if contract.variable(e.child).observe != "scale" else SCALE_REALISED_LOW
    return low <= fit.coef[j] <= REALISED_RANGE[1]


def _id(e: Edge) -> str:
    return f"{e.parent}->{e.child}"


def _bound(statistic: str, e: Edge) -> float:
    if statistic == "lag_periods":
        return LAG_BOUND_DAYS
    if statistic == "seasonal_amplitude":
        return SEASONAL_BOUND
    return LOCATED_BOUND_SD * e.params["parent_sd"]


def _period_change(contract: Contract, values: np.ndarray, day: np.ndarray, ph: Phenomenon) -> Phenomenon:
    """The relative change of the half means; its tolerance widens to the change's own standard error for a
    heavy-tailed measure, whose half means move when a few of its values go missing."""
    half = contract.timeline.periods // 2
    first, second = rows_where(values, day < half), rows_where(values, day >= half)
    a, b = float(first.mean()), float(second.mean())
    ph.target = round((b - a) / a, 6) if a else 0.0
    if a:
        se = np.sqrt(second.var() / len(second) / a**2 + b**2 * first.var() / len(first) / a**4)
        ph.tolerance = round(max(ph.tolerance, CHANGE_NOISE * float(se)), 6)
    ph.description += f" (H1 mean {a:.4g}, H2 mean {b:.4g})"
    return ph


def _period_changes(contract: Contract, state: CanonicalState) -> list[Phenomenon]:
    """The H1 -> H2 change of every cause-task candidate, then of the mean event amount."""
    half, periods = contract.timeline.periods // 2, contract.timeline.periods
    out = []
    for node in cause_candidates(contract):
        ph = Phenomenon(
            id=f"change:{node}",
            kind="period_change",
            statistic="relative_change_h2_vs_h1",
            variables=[node],
            tolerance=CHANGE_TOLERANCE,
            files=[file_of(contract, node)],
            description=f"relative change of mean {node} from days [0, {half}) to [{half}, {periods})",
        )
        ph = _period_change(contract, *grain_series(contract, state, node), ph)
        if ph.tolerance <= CHANGE_BOUND:
            out.append(ph)
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


def _attributions(
    contract: Contract,
    state: CanonicalState,
    fits: dict[str, Fit | None],
    unsure: set[str],
    located: dict[str | None, float],
    rows_lost: float,
) -> list[Phenomenon]:
    """Each parent's share of a cause-task candidate's change, when it is material and does not cancel, and
    when every driver's effect is carried by the data (a share needs the shape of each effect to be right).
    A share's tolerance covers three standard errors and how far it moves when a step, bend or lag sits
    anywhere its tolerance (`located`, by edge) allows."""
    half = contract.timeline.periods // 2
    out = []
    for node in cause_candidates(contract):
        fit = fits.get(node)
        drivers_in_doubt = [e for e in contract.edges if e.child == node and f"{e.parent}->{node}" in unsure]
        if fit is None or any(e.kind in LOCATED_KINDS or not e.kind for e in drivers_in_doubt):
            continue
        drivers = {e.parent for e in contract.edges if e.child == node and contract.variable(e.parent).grain != "unit"}
        deltas, errors = fit.shares(half, drivers, rows_lost)
        if len(deltas) < 1:
            continue
        total = sum(deltas.values())
        material = abs(total) >= MATERIAL_CHANGE_SD * contract.variable(node).sd
        # Shares are only a finding when the change is material and its drivers do not largely cancel
        # (otherwise "explains 500% of the change" is noise over noise).
        if not material or sum(abs(d) for d in deltas.values()) > CANCELLATION_RATIO * abs(total):
            continue
        gaps = dict.fromkeys(deltas, 0.0)
        for e in contract.edges:
            if e.child == node and e.parent in deltas and e.kind in PROFILED:
                moved = located_share_gaps(contract, state, fit, e, located.get(_id(e), 0.0), drivers)
                gaps = {p: gaps[p] + moved.get(p, 0.0) for p in deltas}
        tolerances = {p: max(SHARE_TOLERANCE, STANDARD_ERRORS * errors.get(p, math.inf) + gaps[p]) for p in deltas}
        if max(tolerances.values()) > SHARE_BOUND:  # the data cannot split this change between its drivers
            continue
        for parent in sorted(deltas):
            tolerance = tolerances[parent]
            out.append(
                Phenomenon(
                    id=f"share:{parent}->{node}",
                    kind="attribution",
                    statistic="share_of_change",
                    variables=[parent, node],
                    edge=f"{parent}->{node}",
                    target=round(deltas[parent] / total, 6),
                    tolerance=round(tolerance, 6),
                    files=sorted({file_of(contract, parent), file_of(contract, node)}),
                    description=f"share of the H1->H2 change in {node} explained by {parent}",
                )
            )
    return out


def _degrees(contract: Contract) -> tuple[dict[str, int], dict[str, int]]:
    indeg = {v.name: 0 for v in contract.variables}
    outdeg = dict(indeg)
    for e in contract.edges:
        indeg[e.child] += 1
        outdeg[e.parent] += 1
    return indeg, outdeg


def cause_candidates(contract: Contract) -> list[str]:
    """Variables that may be asked 'why did it change?': two or more parents, changing over time."""
    indeg, _ = _degrees(contract)
    return sorted(v.name for v in contract.variables if indeg[v.name] >= 2 and v.grain != "unit")


def consequence_candidates(contract: Contract) -> list[str]:
    """Variables that may be asked 'what does it drive?': two or more children, which are at most half of
    the children the domain finds plausible (so naming every plausible effect does not pay)."""
    _, outdeg = _degrees(contract)
    plausible = {v.name: 0 for v in contract.variables}
    for c in contract.candidates:
        if c.parent in plausible and c.child in plausible:
            plausible[c.parent] += 1
    return sorted(n for n, d in outdeg.items() if 2 <= d <= plausible[n] // 2)


def task_nodes(contract: Contract) -> list[tuple[str, str]]:
    """(kind, variable) per depth bucket: among the cause candidates whose change is material and whose
    drivers have shares, the persona's focus or else the largest in-degree; among the consequence
    candidates, the largest out-degree. Deterministic in the sealed contract."""
    indeg, outdeg = _degrees(contract)
    focus = focus_variable(contract)
    phenomena = {ph.id: ph for ph in contract.phenomena}
    shared = {ph.variables[1] for ph in contract.phenomena if ph.kind == "attribution"}
    causes = [n for n in cause_candidates(contract) if n in shared and _material(phenomena.get(f"change:{n}"))]
    effects = consequence_candidates(contract)
    chosen: list[tuple[str, str]] = []
    for layer in contract.layers:
        here = [n for n in sorted(layer) if n in causes]
        if here:
            chosen.append(("cause", focus if focus in here else max(here, key=lambda n: indeg[n])))
        here = [n for n in sorted(layer) if n in effects]
        if here:
            chosen.append(("consequence", max(here, key=lambda n: outdeg[n])))
    return chosen


MATERIAL_CHANGE_TOLERANCES = 2.0  # a cause task's change must be at least two tolerances away from zero


def _material(change: Phenomenon | None) -> bool:
    return (
        change is not None
        and change.target is not None
        and abs(change.target) >= MATERIAL_CHANGE_TOLERANCES * change.tolerance
    )


def focus_variable(contract: Contract) -> str:
    """The persona's focus when the world kept it with >= 2 parents, else the largest in-degree node."""
    indeg, _ = _degrees(contract)
    focus = contract.persona.focus
    if focus in indeg and indeg[focus] >= 2:
        return focus
    return max(sorted(indeg), key=lambda n: indeg[n])


def trend_layer(contract: Contract) -> int | None:
    """The layer after which `trend_holds` can be judged (the focus's), or None: judge the finished state."""
    persona = contract.persona
    if persona.trend is None or persona.focus is None:
        return None
    return next((k for k, names in enumerate(contract.layers) if persona.focus in names), None)


def trend_holds(contract: Contract, state: CanonicalState) -> bool:
    """Whether X moved the persona's focus the way its concern says, by a material amount."""
    persona = contract.persona
    if persona.trend is None or persona.focus is None:
        return True
    values, day = grain_series(contract, state, persona.focus)
    half = contract.timeline.periods // 2
    a, b = float(rows_where(values, day < half).mean()), float(rows_where(values, day >= half).mean())
    change = (b - a) / a if a else 0.0
    wanted = 1.0 if persona.trend == "up" else -1.0
    return change * wanted >= MATERIAL_CHANGE_TOLERANCES * CHANGE_TOLERANCE

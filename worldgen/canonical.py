"""Contract -> canonical state X, layer by layer, with a hashed ledger.

Step 0 draws the entities (units, parties). Step l+1 draws every variable of generation layer l from its
parents, which are read-only arrays by then; the volume variable's step also realises the event table,
one row per event. Each step has its own seed stream, commits its outputs at once into a new state and
appends a ledger record: sha256 of every input and output column, the seed, row counts and checks that
parents were left untouched. X is the hidden truth: analysts only ever see its projection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from faker import Faker

from contracts.hashing import column_sha256
from contracts.model import Contract, Edge, Variable, validate_contract
from worldgen.contract import edge_phenomena, resolve_params
from worldgen.mechanisms import MECHANISMS, Scale, describe
from worldgen.packs import DomainPack

Table = MappingProxyType  # read-only mapping of column name -> read-only array
NOISE = 0.3  # child noise sd as a share of the child's nominal sd


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    arr.flags.writeable = False
    return arr


@dataclass
class CanonicalState:
    """The committed tables, the ledger, and each focus parent's contribution (for attribution targets)."""

    tables: dict[str, Table] = field(default_factory=dict)
    ledger: list[dict] = field(default_factory=list)
    contributions: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # child -> parent -> values
    params: dict[str, dict] = field(default_factory=dict)  # edge id -> parameters resolved in natural units

    def column(self, table: str, name: str) -> np.ndarray:
        return self.tables[table][name]

    def commit(self, outputs: dict[str, dict[str, np.ndarray]]) -> None:
        """Add new columns (never replace one) and freeze them."""
        for table, cols in outputs.items():
            current = dict(self.tables.get(table, {}))
            clash = set(cols) & set(current)
            if clash:
                raise RuntimeError(f"step would overwrite committed columns {sorted(clash)} of {table}")
            current.update({k: _frozen(v) for k, v in cols.items()})
            self.tables[table] = MappingProxyType(current)


class Grid:
    """Shapes and index maps between the three grains: unit (U,), panel (U, T), event (N,)."""

    def __init__(self, units: int, periods: int):
        self.units, self.periods = units, periods
        self.event_unit = np.zeros(0, dtype=np.int64)
        self.event_day = np.zeros(0, dtype=np.int64)

    def set_events(self, unit_idx: np.ndarray, day: np.ndarray) -> None:
        self.event_unit, self.event_day = unit_idx, day

    def shape(self, grain: str) -> tuple[int, ...]:
        return {"unit": (self.units,), "panel": (self.units, self.periods), "event": (len(self.event_unit),)}[grain]

    def time(self, grain: str) -> np.ndarray:
        if grain == "panel":
            return np.broadcast_to(np.arange(self.periods, dtype=float), self.shape("panel"))
        return self.event_day.astype(float)

    def align(self, values: np.ndarray, source: str, target: str, fill: float = 0.0) -> np.ndarray:
        """Move values from the source grain to the target grain (event -> panel averages per cell)."""
        if source == target:
            return values
        if source == "unit":
            return values[:, None] * np.ones(self.periods) if target == "panel" else values[self.event_unit]
        if source == "panel" and target == "event":
            return values[self.event_unit, self.event_day]
        if source == "event" and target == "panel":
            cells = self.event_unit * self.periods + self.event_day
            size = self.units * self.periods
            total = np.bincount(cells, weights=values, minlength=size)
            count = np.bincount(cells, minlength=size)
            # Cells without events carry the parent's nominal level, so they contribute nothing.
            mean = np.where(count > 0, total / np.maximum(count, 1), fill)
            return mean.reshape(self.units, self.periods)
        raise ValueError(f"cannot align {source} values to {target}")


def generate(
    contract: Contract,
    pack: DomainPack,
    rng_for_step: Callable[[int], np.random.Generator],
    seed_of: Callable[[int], dict],
) -> CanonicalState:
    """Run every step in order; `rng_for_step(k)` is step k's generator, `seed_of(k)` its ledger record."""
    state = CanonicalState()
    units = next(e for e in contract.entities if e.role == "unit").count
    grid = Grid(units, contract.timeline.periods)
    variables = {v.name: v for v in contract.variables}
    parents_of: dict[str, list[Edge]] = {v: [] for v in variables}
    for e in contract.edges:
        parents_of[e.child].append(e)
    _run_step(state, "entities", 0, seed_of(0), [], lambda: _entities(contract, pack, rng_for_step(0)))
    for layer, names in enumerate(contract.layers):
        step = layer + 1
        inputs = sorted({(_table(variables[e.parent]), e.parent) for n in names for e in parents_of[n]})

        def run(names=names, step=step) -> dict[str, dict[str, np.ndarray]]:
            rng = rng_for_step(step)
            outputs: dict[str, dict[str, np.ndarray]] = {}
            for name in names:
                v = variables[name]
                if v.grain == "event":
                    _ensure_events_in(outputs, state, grid)
                values = _draw(v, parents_of[name], variables, state, outputs, grid, contract, pack, rng)
                if v.role == "volume":
                    counts = rng.poisson(values).astype(np.int64)
                    outputs.setdefault("panel", {})[name] = counts.reshape(-1)
                    outputs["panel"][f"{name}_expected"] = values.reshape(-1)
                    outputs["events"] = _events(counts, contract, pack, grid, rng)
                else:
                    outputs.setdefault(_table(v), {})[name] = values.reshape(-1)
            return outputs

        _run_step(state, f"layer {layer}", step, seed_of(step), inputs, run, variables=names)
    return state


def _ensure_events_in(outputs: dict, state: CanonicalState, grid: Grid) -> None:
    if "events" not in outputs and "events" not in state.tables:
        raise RuntimeError("an event variable was scheduled before its events exist")


def _table(v: Variable) -> str:
    return {"unit": "units", "panel": "panel", "event": "events"}[v.grain]


def _run_step(
    state: CanonicalState, name: str, step: int, seed: dict, inputs: list[tuple[str, str]], run, variables=()
) -> None:
    before = {f"{t}.{c}": column_sha256(state.column(t, c)) for t, c in inputs}
    outputs = run()
    after = {f"{t}.{c}": column_sha256(state.column(t, c)) for t, c in inputs}
    state.commit(outputs)
    state.ledger.append(
        {
            "step": step,
            "name": name,
            "variables": list(variables),
            "seed": seed,
            "inputs": before,
            "outputs": {
                f"{t}.{c}": column_sha256(state.column(t, c))
                for t, cols in sorted(outputs.items())
                for c in sorted(cols)
            },
            "rows": {t: len(next(iter(state.tables[t].values()))) for t in sorted(outputs)},
            "params": {k: v for k, v in state.params.items() if k.split("->")[1] in variables},
            "checks": {"parents_unchanged": before == after, "outputs_new": True},
        }
    )


def _panel_keys(units: int, periods: int) -> dict[str, np.ndarray]:
    unit = np.repeat(np.arange(1, units + 1, dtype=np.int64), periods)
    day = np.tile(np.arange(periods, dtype=np.int64), units)
    return {"unit_id": unit, "day": day}


def _entities(contract: Contract, pack: DomainPack, rng: np.random.Generator) -> dict[str, dict[str, np.ndarray]]:
    ent = pack.entities
    n_units = next(e for e in contract.entities if e.role == "unit").count
    n_parties = next(e for e in contract.entities if e.role == "party").count
    fake = Faker("en_US")
    fake.seed_instance(int(rng.integers(2**31)))
    names: list[str] = []
    seen: set[str] = set()
    for i in range(n_units):
        name = _unit_name(fake, ent.unit.name_style, ent.unit.name, i)
        while name in seen:  # names must identify units within a system
            name = f"{name} {fake.city_suffix()}"
        seen.add(name)
        names.append(name)
    cap = ent.unit.capacity
    capacity = np.clip(np.round(rng.normal(cap.mean, cap.sd, n_units)), max(cap.min, 1), cap.max)
    regions = np.array(pack.regions, dtype=object)
    first = np.array(sorted(_faker_list(fake, "first_names")), dtype=object)
    last = np.array(sorted(_faker_list(fake, "last_names")), dtype=object)
    party_names = first[rng.integers(len(first), size=n_parties)] + " " + last[rng.integers(len(last), size=n_parties)]
    return {
        "units": {
            "unit_id": np.arange(1, n_units + 1, dtype=np.int64),
            "name": np.array(names, dtype=object),
            "region": regions[rng.integers(len(regions), size=n_units)],
            cap.name: capacity,
        },
        "parties": {
            "party_id": np.arange(1, n_parties + 1, dtype=np.int64),
            "name": party_names,
            "region": regions[rng.integers(len(regions), size=n_parties)],
            "signup_day": rng.integers(-720, contract.timeline.periods, size=n_parties).astype(np.int64),
        },
        "panel": _panel_keys(n_units, contract.timeline.periods),
    }


def _faker_list(fake: Faker, attr: str) -> list[str]:
    provider = next(p for p in fake.providers if hasattr(p, attr))
    values = getattr(provider, attr)
    return list(values.keys() if isinstance(values, dict) else values)


def _unit_name(fake: Faker, style: str, noun: str, i: int) -> str:
    match style:
        case "person":
            return fake.name()
        case "place":
            return f"{fake.city()} {noun.replace('_', ' ').title()}"
        case "code":
            return f"{noun.replace('_', ' ').title()} {fake.city()} {i + 1:03d}"
    return fake.company()


def _draw(
    v: Variable,
    edges: list[Edge],
    variables: dict[str, Variable],
    state: CanonicalState,
    outputs: dict,
    grid: Grid,
    contract: Contract,
    pack: DomainPack,
    rng: np.random.Generator,
) -> np.ndarray:
    """One variable on its grid: a root pattern, or mean + sum of edge contributions + noise."""
    if not edges:
        values = _root(v, grid, contract, rng)
        if v.dtype == "categorical":
            return values
    else:
        total = np.full(grid.shape(v.grain), v.mean)
        for e in sorted(edges, key=lambda e: e.parent):
            contribution = _contribution(e, v, variables, state, outputs, grid, pack, rng)
            state.contributions.setdefault(v.name, {})[e.parent] = contribution  # for targets and tolerances
            total = total + contribution
        values = total if v.role == "volume" else total + rng.normal(0, NOISE * v.sd, total.shape)
    lo = v.min if v.min is not None else -np.inf
    hi = v.max if v.max is not None else np.inf
    if v.role == "volume":
        lo = max(lo, 0.02)
    values = np.clip(values, lo, hi)
    if v.dtype == "count" and v.role != "volume":
        values = np.round(values)
    return values


def _lookup(name: str, variables: dict[str, Variable], state: CanonicalState, outputs: dict) -> np.ndarray:
    table = _table(variables[name])
    if table in outputs and name in outputs[table]:
        return outputs[table][name]
    return state.column(table, name)


def _grid_values(
    name: str, variables: dict[str, Variable], state: CanonicalState, outputs: dict, grid: Grid
) -> np.ndarray:
    v = variables[name]
    raw = _lookup(name, variables, state, outputs)
    if v.dtype == "categorical":
        return _codes(raw, v.levels)
    return raw.reshape(grid.units, grid.periods).astype(float) if v.grain == "panel" else raw.astype(float)


def _codes(raw: np.ndarray, levels: list[str]) -> np.ndarray:
    index = {lvl: i for i, lvl in enumerate(levels)}
    return np.array([index[x] for x in raw.tolist()], dtype=float)


def _realised(
    name: str,
    variables: dict[str, Variable],
    state: CanonicalState,
    outputs: dict,
    grid: Grid,
    seen_as: str | None = None,
) -> Scale:
    """A parent's realised location and spread as its child sees it (the scale its edge parameters use):
    an event parent of a panel child is seen through its unit-day means, which vary less than single events."""
    v = variables[name]
    if v.dtype == "categorical":
        return Scale(mean=0.0, sd=1.0, levels=tuple(v.levels))
    values = _grid_values(name, variables, state, outputs, grid)
    if v.grain == "event" and seen_as == "panel":
        values = grid.align(values, "event", "panel", fill=np.nan)
    sd = float(np.nanstd(values))
    return Scale(mean=float(np.nanmean(values)), sd=sd if sd > 0 else v.sd, binary=v.dtype == "binary")


def _contribution(
    e: Edge,
    child: Variable,
    variables: dict[str, Variable],
    state: CanonicalState,
    outputs: dict,
    grid: Grid,
    pack: DomainPack,
    rng: np.random.Generator,
) -> np.ndarray:
    parent = variables[e.parent]
    x = _grid_values(e.parent, variables, state, outputs, grid)
    extra: dict[str, Scale] = {}
    capacity = state.column("units", pack.entities.unit.capacity.name).astype(float)
    if e.kind == "interaction":
        extra["moderator"] = _realised(e.params["moderator"], variables, state, outputs, grid)
    if e.kind == "ratio":
        extra["denominator"] = Scale(mean=float(capacity.mean()), sd=float(capacity.std()) or 1.0)
    params = resolve_params(e, _realised(e.parent, variables, state, outputs, grid, child.grain), extra)
    state.params[f"{e.parent}->{e.child}"] = params
    mechanism = MECHANISMS[e.kind]
    center = float(params.get("center", parent.mean))
    if e.kind == "lag":
        panel_x = grid.align(x, parent.grain, "panel", fill=center)
        return grid.align(mechanism.apply({"x": panel_x}, params, rng), "panel", child.grain)
    inputs = {"x": grid.align(x, parent.grain, child.grain, fill=center)}
    if e.kind == "seasonal":
        inputs["t"] = grid.time(child.grain)
    if e.kind == "interaction":
        moderator = variables[params["moderator"]]
        m = _grid_values(moderator.name, variables, state, outputs, grid)
        inputs["moderator"] = grid.align(m, moderator.grain, child.grain, fill=params["moderator_center"])
    if e.kind == "ratio":
        inputs["denominator"] = grid.align(capacity, "unit", child.grain)
    return mechanism.apply(inputs, params, rng)


def _root(v: Variable, grid: Grid, contract: Contract, rng: np.random.Generator) -> np.ndarray:
    """Root patterns: static unit attributes, daily signals with a regime shift, or stepwise policies."""
    U, T = grid.units, grid.periods
    if v.grain == "unit":
        if v.dtype == "categorical":
            # Every level gets at least two units (when there are enough), so each level's shift is observable.
            k = len(v.levels)
            guaranteed = np.repeat(np.arange(k), 2)[: min(U, 2 * k)]
            probs = rng.dirichlet(np.full(k, 3.0))
            codes = np.concatenate([guaranteed, rng.choice(k, size=U - len(guaranteed), p=probs)])
            return np.array(v.levels, dtype=object)[rng.permutation(codes)]
        return rng.normal(v.mean, v.sd, U)
    if v.grain == "event":  # drawn per event: a unit level, a shift after the change day, event noise
        unit_level = v.mean + 0.4 * v.sd * rng.standard_normal(U)
        shift = rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.0) * v.sd
        late = grid.event_day >= contract.timeline.change_day
        base = unit_level[grid.event_unit] + np.where(late, shift, 0.0)
        return base + 0.6 * v.sd * rng.standard_normal(base.shape)
    change = contract.timeline.change_day + rng.integers(-10, 11, size=U)
    after = np.arange(T)[None, :] >= change[:, None]
    changed = rng.random(U) < rng.uniform(0.35, 0.75)
    direction = rng.choice([-1.0, 1.0])
    if v.dtype == "binary":
        p_before = np.clip(v.mean + direction * 0.25, 0.05, 0.95)
        p_after = np.clip(v.mean - direction * 0.25, 0.05, 0.95)
        if v.pattern == "policy":
            return _campaigns(U, T, after & changed[:, None], p_before, p_after, rng)
        return (rng.random((U, T)) < np.where(after, p_after, p_before)).astype(float)
    shift = direction * rng.uniform(0.8, 1.5) * v.sd
    if v.pattern == "policy":
        base = v.mean + 0.6 * v.sd * rng.standard_normal(U)
        level = base[:, None] + np.where(after & changed[:, None], shift, 0.0)
        # Managers also nudge the lever a few times a year (+-0.3 sd), which makes its effects identifiable.
        for _ in range(3):
            start = rng.integers(0, T, size=U)
            level = level + np.where(
                np.arange(T)[None, :] >= start[:, None], 0.3 * v.sd * rng.standard_normal(U)[:, None], 0.0
            )
        lo = v.min if v.min is not None else -np.inf
        hi = v.max if v.max is not None else np.inf
        return np.round(np.clip(level, lo, hi), v.decimals)
    unit_effect = 0.4 * v.sd * rng.standard_normal(U)[:, None]
    season = 0.4 * v.sd * np.sin(2 * np.pi * (np.arange(T) + rng.uniform(0, 365)) / 365.0)[None, :]
    noise = np.empty((U, T))
    noise[:, 0] = rng.standard_normal(U)
    shocks = rng.standard_normal((U, T)) * np.sqrt(1 - 0.7**2)
    for t in range(1, T):  # AR(1) over days; vectorised across units
        noise[:, t] = 0.7 * noise[:, t - 1] + shocks[:, t]
    regime = np.where(after & changed[:, None], 0.6 * shift, 0.0)
    return v.mean + unit_effect + season + 0.5 * v.sd * noise + regime


def _events(
    counts: np.ndarray, contract: Contract, pack: DomainPack, grid: Grid, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Expand per-cell counts into event rows with a party, a time of day and an amount."""
    flat = counts.reshape(-1)
    cells = np.repeat(np.arange(flat.size, dtype=np.int64), flat)
    unit_idx, day = cells // grid.periods, cells % grid.periods
    seconds = rng.integers(7 * 3600, 23 * 3600, size=cells.size)
    time = day * 86400 + seconds
    order = np.lexsort((unit_idx, time))
    unit_idx, day, time = unit_idx[order], day[order], time[order]
    grid.set_events(unit_idx, day)
    n_parties = next(e for e in contract.entities if e.role == "party").count
    loyalty = rng.gamma(0.6, 1.0, n_parties)  # a few frequent parties, a long tail of rare ones
    party = rng.choice(n_parties, size=cells.size, p=loyalty / loyalty.sum()) + 1
    amount = pack.entities.event.amount
    sigma = np.sqrt(np.log1p((amount.sd / amount.mean) ** 2))
    values = rng.lognormal(np.log(amount.mean) - sigma**2 / 2, sigma, cells.size)
    return {
        "event_id": np.arange(1, cells.size + 1, dtype=np.int64),
        "unit_id": unit_idx + 1,
        "party_id": party.astype(np.int64),
        "day": day,
        "time": time.astype(np.int64),
        amount.name: np.round(np.clip(values, amount.min, amount.max), 2),
    }


def grain_series(contract: Contract, state: CanonicalState, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A variable's values and their periods, on the grain an analyst would average (events or unit-days)."""
    v = next(x for x in contract.variables if x.name == name)
    if v.grain == "event":
        return state.column("events", name).astype(float), state.column("events", "day")
    return state.column("panel", name).astype(float), state.column("panel", "day")


def seal(contract: Contract, state: CanonicalState) -> Contract:
    """Fill what depends on realised data (resolved parameters, targets, counts) and mark C sealed."""
    sealed = contract.model_copy(deep=True)
    for edge in sealed.edges:
        edge.params = state.params[f"{edge.parent}->{edge.child}"]
        edge.note = (
            f"{edge.note}: {describe(edge.kind, edge.params)}" if edge.note else describe(edge.kind, edge.params)
        )
    half = contract.timeline.periods // 2
    sd = {v.name: v.sd for v in contract.variables}
    keep = []
    for ph in sealed.phenomena:
        if ph.kind == "period_change":
            if ph.column is not None:  # a measure outside the DAG, e.g. the event amount
                table, column = ph.column.split(".", 1)
                values, day = state.column(table, column).astype(float), state.column(table, "day")
            else:
                values, day = grain_series(contract, state, ph.variables[0])
            a, b = float(values[day < half].mean()), float(values[day >= half].mean())
            ph.target = round((b - a) / a, 6) if a else 0.0
            ph.description += f" (H1 mean {a:.4g}, H2 mean {b:.4g})"
        elif ph.kind == "attribution":
            parent, child = ph.variables
            deltas = _deltas(state.contributions[child], grain_series(contract, state, child)[1], half)
            total = sum(deltas.values())
            # Shares are only a finding when the change is material and its drivers do not largely cancel
            # (otherwise "explains 500% of the change" is noise over noise).
            if abs(total) < 0.1 * sd[child] or sum(abs(d) for d in deltas.values()) > 1.5 * abs(total):
                continue
            ph.target = round(deltas[parent] / total, 6)
        keep.append(ph)
    errors = _standard_errors(sealed, state)
    for ph in keep:  # a share is only as precise as the effects it is computed from
        se = errors.get(f"share:{ph.variables[0]}->{ph.variables[1]}") if ph.kind == "attribution" else None
        if se is not None and np.isfinite(se):
            ph.tolerance = max(ph.tolerance, round(3 * se, 6))
    sealed.phenomena = edge_phenomena(sealed, errors) + keep
    for entity in sealed.entities:
        entity.count = len(state.column(entity.table, entity.key))
    sealed.sealed = True
    validate_contract(sealed)
    return sealed


def _standard_errors(contract: Contract, state: CanonicalState) -> dict[str, float]:
    """Standard errors of each edge's effect size and of each attribution share, as the data allow them.

    The child is regressed on its parents' true contributions (coefficient 1 each), with a categorical
    parent expanded into one column per level as an analyst must estimate it. A column's standard error,
    scaled by the planted effect, is the precision of that effect; shares get theirs by the delta method.
    """
    out: dict[str, float] = {}
    variables = {v.name: v for v in contract.variables}
    edges = {(e.parent, e.child): e for e in contract.edges}
    half = contract.timeline.periods // 2
    for child, contributions in state.contributions.items():
        v = variables[child]
        y = state.column(_table(v), child).astype(float).reshape(-1)
        day = grain_series(contract, state, child)[1]
        parents = sorted(contributions)
        columns, owner = [np.ones_like(y)], [None]
        for parent in parents:
            c = contributions[parent].reshape(-1)
            if edges[(parent, child)].kind == "categorical":
                for value in np.unique(c)[1:]:
                    columns.append((c == value).astype(float))
                    owner.append(parent + "#level")
            else:
                columns.append(c)
                owner.append(parent)
        X = np.column_stack(columns)
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
        level_cols = {}
        for j, name in enumerate(owner):
            if name is None:
                continue
            if name.endswith("#level"):
                level_cols.setdefault(name[:-6], []).append(j)
                continue
            size = _effect_size(edges[(name, child)])
            if size is not None:
                out[f"{name}->{child}"] = float(np.sqrt(max(cov[j, j], 0.0)) * abs(size))
        for parent, cols in level_cols.items():  # a level-shift range: the noisiest level's error, twice over
            out[f"{parent}->{child}"] = float(2 * np.sqrt(max(cov[j, j] for j in cols)))
        # Shares: s_p = D_p / sum D with D_p = b_p d_p (b_p = 1 for the true model); delta method on b.
        single = [(j, name) for j, name in enumerate(owner) if name is not None and not name.endswith("#level")]
        if not single:
            continue
        d = np.array([float(X[ok & (day >= half), j].mean() - X[ok & (day < half), j].mean()) for j, _ in single])
        total = d.sum()
        if abs(total) < 1e-12:
            continue
        sub = cov[np.ix_([j for j, _ in single], [j for j, _ in single])]
        for k, (_, name) in enumerate(single):
            grad = -d[k] * d / total**2
            grad[k] += d[k] / total
            out[f"share:{name}->{child}"] = float(np.sqrt(max(grad @ sub @ grad, 0.0)))
    return out


def _effect_size(e: Edge) -> float | None:
    p = e.params
    if e.kind in ("monotone", "ratio", "interaction"):
        return p["beta"]
    if e.kind == "categorical":
        return max(p["shifts"].values()) - min(p["shifts"].values())
    return None


def _deltas(contributions: dict[str, np.ndarray], day: np.ndarray, half: int) -> dict[str, float]:
    out = {}
    for parent, contribution in contributions.items():
        flat = contribution.reshape(-1)
        out[parent] = float(flat[day >= half].mean() - flat[day < half].mean())
    return out


def _campaigns(
    U: int, T: int, late: np.ndarray, p_before: float, p_after: float, rng: np.random.Generator
) -> np.ndarray:
    """On/off campaign windows per unit; the share of time on moves from p_before to p_after where `late`."""
    out = np.zeros((U, T))
    for u in range(U):
        t, on = int(rng.integers(0, 30)), bool(rng.random() < p_before)
        while t < T:
            p = p_after if late[u, min(t, T - 1)] else p_before
            length = int(rng.integers(10, 40))
            out[u, t : t + length] = float(on)
            t += length
            on = bool(rng.random() < p)
    return out

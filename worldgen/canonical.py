"""Draft contract -> canonical state X, layer by layer, with a hashed ledger.

Step 0 draws the entities (units, parties). Step l+1 draws every variable of generation layer l from its
parents, which are read-only arrays by then; the volume variable's step also realises the event table,
one row per event. Each step has its own seed stream, commits its outputs at once into a new state and
appends a ledger record: sha256 of every input and output column, the seed, row counts and checks that
parents were left untouched. X is the hidden truth: analysts only ever see its projection.

The contract is the only input: each edge's parameters are resolved from its draw (seed and effect scale)
against the parent's realised scale (`mechanisms.resolve`), and kept in the state with every contribution
so that `worldgen/phenomena.py` can seal the contract afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from contracts.hashing import column_sha256
from contracts.model import Contract, Edge, Variable
from worldgen.entities import draw_entities, draw_events
from worldgen.grid import Grid
from worldgen.mechanisms import MECHANISMS, Scale, resolve
from worldgen.roots import draw_root
from worldgen.seeding import Streams

Table = MappingProxyType  # read-only mapping of column name -> read-only array
Outputs = dict[str, dict[str, np.ndarray]]  # table -> column -> values committed by one step
NOISE = 0.3  # child noise sd as a share of the child's nominal sd: effects stay visible above it
MIN_VOLUME_RATE = 0.02  # a Poisson rate is never zero, so every unit-day could see an event


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr = np.ascontiguousarray(arr)
    arr.flags.writeable = False
    return arr


@dataclass
class CanonicalState:
    """The committed tables, the ledger, each child's per-parent contributions and each edge's parameters."""

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

    def run_step(
        self, name: str, seed: dict, inputs: list[tuple[str, str]], run: Callable[[], Outputs], variables=()
    ) -> None:
        """Run one step, commit its outputs and append its ledger record (hashes of inputs before and after)."""
        before = {f"{t}.{c}": column_sha256(self.column(t, c)) for t, c in inputs}
        outputs = run()
        after = {f"{t}.{c}": column_sha256(self.column(t, c)) for t, c in inputs}
        self.commit(outputs)
        self.ledger.append(
            {
                "step": len(self.ledger),
                "name": name,
                "variables": list(variables),
                "seed": seed,
                "inputs": before,
                "outputs": {
                    f"{t}.{c}": column_sha256(self.column(t, c))
                    for t, cols in sorted(outputs.items())
                    for c in sorted(cols)
                },
                "rows": {t: len(next(iter(self.tables[t].values()))) for t in sorted(outputs)},
                "params": {k: v for k, v in self.params.items() if k.split("->")[1] in variables},
                "checks": {"parents_unchanged": before == after, "outputs_new": True},
            }
        )


def table_of(v: Variable) -> str:
    return {"unit": "units", "panel": "panel", "event": "events"}[v.grain]


@dataclass
class Step:
    """What drawing one layer needs: the contract, the committed state, this step's outputs so far, the rng."""

    contract: Contract
    state: CanonicalState
    grid: Grid
    rng: np.random.Generator
    outputs: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

    def lookup(self, name: str) -> np.ndarray:
        table = table_of(self.contract.variable(name))
        if table in self.outputs and name in self.outputs[table]:
            return self.outputs[table][name]
        return self.state.column(table, name)

    def grid_values(self, name: str) -> np.ndarray:
        v = self.contract.variable(name)
        raw = self.lookup(name)
        if v.dtype == "categorical":
            return _codes(raw, v.levels)
        return (
            raw.reshape(self.grid.units, self.grid.periods).astype(float) if v.grain == "panel" else raw.astype(float)
        )

    def realised(self, name: str, seen_as: str | None = None) -> Scale:
        """A parent's realised location and spread as its child sees it (the scale its edge parameters use):
        an event parent of a panel child is seen through its unit-day means, which vary less than single events."""
        v = self.contract.variable(name)
        if v.dtype == "categorical":
            return Scale(mean=0.0, sd=1.0, levels=tuple(v.levels))
        values = self.grid_values(name)
        if v.grain == "event" and seen_as == "panel":
            values = self.grid.align(values, "event", "panel", fill=np.nan)
        sd = float(np.nanstd(values))
        return Scale(mean=float(np.nanmean(values)), sd=sd if sd > 0 else v.sd, binary=v.dtype == "binary")

    def capacity(self) -> np.ndarray:
        return self.state.column("units", self.contract.measures.capacity.name).astype(float)


def generate(contract: Contract, streams: Streams) -> CanonicalState:
    """Run every step in order; step k draws from `streams.rng("canonical", k)`."""
    state = CanonicalState()
    grid = Grid(contract.entity("unit").count, contract.timeline.periods)
    parents_of: dict[str, list[Edge]] = {v.name: [] for v in contract.variables}
    for e in contract.edges:
        parents_of[e.child].append(e)
    state.run_step(
        "entities", streams.record("canonical", 0), [], lambda: draw_entities(contract, streams.rng("canonical", 0))
    )
    for layer, names in enumerate(contract.layers):
        step = layer + 1
        parents = {(table_of(contract.variable(e.parent)), e.parent) for n in names for e in parents_of[n]}

        def run(names=names, step=step) -> dict[str, dict[str, np.ndarray]]:
            ctx = Step(contract, state, grid, streams.rng("canonical", step))
            for name in names:
                _draw_into(ctx, contract.variable(name), parents_of[name])
            return ctx.outputs

        state.run_step(f"layer {layer}", streams.record("canonical", step), sorted(parents), run, names)
    return state


def _draw_into(ctx: Step, v: Variable, edges: list[Edge]) -> None:
    """Draw one variable and put it (and, for the volume, its events) into the step's outputs."""
    if v.grain == "event" and "events" not in ctx.outputs and "events" not in ctx.state.tables:
        raise RuntimeError("an event variable was scheduled before its events exist")
    values = _draw(ctx, v, edges)
    if v.role == "volume":
        counts = ctx.rng.poisson(values).astype(np.int64)
        ctx.outputs.setdefault("panel", {})[v.name] = counts.reshape(-1)
        ctx.outputs["panel"][f"{v.name}_expected"] = values.reshape(-1)
        ctx.outputs["events"] = draw_events(counts, ctx.contract, ctx.grid, ctx.rng)
    else:
        ctx.outputs.setdefault(table_of(v), {})[v.name] = values.reshape(-1)


def _codes(raw: np.ndarray, levels: list[str]) -> np.ndarray:
    index = {lvl: i for i, lvl in enumerate(levels)}
    return np.array([index[x] for x in raw.tolist()], dtype=float)


def _draw(ctx: Step, v: Variable, edges: list[Edge]) -> np.ndarray:
    """One variable on its grid: a root pattern, or mean + sum of edge contributions + noise."""
    if not edges:
        values = draw_root(v, ctx.grid, ctx.contract, ctx.rng)
        if v.dtype == "categorical":
            return values
    else:
        total = np.full(ctx.grid.shape(v.grain), v.mean)
        for e in sorted(edges, key=lambda e: e.parent):
            contribution = _contribution(ctx, e, v)
            ctx.state.contributions.setdefault(v.name, {})[e.parent] = contribution  # for targets and tolerances
            total = total + contribution
        values = total if v.role == "volume" else total + ctx.rng.normal(0, NOISE * v.sd, total.shape)
    lo = v.min if v.min is not None else -np.inf
    hi = v.max if v.max is not None else np.inf
    if v.role == "volume":
        lo = max(lo, MIN_VOLUME_RATE)
    values = np.clip(values, lo, hi)
    if v.dtype == "count" and v.role != "volume":
        values = np.round(values)
    return values


def _contribution(ctx: Step, e: Edge, child: Variable) -> np.ndarray:
    """One edge's contribution to its child, on the child's grain, with parameters resolved now."""
    parent = ctx.contract.variable(e.parent)
    mechanism = MECHANISMS[e.kind]
    grid = ctx.grid
    x = ctx.grid_values(e.parent)
    extra: dict[str, Scale] = {}
    if "moderator" in mechanism.inputs:
        extra["moderator"] = ctx.realised(e.params["moderator"])
    if "denominator" in mechanism.inputs:
        capacity = ctx.capacity()
        extra["denominator"] = Scale(mean=float(capacity.mean()), sd=float(capacity.std()) or 1.0)
    params = {**e.params, **resolve(e.kind, e.draw, e.sign, ctx.realised(e.parent, child.grain), extra)}
    ctx.state.params[f"{e.parent}->{e.child}"] = params
    center = float(params.get("center", parent.mean))
    if "panel" in mechanism.inputs:  # the mechanism works on the parent's daily panel (a lag shifts days)
        panel_x = grid.align(x, parent.grain, "panel", fill=center)
        return grid.align(mechanism.apply({"x": panel_x}, params, ctx.rng), "panel", child.grain)
    inputs = {"x": grid.align(x, parent.grain, child.grain, fill=center)}
    if "t" in mechanism.inputs:
        inputs["t"] = grid.time(child.grain)
    if "moderator" in mechanism.inputs:
        moderator = ctx.contract.variable(params["moderator"])
        m = ctx.grid_values(moderator.name)
        inputs["moderator"] = grid.align(m, moderator.grain, child.grain, fill=params["moderator_center"])
    if "denominator" in mechanism.inputs:
        inputs["denominator"] = grid.align(ctx.capacity(), "unit", child.grain)
    return mechanism.apply(inputs, params, ctx.rng)


def grain_series(contract: Contract, state: CanonicalState, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A variable's values and their periods, on the grain an analyst would average (events or unit-days)."""
    v = contract.variable(name)
    if v.grain == "event":
        return state.column("events", name).astype(float), state.column("events", "day")
    return state.column("panel", name).astype(float), state.column("panel", "day")

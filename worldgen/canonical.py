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

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from contracts.calendar import levels
from contracts.hashing import column_sha256
from contracts.model import Contract, Edge, Variable, structural_edges
from worldgen.entities import Unnamed, draw_entities, draw_unnamed, event_columns, name_entities, place_events
from worldgen.grid import Grid
from worldgen.mechanisms import MECHANISMS, Scale, resolve
from worldgen.observation import nan_mean_sd, report, respond
from worldgen.roots import draw_root, trend_push
from worldgen.seeding import Streams

Table = MappingProxyType  # read-only mapping of column name -> read-only array
Outputs = dict[str, dict[str, np.ndarray]]  # table -> column -> values committed by one step
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
    inputs: dict[str, np.ndarray] = field(default_factory=dict)  # edge id -> parent as the mechanism saw it
    digests: dict[str, str] = field(default_factory=dict)  # "table.column" -> sha256 when it was committed
    # A committed variable's realised scale as a child sees it, by (name, seen through unit-day means): a
    # parent of several children is asked once (its columns are frozen, the events fixed once drawn).
    scales: dict[tuple[str, bool], Scale] = field(default_factory=dict, repr=False, compare=False)
    # A trend probe's steps drawn whole (every variable in full, no events): step -> its outputs, which the
    # full draw of the same attempt takes as they are (`generate`'s `probed`).
    whole: dict[int, Outputs] = field(default_factory=dict, repr=False, compare=False)
    # A trend probe's steps it stopped after the events' keys (every variable before them in full): step ->
    # the step as it stopped (its outputs, stream and placed events), where the full draw goes on from.
    stopped: dict[int, Step] = field(default_factory=dict, repr=False, compare=False)
    # A trend probe's other steps that begin with variables drawn in full (before a ghost, before events
    # drawn only for their draws, or before the step's last needed variable ends the probe's draws): step ->
    # (how many, the step as it was after them: its outputs and stream), where the full draw goes on from.
    begun: dict[int, tuple[int, Step]] = field(default_factory=dict, repr=False, compare=False)
    # A trend probe's entities (step 0) as drawn, names left empty: the full draw of the same attempt names
    # them instead of drawing them again (names take no draw of the step's stream).
    unnamed: Unnamed | None = field(default=None, repr=False, compare=False)

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
        """Run one step, commit its outputs and append its ledger record (hashes of inputs before and after).
        An input's hash before is the one taken when it was committed (the same bytes: committed columns are
        frozen); after the step it is hashed again, so the check covers everything since the commit."""
        before = {f"{t}.{c}": self.digests[f"{t}.{c}"] for t, c in inputs}
        outputs = run()
        after = {f"{t}.{c}": column_sha256(self.column(t, c)) for t, c in inputs}
        self.commit(outputs)
        digests = {
            f"{t}.{c}": column_sha256(self.column(t, c)) for t, cols in sorted(outputs.items()) for c in sorted(cols)
        }
        self.digests.update(digests)
        self.ledger.append(
            {
                "step": len(self.ledger),
                "name": name,
                "variables": list(variables),
                "seed": seed,
                "inputs": before,
                "outputs": digests,
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
    event_detail: str = "full"  # a trend probe's events: "draws" or "keys" (see `probe`, `draw_events`)
    placed: tuple | None = None  # the events' units, days and times once placed (`place_events`)
    pushes: dict[str, float] = field(default_factory=dict)  # the root carrying the trend (`trend_push`)
    # A probe's step going on past its events ("draws"): the step as it was once they were placed.
    keyed: Step | None = None

    def here(self) -> Step:
        """The step as it is now, kept apart from it (its outputs and stream copied)."""
        outputs = {table: dict(columns) for table, columns in self.outputs.items()}
        return Step(self.contract, self.state, self.grid, copy.deepcopy(self.rng), outputs, placed=self.placed)

    def lookup(self, table: str, name: str) -> np.ndarray:
        if table in self.outputs and name in self.outputs[table]:
            return self.outputs[table][name]
        return self.state.column(table, name)

    @property
    def is_open(self) -> np.ndarray:
        return self.state.column("panel", "open").reshape(self.grid.units, self.grid.periods).astype(bool)

    def grid_values(self, name: str) -> np.ndarray:
        """A variable on its grid as children see it: closed unit-days (no activity) are missing."""
        v = self.contract.variable(name)
        raw = self.lookup(table_of(v), name)
        if v.dtype == "categorical":
            return _codes(raw, v.levels)
        if v.grain != "panel":
            return raw.astype(float)
        values = raw.reshape(self.grid.units, self.grid.periods).astype(float)
        return np.where(self.is_open, values, np.nan) if v.role == "volume" else values

    def realised(self, name: str, seen_as: str | None = None) -> Scale:
        """A parent's realised location and spread as its child sees it (the scale its edge parameters use):
        an event parent of a panel child is seen through its unit-day means, which vary less than single events."""
        v = self.contract.variable(name)
        if v.dtype == "categorical":
            return Scale(mean=0.0, sd=1.0, levels=tuple(v.levels))
        key = (name, v.grain == "event" and seen_as == "panel")
        committed = name not in self.outputs.get(table_of(v), {})
        if committed and key in self.state.scales:
            return self.state.scales[key]
        values = self.grid_values(name)
        if key[1]:
            values = self.grid.align(values, "event", "panel", fill=np.nan)
        mean, sd = nan_mean_sd(values)
        scale = Scale(mean=mean, sd=sd if sd > 0 else v.sd, binary=v.dtype == "binary")
        if committed:
            self.state.scales[key] = scale
        return scale

    def capacity(self) -> np.ndarray:
        return self.state.column("units", self.contract.measures.capacity.name).astype(float)


def generate(
    contract: Contract, streams: Streams, attempt: int = 0, probed: CanonicalState | None = None
) -> CanonicalState:
    """Run every step in order; step k of attempt a draws from `streams.rng("canonical", a, k)`. `probed`:
    this attempt's trend probe, whose whole steps (and entities, then named) are taken instead of drawn
    again (the same draws)."""
    state = CanonicalState()
    for _ in steps(contract, streams, attempt, state, probed):
        pass
    return state


def steps(
    contract: Contract, streams: Streams, attempt: int, state: CanonicalState, probed: CanonicalState | None = None
) -> Iterator[int]:
    """`generate` into `state` one step at a time, yielding each layer once it is committed (-1: the
    entities). Every step has its own stream and never changes what earlier steps committed, so a caller may
    stop after any layer and judge what is drawn so far as the finished state will have it."""
    grid = Grid(contract.entity("unit").count, contract.timeline.periods)
    parents_of = _parents_of(contract)
    pushes = trend_push(contract, streams.rng("trend", attempt))
    if probed is not None and probed.unnamed is not None:
        entities = lambda: name_entities(contract, probed.unnamed)  # noqa: E731
    else:
        entities = lambda: draw_entities(contract, streams.rng("canonical", attempt, 0))  # noqa: E731
    state.run_step("entities", streams.record("canonical", attempt, 0), [], entities)
    yield -1
    for layer, names in enumerate(contract.layers):
        step = layer + 1
        parents = {(table_of(contract.variable(e.parent)), e.parent) for n in names for e in parents_of[n]}

        def run(names=names, step=step) -> Outputs:
            if probed is not None and step in probed.whole:
                return _taken(state, probed, names, step)
            ctx = Step(contract, state, grid, streams.rng("canonical", attempt, step), pushes=pushes)
            todo = names
            if probed is not None and step in probed.stopped:
                todo = _went_on(ctx, probed, names, step)
            elif probed is not None and step in probed.begun:
                todo = _resumed(ctx, probed, names, step)
            for name in todo:
                _draw_into(ctx, contract.variable(name), parents_of[name])
            return ctx.outputs

        state.run_step(f"layer {layer}", streams.record("canonical", attempt, step), sorted(parents), run, names)
        yield layer


def probe(contract: Contract, streams: Streams, attempt: int, upto: int, target: str) -> CanonicalState:
    """`target` (the persona's focus) as attempt `attempt` draws it, bit for bit, by drawing only what it
    depends on through layer `upto`: enough to judge the trend of an attempt that will most likely be
    thrown away, at a fraction of its cost. No ledger, no hashes, no names (Faker has its own generator).
    A step's variables share its stream in order, so a variable drawn before a needed one in its step is
    still drawn; those after the last needed one are not; one whose draws do not depend on its values
    only makes its draws (`_draw_ghost`); and the events skip the columns no draw depends on, or every
    draw after their keys when nothing after them in their step draws from the stream (`draw_events`'s
    detail). Steps past `upto` cannot change the target."""
    needed, ghosts = _needed(contract, target, upto)
    state = CanonicalState()
    grid = Grid(contract.entity("unit").count, contract.timeline.periods)
    parents_of = _parents_of(contract)
    pushes = trend_push(contract, streams.rng("trend", attempt))
    state.unnamed = draw_unnamed(contract, streams.rng("canonical", attempt, 0))
    state.commit(state.unnamed.tables)
    for layer, names in enumerate(contract.layers[: upto + 1]):
        drawn = [name for name in names if name in needed or name in ghosts]  # a prefix of the step's names
        if not drawn:
            continue  # every step has its own stream: skipping one moves no other step's draws
        ctx = Step(contract, state, grid, streams.rng("canonical", attempt, layer + 1), pushes=pushes)
        ctx.event_detail = "keys" if contract.variable(drawn[-1]).role == "volume" else "draws"
        begun = _draw_probe_step(ctx, drawn, ghosts, parents_of)
        state.commit(ctx.outputs)
        volume = any(contract.variable(name).role == "volume" for name in names)  # events' details left out
        if len(drawn) == len(names) and not ghosts.intersection(names) and not volume:
            state.whole[layer + 1] = ctx.outputs  # every output as the full draw makes it
        elif begun is not None and begun[1].placed is not None:
            state.stopped[layer + 1] = begun[1]  # every draw up to the events' keys as the full draw makes it
        elif begun is not None:
            state.begun[layer + 1] = begun
    return state


def _draw_probe_step(ctx: Step, drawn: list[str], ghosts: set[str], parents_of: dict) -> tuple[int, Step] | None:
    """Draw a probe's step (its variables `drawn`, ghosts only for their draws). The step as it was after
    the variables it begins with that are drawn in full, as the full draw draws them (none after a ghost,
    whose outputs are stand-ins; events drawn only for their draws as far as their keys, with the events
    placed), with how many they are; None if it begins with none."""
    full = 0  # how many variables at the start of the step are drawn in full, while they are
    begun = None
    for name in drawn:
        v = ctx.contract.variable(name)
        if begun is None and name in ghosts:
            begun = (full, ctx.here())
        if name in ghosts:
            _draw_ghost(ctx, v)
        else:
            _draw_into(ctx, v, parents_of[name])
        if begun is None and ctx.keyed is not None:  # the events' other columns left out from here
            begun = (full + 1, ctx.keyed)
        full += begun is None
    if begun is None:  # every variable drawn in full: the step as it is
        begun = (full, ctx)
    return begun if begun[0] else None


def _resumed(ctx: Step, probed: CanonicalState, names: list[str], step: int) -> list[str]:
    """Step `step` taken as far as its probe drew it in full (`CanonicalState.begun`): the variables it
    begins with as drawn, with what drawing them records besides (`_recorded`), and the stream where the
    probe was after them, as the full draw has it there. The variables left to draw."""
    count, begun = probed.begun[step]
    ctx.outputs = {table: dict(columns) for table, columns in begun.outputs.items()}
    ctx.rng = copy.deepcopy(begun.rng)  # the probe's own stays where it was
    _recorded(ctx.state, probed, names[:count])
    return names[count:]


def _went_on(ctx: Step, probed: CanonicalState, names: list[str], step: int) -> list[str]:
    """Step `step` taken up to where its probe stopped, after the events' keys: its variables up to the
    volume as drawn (`_taken`), the stream where the probe left it, the events placed as it placed them and
    given their other columns now, as the full draw gives them from there. The variables left to draw."""
    stopped = probed.stopped[step]
    drawn = names[: 1 + next(k for k, name in enumerate(names) if ctx.contract.variable(name).role == "volume")]
    ctx.outputs = {table: dict(columns) for table, columns in stopped.outputs.items()}
    ctx.rng = copy.deepcopy(stopped.rng)  # the probe's own stays where it stopped
    ctx.placed = stopped.placed
    ctx.grid.set_events(ctx.placed[0], ctx.placed[1])
    ctx.outputs["events"] = event_columns(ctx.contract, ctx.state.tables, ctx.rng, ctx.placed)
    _recorded(ctx.state, probed, drawn)
    return names[len(drawn) :]


def _taken(state: CanonicalState, probed: CanonicalState, names: list[str], step: int) -> Outputs:
    """Step `step` (its variables `names`) as the probe of the same attempt drew it whole: the same draws
    from the same stream on the same parents, with what drawing them records besides (`_recorded`)."""
    _recorded(state, probed, names)
    return probed.whole[step]


def _recorded(state: CanonicalState, probed: CanonicalState, names: list[str]) -> None:
    """What drawing the variables `names` records besides their outputs, as the probe recorded it, in the
    order drawing records it: each edge's parameters and the input its mechanism saw, each child's
    contributions."""
    drawn = set(names)
    state.params.update((edge, p) for edge, p in probed.params.items() if edge.split("->")[1] in drawn)
    state.inputs.update((edge, x) for edge, x in probed.inputs.items() if edge.split("->")[1] in drawn)
    state.contributions.update((child, parts) for child, parts in probed.contributions.items() if child in drawn)


def _parents_of(contract: Contract) -> dict[str, list[Edge]]:
    parents_of: dict[str, list[Edge]] = {v.name: [] for v in contract.variables}
    for e in contract.edges:
        parents_of[e.child].append(e)
    return parents_of


def _needed(contract: Contract, target: str, upto: int) -> tuple[set[str], set[str]]:
    """What a probe of `target` draws: (in full, only the draws of: its ghosts). In full: the target and
    every variable it is drawn from (causal parents, an interaction's moderator among them, the volume of an
    event variable, the count holding a rate's trials), and so on. A variable before one of those in its
    step moves the step's stream, so it is drawn too: a ghost when its draws do not depend on its values
    (`_ghostly`; an event variable's still need the events, so the volume is drawn in full), else in full.
    Until nothing is added."""
    parents: dict[str, set[str]] = {v.name: set() for v in contract.variables}
    for parent, child in [(e.parent, e.child) for e in contract.edges] + structural_edges(contract.variables):
        parents[child].add(parent)
    derived = {e.child for e in contract.edges}
    volume = next((v.name for v in contract.variables if v.role == "volume"), None)
    needed: set[str] = set()
    ghosts: set[str] = set()
    todo = [target]
    while todo:
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(parents[name])
        ghosts = set()
        for names in contract.layers[: upto + 1]:
            last = max((k for k, name in enumerate(names) if name in needed), default=-1)
            for name in (name for name in names[:last] if name not in needed):
                v = contract.variable(name)
                if name in derived and _ghostly(v):
                    ghosts.add(name)
                    todo.extend([volume] if v.grain == "event" and volume not in needed else [])
                else:
                    todo.append(name)
    return needed, ghosts


def _ghostly(v: Variable) -> bool:
    """Whether a derived variable's draws are the same whatever its values (only their shape counts): all
    but the volume's Poisson counts and a reported count's or rate's Poisson or binomial draws, which take
    as many of the stream's words as their means ask."""
    return v.role != "volume" and not (_reports(v, derived=True) and v.observe in ("count", "rate"))


def _draw_ghost(ctx: Step, v: Variable) -> None:
    """The draws `_draw_into` makes for a derived variable `_ghostly` says draws the same whatever its values,
    made on a stand-in level (its parents are not drawn, its contributions not worked out), and dropped:
    the stream moves on exactly as the full draw moves it. Its latent level draws nothing (mechanisms are
    pure functions; their parameters come from each edge's own seed)."""
    latent = np.zeros(ctx.grid.shape(v.grain))
    _reported(ctx, v, latent, True)
    if v.observe == "scale":
        respond(v, latent, ctx.rng)


def _draw_into(ctx: Step, v: Variable, edges: list[Edge]) -> None:
    """Draw one variable and put it (and, for the volume, its events) into the step's outputs."""
    if v.grain == "event" and "events" not in ctx.outputs and "events" not in ctx.state.tables:
        raise RuntimeError("an event variable was scheduled before its events exist")
    latent = _latent(ctx, v, edges)
    if v.role == "volume":
        lo = max(v.min if v.min is not None else 0.0, MIN_VOLUME_RATE)
        nominal = np.clip(latent, lo, v.max if v.max is not None else np.inf)  # the range is a nominal day's
        level = levels(ctx.contract.calendar, ctx.contract.timeline.start, ctx.grid.periods)
        rate = np.where(ctx.is_open, nominal * level[None, :], 0.0)
        counts = ctx.rng.poisson(rate).astype(np.int64)
        ctx.outputs.setdefault("panel", {})[v.name] = counts.reshape(-1)
        ctx.outputs["panel"][f"{v.name}_expected"] = rate.reshape(-1)
        ctx.placed = place_events(counts, ctx.contract, ctx.grid, ctx.rng)
        if ctx.event_detail == "draws":  # a probe that goes on: where the full draw of its attempt could too
            ctx.keyed = ctx.here()
        ctx.outputs["events"] = event_columns(ctx.contract, ctx.state.tables, ctx.rng, ctx.placed, ctx.event_detail)
        return
    values = _reported(ctx, v, latent, bool(edges))
    if v.observe == "scale":
        ctx.outputs.setdefault("events", {})[f"responded_{v.name}"] = respond(v, latent, ctx.rng).astype(np.int8)
    ctx.outputs.setdefault(table_of(v), {})[v.name] = values.reshape(-1)


def _reported(ctx: Step, v: Variable, latent: np.ndarray, derived: bool) -> np.ndarray:
    """The reported values: levers, flags and external series as drawn; everything else through its
    observation model; all clipped to the variable's range; derived daily values exist on open days only."""
    if v.dtype == "categorical":
        return latent
    values = latent
    if _reports(v, derived):
        trials = np.nan_to_num(ctx.grid_values(v.denominator)) if v.denominator else None
        values = report(v, latent, ctx.rng, trials=trials, is_open=ctx.is_open if v.grain == "panel" else None)
    lo = v.min if v.min is not None else -np.inf
    hi = v.max if v.max is not None else np.inf
    values = np.clip(values, lo, hi)
    if v.dtype == "count" and v.observe not in ("rate", "rolling"):
        values = np.round(values)
    if v.grain == "panel" and derived:
        values = np.where(ctx.is_open, values, np.nan)
    return values


def _reports(v: Variable, derived: bool) -> bool:
    """Whether `_reported` puts `v` through its observation model (which draws): not a category, a flag, a
    lever or an external series, nor a root reported as its value."""
    exact = v.dtype in ("categorical", "binary") or v.pattern == "policy" or v.scope != "unit"
    return not exact and (derived or v.observe != "value")


def _codes(raw: np.ndarray, levels: list[str]) -> np.ndarray:
    index = {lvl: i for i, lvl in enumerate(levels)}
    return np.array([index[x] for x in raw.tolist()], dtype=float)


def _latent(ctx: Step, v: Variable, edges: list[Edge]) -> np.ndarray:
    """One variable's level on its grid: a root pattern, or mean + sum of edge contributions (the volume's on
    a nominal day; the calendar scales it in `_draw_into`). Observation noise comes after, in `_reported`."""
    if not edges:
        region = ctx.state.column("units", "region")
        total = draw_root(v, ctx.grid, ctx.contract, ctx.rng, region, ctx.pushes.get(v.name))
    else:
        total = np.full(ctx.grid.shape(v.grain), v.mean)
        for e in sorted(edges, key=lambda e: e.parent):
            contribution = _contribution(ctx, e, v)
            ctx.state.contributions.setdefault(v.name, {})[e.parent] = contribution  # for targets and tolerances
            total = total + contribution
    return total


def _contribution(ctx: Step, e: Edge, child: Variable) -> np.ndarray:
    """One edge's contribution to its child, on the child's grain, with parameters resolved now. A parent
    missing on a cell (a closed day, a rate with no trials) counts as its nominal level: no contribution."""
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
    x = np.where(np.isnan(x), center, x) if parent.dtype != "categorical" else x
    edge_id = f"{e.parent}->{e.child}"
    if "panel" in mechanism.inputs:  # the mechanism works on the parent's daily panel (a lag shifts days)
        panel_x = grid.align(x, parent.grain, "panel", fill=center)
        ctx.state.inputs[edge_id] = panel_x  # kept for the profile of the lag's precision when sealing
        return grid.align(mechanism.apply({"x": panel_x}, params, ctx.rng), "panel", child.grain)
    inputs = {"x": grid.align(x, parent.grain, child.grain, fill=center)}
    if mechanism.locates:
        ctx.state.inputs[edge_id] = inputs["x"]
    if "t" in mechanism.inputs:
        inputs["t"] = grid.time(child.grain)
    if "moderator" in mechanism.inputs:
        moderator = ctx.contract.variable(params["moderator"])
        m = ctx.grid_values(moderator.name)
        m = np.where(np.isnan(m), params["moderator_center"], m)
        inputs["moderator"] = grid.align(m, moderator.grain, child.grain, fill=params["moderator_center"])
    if "denominator" in mechanism.inputs:
        inputs["denominator"] = grid.align(ctx.capacity(), "unit", child.grain)
    return mechanism.apply(inputs, params, ctx.rng)


def rows_where(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """`values[mask]` (rows of a 2-d array), the same array, gathered by the mask's positions: numpy's
    boolean gather is ~3x slower than a take on the baseline kernels numpy is pinned to."""
    return values.take(np.flatnonzero(mask), axis=0)


def grain_series(contract: Contract, state: CanonicalState, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A variable's reported values and their periods where an analyst sees them: events (survey answers:
    answered events only) or open unit-days with a value."""
    v = contract.variable(name)
    if v.grain == "event":
        values, day = state.column("events", name).astype(float), state.column("events", "day")
        if v.observe == "scale":
            answered = state.column("events", f"responded_{name}").astype(bool)
            return rows_where(values, answered), rows_where(day, answered)
        return values, day
    values, day = state.column("panel", name).astype(float), state.column("panel", "day")
    seen = state.column("panel", "open").astype(bool) & np.isfinite(values)
    return rows_where(values, seen), rows_where(day, seen)

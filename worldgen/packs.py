"""Domain packs: the declarative variable library a persona's world is drawn from.

A pack is data (YAML under `worldgen/domains/`), not code. It names the three entity types every world
has (a *unit* observed over time, a *party* that transacts with units, and an *event* linking them), the
business systems that report on them, at least 12 variables with units and grain, and the plausible
edges between variables with the mechanism kinds each edge may take.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Literal

import networkx as nx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.errors import PackError, did_you_mean, raise_collected
from contracts.model import SNAKE, AltUnit, Calendar, Climate, Format, Grain, PartyColumn
from worldgen import regional
from worldgen.mechanisms import MECHANISMS, Role

# libyaml's safe loader parses a pack ten times faster than the pure-Python one (same documents, same data).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Dtype = Literal["float", "count", "binary", "categorical"]
Pattern = Literal["signal", "policy"]
# How a variable's values are reported (its observation model); see Variable.observe.
Observe = Literal["value", "count", "rate", "rolling", "duration", "sporadic", "scale"]
Scope = Literal["unit", "region", "nation"]
Shape = Literal["rain", "temperature", "index", "steps"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Measure(_Strict):
    """A numeric column outside the DAG (unit capacity, event amount)."""

    name: str
    unit: str
    mean: float
    sd: float = Field(gt=0)
    min: float
    max: float
    alt_unit: AltUnit | None = None
    aliases: list[Alias] = Field(default_factory=list, description="column names systems may give it")


class Alias(_Strict):
    """A name a business system may give a column, and how that system's data dictionary explains it.

    `name` is snake_case words as the system would spell them before its own casing is applied (units in
    names are welcome: `prep_time_min`, `basket_value_usd`); no truncated tokens. `doc` is one sentence in
    that system's own words, with the unit, different from the variable's description: matching columns
    to variables must take reading, not string comparison.
    """

    name: str = Field(pattern=SNAKE)
    doc: str = Field(min_length=10)


class UnitEntity(_Strict):
    name: str
    plural: str
    key: str
    prefix: str = Field(min_length=1, max_length=4)
    name_style: Literal["company", "person", "place", "code"] = "company"
    capacity: Measure
    aliases: list[str] = Field(default_factory=list, description="what systems call a unit (merchant, store...)")


class PartyEntity(_Strict):
    name: str
    plural: str
    key: str
    prefix: str = Field(min_length=1, max_length=4)
    name_style: Literal["company", "person", "place", "code"] = "person"
    aliases: list[str] = Field(default_factory=list, description="what systems call a party (client, member...)")
    # How many events a party makes over the timeline, drawn per world: sets the size of the party table.
    events_per_party: tuple[float, float] = (15.0, 25.0)
    loyalty: float = Field(default=0.6, gt=0, description="gamma shape of activity: low = a few heavy users")
    home_share: float = Field(default=0.8, ge=0, le=1, description="share of events at a unit in the home region")
    history_days: int = Field(default=720, ge=0, description="parties signed up up to this long before day 0")
    since: str = Field(default="signup_date", pattern=SNAKE, description="what the party file calls sign-up")
    columns: list[PartyColumn] = Field(default_factory=list)


class EventEntity(_Strict):
    name: str
    plural: str
    key: str
    prefix: str = Field(min_length=1, max_length=4)
    amount: Measure
    aliases: list[str] = Field(default_factory=list, description="what systems call an event (order, job...)")
    # Hours from the event to its completion (delivery, resolution, visit end): feedback comes after it.
    completion_hours: tuple[float, float] = (0.5, 2.0)
    feedback_delay_hours: float = Field(default=20.0, gt=0, description="median delay of feedback after completion")


class Entities(_Strict):
    unit: UnitEntity
    party: PartyEntity
    event: EventEntity


class System(_Strict):
    """A business system that exports one observed file."""

    name: str
    label: str
    format: Format
    holds: Literal["units", "parties", "events", "variables"] = "variables"
    # How this system may identify units: the master's unit code (in its own format), an id of its own
    # (mapped in the master file), or the unit's name as this system spells it. One is drawn per world.
    refers_by: list[Literal["code", "local", "name"]] = Field(default_factory=lambda: ["code"], min_length=1)


class Variable(_Strict):
    """One variable cluster of the domain.

    `observe` is how systems report it: `value` (a measurement with gaussian noise), `count` (a whole
    number of occurrences, Poisson around its mean), `rate` (k of n, where n is the day's count of
    `denominator`), `rolling` (a mean over the last `window` days), `duration` (positive, right-skewed),
    `sporadic` (zero on most days, large when it happens: downtime, refunds), `scale` (a rating scale from `min` to
    `max`, J-shaped; feedback answered by a `response` share of events).
    `scope` region/nation: an external series (weather, macro index, rates) generated once per region or
    nation and shared by the units there; `shape` says how it moves.
    """

    name: str
    description: str
    grain: Grain
    dtype: Dtype = "float"
    unit: str = ""
    mean: float = 0.0
    sd: float = Field(default=1.0, gt=0)
    min: float = float("-inf")
    max: float = float("inf")
    decimals: int = Field(default=2, ge=0, le=6)
    levels: list[str] = Field(default_factory=list)
    pattern: Pattern = "signal"
    role: Literal["volume"] | None = None
    system: str
    alt_unit: AltUnit | None = None
    aliases: list[Alias] = Field(default_factory=list)
    observe: Observe = "value"
    denominator: str | None = None
    window: int | None = Field(default=None, ge=3, le=90)
    scope: Scope = "unit"
    shape: Shape | None = None
    response: tuple[float, float] | None = None


class EdgeSpec(_Strict):
    """A plausible generative relation parent -> child and the mechanism kinds it may take."""

    parent: str
    child: str
    kinds: list[str] = Field(min_length=1)
    sign: Literal["+", "-"] = "+"
    note: str = ""


class DomainPack(_Strict):
    domain: str
    title: str
    start: str = "2025-01-01"
    regions: list[str] = Field(min_length=2)
    # "national": units lie in the persona's country's regions (a haulier in Melbourne has depots in
    # Victoria and New South Wales, not the Midwest); "local": the pack's own (campuses, districts).
    regions_scope: Literal["national", "local"] = "local"
    entities: Entities
    systems: list[System]
    variables: list[Variable]
    edges: list[EdgeSpec]
    calendar: Calendar = Field(default_factory=Calendar)
    climate: Climate | None = None

    def variable(self, name: str) -> Variable:
        return self._by_name[name]

    @functools.cached_property
    def _by_name(self) -> dict[str, Variable]:
        return {v.name: v for v in self.variables}

    def candidate_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_nodes_from(v.name for v in self.variables)
        for edge in self.edges:
            graph.add_edge(edge.parent, edge.child, spec=edge)
        return graph


def role(v: Variable) -> Role:
    return Role(name=v.name, dtype=v.dtype, grain=v.grain, pattern=v.pattern)


def allowed_kind(kind: str, parent: Variable, child: Variable) -> str | None:
    """Return why `kind` cannot link parent -> child, or None if it can (each mechanism states its rules)."""
    if kind not in MECHANISMS:
        return f"unknown mechanism {kind!r}{did_you_mean(kind, MECHANISMS)}"
    return MECHANISMS[kind].unsuitable(role(parent), role(child))


MIN_VARIABLES = 12  # a pack must offer more variables than any one world's minimum of 8
VOLUME_MEAN_RANGE = (0.3, 25)  # events per unit-day: enough to estimate effects, few enough to write quickly
DECIMALS_PER_SD = 5  # a variable must be reported finer than a fifth of its spread


MIN_ALIASES = 2  # every variable can be named at least two ways, so systems can disagree
MIN_OPEN_MONTHS = 9  # both halves of every timeline must hold open days
RICH_PARENTS = 4  # a cause-task variable needs this many candidate parents: a world keeps at most half


def validate_pack(pack: DomainPack) -> None:
    """Check the pack's cross-references and rules, collecting every problem before raising."""
    problems = _system_problems(pack) + _variable_problems(pack) + _edge_problems(pack)
    problems += _observation_problems(pack) + _calendar_problems(pack) + _vocabulary_problems(pack)
    raise_collected(PackError, f"domain pack {pack.domain!r}", problems)


def _observation_problems(pack: DomainPack) -> list[str]:
    """Observation models, external series and feedback are declared consistently."""
    problems: list[str] = []
    by_name = {v.name: v for v in pack.variables}
    has_parents = {e.child for e in pack.edges}
    has_children = {e.parent for e in pack.edges}
    feedback_systems = {s.name for s in pack.systems if s.holds == "variables"}
    for v in pack.variables:
        where = f"variable {v.name!r}"
        if v.observe == "count" and v.dtype != "count":
            problems.append(f"{where}: observe 'count' needs dtype 'count'")
        if v.observe == "rate":
            denominator = by_name.get(v.denominator or "")
            if v.grain != "panel" or not (v.min == 0 and v.max == 1):
                problems.append(f"{where}: a rate is a panel share with min 0 and max 1")
            if denominator is None or denominator.dtype != "count" or denominator.grain != "panel":
                problems.append(f"{where}: a rate needs `denominator`, a count panel variable (its trials)")
        elif v.denominator is not None:
            problems.append(f"{where}: `denominator` only applies to observe 'rate'")
        if (v.observe == "rolling") != (v.window is not None):
            problems.append(f"{where}: observe 'rolling' and `window` go together")
        if v.observe == "rolling" and v.grain != "panel":
            problems.append(f"{where}: rolling metrics are daily (panel grain)")
        if v.observe in ("duration", "sporadic") and not v.min >= 0:
            problems.append(f"{where}: {v.observe} values are never negative (min >= 0)")
        if v.observe == "sporadic" and v.grain != "panel":
            problems.append(f"{where}: sporadic values are reported per unit-day (panel grain)")
        if v.observe == "scale":
            if v.grain != "event" or v.decimals != 0 or v.system not in feedback_systems:
                problems.append(
                    f"{where}: a rating scale is event feedback (event grain, decimals 0, a variables system)"
                )
            if not (v.min >= 0 and v.max - v.min >= 2 and float(v.min).is_integer() and float(v.max).is_integer()):
                problems.append(f"{where}: a rating scale runs between two whole numbers at least 2 apart")
        if v.observe == "scale" and v.name in has_children:
            # Only a minority answers a survey: a cause seen through a few answers would look weaker than it is.
            problems.append(f"{where}: survey answers (observe 'scale') cannot be the parent of another variable")
        if (v.response is not None) != (v.observe == "scale"):
            problems.append(f"{where}: `response` (share of events answered) goes with observe 'scale'")
        if v.response is not None and not 0.01 <= v.response[0] <= v.response[1] <= 0.6:
            problems.append(f"{where}: response must be a range within [0.01, 0.6]")
        if v.scope != "unit":
            if v.grain != "panel" or v.pattern != "signal" or v.name in has_parents:
                problems.append(f"{where}: a {v.scope} series is a panel root with pattern 'signal' (no parents)")
            if v.shape is None:
                problems.append(f"{where}: a {v.scope} series needs a `shape` (rain, temperature, index or steps)")
        elif v.shape is not None:
            problems.append(f"{where}: `shape` describes external series (scope region or nation)")
        if v.shape in ("rain", "temperature") and (v.scope != "region" or pack.climate is None):
            problems.append(f"{where}: weather is a region series and needs the pack's `climate`")
    return problems


def _calendar_problems(pack: DomainPack) -> list[str]:
    c = pack.calendar
    problems: list[str] = []
    if not 0 <= c.hours[0] < c.hours[1] <= 24:
        problems.append(f"calendar: hours {c.hours} must be an opening and a later closing hour within 0-24")
    if not any(w > 0 for w in c.weekly) or any(w < 0 for w in c.weekly):
        problems.append("calendar: weekly needs 7 non-negative weights with at least one open weekday")
    if sum(m > 0 for m in c.monthly) < MIN_OPEN_MONTHS or any(m < 0 for m in c.monthly):
        problems.append(f"calendar: monthly needs 12 non-negative weights with at least {MIN_OPEN_MONTHS} open months")
    for peak in c.peaks:
        if not c.hours[0] <= peak.hour <= c.hours[1]:
            problems.append(f"calendar: peak at {peak.hour}h falls outside the opening hours {c.hours}")
    known = regional.table().countries
    for effect in c.dates:
        unknown = [code for code in effect.countries if code not in known]
        if unknown:
            problems.append(f"calendar: {effect.name!r} names countries the country table lacks: {unknown}")
    return problems


def _vocabulary_problems(pack: DomainPack) -> list[str]:
    """Every reported column has names systems may use, and no name is shared by two variables."""
    problems: list[str] = []
    owner: dict[str, str] = {}
    for v in pack.variables:
        if len(v.aliases) < MIN_ALIASES:
            problems.append(f"variable {v.name!r}: needs at least {MIN_ALIASES} aliases (column names systems use)")
        for alias in v.aliases:
            if owner.setdefault(alias.name, v.name) != v.name:
                problems.append(f"alias {alias.name!r} names both {owner[alias.name]!r} and {v.name!r}")
    for measure in (pack.entities.unit.capacity, pack.entities.event.amount):
        if len(measure.aliases) < MIN_ALIASES:
            problems.append(f"measure {measure.name!r}: needs at least {MIN_ALIASES} aliases")
    ent = pack.entities
    for entity in (ent.unit, ent.party, ent.event):
        if len(entity.aliases) < MIN_ALIASES:
            problems.append(f"{entity.name}: needs at least {MIN_ALIASES} aliases (what systems call it)")
        if any(not re.fullmatch(SNAKE, a) for a in entity.aliases):
            problems.append(f"{entity.name}: aliases must be snake_case words")
    return problems


def _system_problems(pack: DomainPack) -> list[str]:
    problems: list[str] = []
    names = [v.name for v in pack.variables]
    if len(set(names)) != len(names):
        problems.append("variable names repeat")
    if len(pack.variables) < MIN_VARIABLES:
        problems.append(f"needs at least {MIN_VARIABLES} variables, has {len(pack.variables)}")
    for holds in ("units", "parties", "events"):
        count = sum(s.holds == holds for s in pack.systems)
        if count != 1:
            problems.append(f"needs exactly one system holding {holds}, has {count}")
    if sum(s.holds == "variables" for s in pack.systems) < 3:
        problems.append("needs at least 3 systems holding variables")
    volumes = [v for v in pack.variables if v.role == "volume"]
    if len(volumes) != 1:
        problems.append(f"needs exactly one variable with role 'volume', has {len(volumes)}")
    low, high = VOLUME_MEAN_RANGE
    for v in volumes:
        if v.grain != "panel" or not low <= v.mean <= high:
            problems.append(
                f"volume variable {v.name!r} must be panel grain with mean in [{low}, {high}] events per unit-period"
            )
    if pack.entities.event.amount.alt_unit is None:
        problems.append("the event amount needs an alt_unit (unit drift needs somewhere to happen)")
    return problems


def _variable_problems(pack: DomainPack) -> list[str]:
    problems: list[str] = []
    system_names = {s.name for s in pack.systems}
    holds = {s.name: s.holds for s in pack.systems}
    formats = {s.name: s.format for s in pack.systems}
    for v in pack.variables:
        where = f"variable {v.name!r}"
        home = holds.get(v.system)
        if v.grain == "unit" and home not in (None, "units"):
            problems.append(f"{where}: unit attributes must be reported by the system holding units")
        if v.role == "volume" and home not in (None, "events"):
            problems.append(f"{where}: the volume variable is observed as events, so its system must hold events")
        if v.grain == "panel" and v.role != "volume" and home not in (None, "variables"):
            problems.append(f"{where}: panel variables must be reported by a system holding variables")
        if v.grain == "event" and home not in (None, "events", "variables"):
            problems.append(f"{where}: event variables must be reported by the events system or a variables system")
        if formats.get(v.system) == "xlsx" and home == "variables" and v.pattern != "policy":
            problems.append(
                f"{where}: xlsx systems hold master data and schedules only; use csv, parquet or jsonl for daily signals"
            )
        if v.system not in system_names:
            problems.append(f"{where}: unknown system {v.system!r}{did_you_mean(v.system, system_names)}")
        if v.dtype == "categorical" and (v.grain != "unit" or len(v.levels) < 2):
            problems.append(f"{where}: categorical variables need unit grain and >= 2 levels")
        if v.pattern == "policy" and v.grain != "panel":
            problems.append(f"{where}: pattern 'policy' needs panel grain")
        whole = v.observe in ("count", "scale")  # whole numbers by nature: their spread is in the counting
        if (
            v.dtype in {"float", "count"}
            and v.pattern != "policy"
            and not whole
            and 10.0**-v.decimals > v.sd / DECIMALS_PER_SD
        ):
            # Coarser reporting than a fifth of the spread flattens every slope the variable takes part in.
            finest = v.sd / DECIMALS_PER_SD
            problems.append(
                f"{where}: decimals {v.decimals} too coarse for sd {v.sd}; report at least {finest:.2g} resolution"
            )
        if v.dtype != "categorical" and not v.min < v.mean < v.max:
            problems.append(f"{where}: mean {v.mean} must lie strictly inside [{v.min}, {v.max}]")
    return problems


def _edge_problems(pack: DomainPack) -> list[str]:
    problems: list[str] = []
    by_name = {v.name: v for v in pack.variables}
    graph = nx.DiGraph()
    for e in pack.edges:
        where = f"edge {e.parent}->{e.child}"
        missing = [n for n in (e.parent, e.child) if n not in by_name]
        for n in missing:
            problems.append(f"{where}: unknown variable {n!r}{did_you_mean(n, by_name)}")
        if missing:
            continue
        parent, child = by_name[e.parent], by_name[e.child]
        graph.add_edge(e.parent, e.child)
        if child.dtype in {"categorical", "binary"}:
            problems.append(f"{where}: {child.dtype} variables can only be roots")
        if child.pattern == "policy":
            problems.append(f"{where}: policy variables are set by management and can only be roots")
        if child.grain == "unit" and parent.grain != "unit":
            problems.append(f"{where}: a unit attribute can only depend on unit attributes")
        if set(e.kinds) <= {"interaction"}:
            problems.append(f"{where}: list a kind besides 'interaction' (it needs a second parent to moderate)")
        for kind in e.kinds:
            reason = allowed_kind(kind, parent, child)
            if reason:
                problems.append(f"{where}: {reason}")
    volumes = [v.name for v in pack.variables if v.role == "volume"]
    if volumes:
        graph.add_edges_from((volumes[0], v.name) for v in pack.variables if v.grain == "event")
    if graph.number_of_nodes() and not nx.is_directed_acyclic_graph(graph):
        problems.append(
            f"edges contain a cycle (event variables count as children of the volume): {nx.find_cycle(graph)}"
        )
    return problems


def load_pack_file(path: Path) -> DomainPack:
    """Load and validate one pack file; any problem becomes one PackError naming the file."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise PackError(f"{path}: cannot read domain pack: {exc}".replace("\n", " ")) from None
    try:
        pack = DomainPack.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise_collected(PackError, str(path), problems)
        raise  # unreachable: problems is never empty here
    validate_pack(pack)
    return pack


def _domains_folder() -> Path:
    return Path(str(resources.files("worldgen") / "domains"))


@functools.cache
def builtin_packs() -> dict[str, DomainPack]:
    """All packs shipped in worldgen/domains, by domain name."""
    return {name: get_pack(name) for name in builtin_domains()}


@functools.cache
def builtin_domains() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in _domains_folder().glob("*.yaml")))


@functools.cache
def get_pack(domain: str) -> DomainPack:
    """One shipped pack, loaded on first use (a worker only parses the domains it builds)."""
    domains = builtin_domains()
    if domain not in domains:
        raise PackError(f"unknown domain {domain!r}{did_you_mean(domain, domains)}; known: {', '.join(domains)}")
    pack = load_pack_file(_domains_folder() / f"{domain}.yaml")
    if pack.domain != domain:
        raise PackError(f"{domain}.yaml declares domain {pack.domain!r}; the file name must match")
    return pack

"""The world contract C: the one data model the generator, the auditor and the rubric code share.

A contract is drafted before any data exists (entities and their measures, regions, timeline, the DAG with
each edge's parameter seed, invariants, deliverables) and sealed after the canonical state is generated:
each edge's parameters are then resolved in natural units against its parent's realised scale, and the
phenomena are written with their targets. A sealed contract is the whole specification of a world: with
its seed and index it regenerates X and E without the domain pack. `validate_contract` checks the
structural rules pydantic cannot express and reports every problem at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.errors import ContractError, raise_collected
from contracts.safeio import MIB, read_json

MAX_CONTRACT_BYTES = 16 * MIB  # ours are ~40 KiB

# 2.3: the persona's trend has a carrier root (X of a 2.2 contract regenerates differently); 2.2: dated effects
# may need a country holiday (with_holiday); 2.1: localised calendars
SCHEMA_VERSION = "2.3"
MECHANISM_KINDS = (
    "monotone",
    "threshold",
    "saturation",
    "lag",
    "interaction",
    "seasonal",
    "categorical",
    "ratio",
)
# Parameters each mechanism must carry; see worldgen/mechanisms.py for their meaning.
MECHANISM_PARAMS: dict[str, tuple[str, ...]] = {
    "monotone": ("beta", "transform"),
    "threshold": ("tau", "jump"),
    "saturation": ("amplitude", "kappa", "origin"),
    "lag": ("beta", "lag"),
    "interaction": ("beta", "moderator"),
    "seasonal": ("beta", "amplitude", "period", "phase"),
    "categorical": ("shifts",),
    "ratio": ("beta", "denominator"),
}

# How systems write dates (a deliverable column's `format` names one); timestamps append " %H:%M:%S".
DATE_STYLES = {"iso": "%Y-%m-%d", "dmy": "%d/%m/%Y", "mdy": "%m/%d/%Y", "compact": "%Y%m%d"}
TIME_SUFFIX = " %H:%M:%S"

Grain = Literal["unit", "panel", "event"]
Format = Literal["csv", "xlsx", "parquet", "json", "jsonl"]
EntityRole = Literal["unit", "party", "event"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Persona(_Model):
    id: str
    domain: str
    role: str
    organisation: str
    region: str
    concern: str
    focus: str | None = None
    trend: Literal["up", "down"] | None = Field(
        default=None, description="which way the concern says the focus moved; the world plants it that way"
    )


class Timeline(_Model):
    start: str = Field(description="ISO date of period 0")
    periods: int = Field(ge=180, description="number of periods (days)")
    period: Literal["day"] = "day"
    change_day: int = Field(description="period at which management changes take effect")


class ForeignKey(_Model):
    column: str
    references: str = Field(description="referenced entity name")


class Entity(_Model):
    name: str
    role: EntityRole
    table: str
    key: str
    prefix: str = Field(description="letters the business systems put before this entity's numbers")
    count: int = Field(ge=1)
    foreign_keys: list[ForeignKey] = Field(default_factory=list)
    name_style: Literal["company", "person", "place", "code"] | None = Field(
        default=None, description="how the entity's names are drawn (units and parties)"
    )
    local_ids: list[str] = Field(
        default_factory=list, description="units: systems that number units their own way (mapped in the master)"
    )


class AltUnit(_Model):
    """Another unit a system may switch to for a quantity (unit drift), e.g. cents = 100 x USD."""

    name: str
    factor: float = Field(gt=0)


SNAKE = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"


class Peak(_Model):
    """One intraday peak of activity: around `hour` (local time), spread `sd` hours, relative `weight`."""

    hour: float = Field(ge=0, le=24)
    sd: float = Field(gt=0, le=12)
    weight: float = Field(gt=0)


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


DATE_RULE = r"^(easter|(0[1-9]|1[0-2])-((0[1-9]|[12][0-9]|3[01])|(mon|tue|wed|thu|fri|sat|sun)[1-5]))$"


class DateEffect(_Model):
    """A holiday or seasonal event: `date` is MM-DD, MM-<weekday><n> for the n-th weekday of the month
    (e.g. 11-thu4 for the fourth Thursday of November; n = 5 is the last), or `easter` (Western Easter
    Sunday), shifted by `offset` days and lasting `days`. `factor` scales activity: 0 closes units, 0.5
    halves activity, 3 triples it. In a pack, `countries` limits an event to some countries (ISO codes),
    `with_holiday` to the countries whose public holidays include that date (a Christmas rush only where
    Christmas is kept), and a `seasonal` event follows the seasons (half a year later in the south)."""

    date: str = Field(pattern=DATE_RULE)
    name: str
    factor: float = Field(ge=0)
    offset: int = Field(default=0, ge=-60, le=60)
    days: int = Field(default=1, ge=1, le=31)
    countries: list[str] = Field(default_factory=list)
    with_holiday: str | None = Field(default=None, pattern=DATE_RULE)
    seasonal: bool = False


class HolidayResponse(_Model):
    """How a domain's activity responds to its country's public holidays: the factor on a major holiday
    (when nearly everything closes: New Year, Christmas, the national day) and on the others."""

    major: float = Field(ge=0)
    minor: float = Field(ge=0)


class Calendar(_Model):
    """When units operate and how activity moves through the day, the week and the year."""

    hours: tuple[float, float] = (0.0, 24.0)
    peaks: list[Peak] = Field(default_factory=list)
    flat_share: float = Field(default=0.2, ge=0, le=1, description="share of events spread evenly over hours")
    weekly: list[float] = Field(default_factory=lambda: [1.0] * 7, min_length=7, max_length=7)
    monthly: list[float] = Field(default_factory=lambda: [1.0] * 12, min_length=12, max_length=12)
    dates: list[DateEffect] = Field(default_factory=list)
    extra_closed_weekday: float = Field(default=0.0, ge=0, le=1, description="units closing one more weekday")
    openings: float = Field(default=0.0, ge=0, le=0.5, description="units that open during the timeline")
    closures: float = Field(default=0.0, ge=0, le=0.5, description="units that close during the timeline")
    outages: float = Field(default=0.0, ge=0, le=0.05, description="unit-days a unit is down (no activity, no rows)")
    holidays: HolidayResponse | None = Field(default=None, description="response to the country's public holidays")
    seasonal_months: bool = Field(default=False, description="monthly follows the seasons (flips in the south)")
    country: str | None = Field(default=None, description="ISO code of the country whose holidays `dates` hold")


class Climate(_Model):
    """The climate external weather series follow (region-level series, seasonal, heavy-tailed rain)."""

    hemisphere: Literal["north", "south"] = "north"
    mean_c: float = Field(description="annual mean temperature, Celsius")
    swing_c: float = Field(ge=0, description="half the gap between the warmest and coldest month")
    wet_days: float = Field(gt=0, lt=1, description="share of days with rain")
    wet_mm: float = Field(gt=0, description="mean rain on a wet day, mm")


class PartyColumn(_Model):
    """A domain attribute of a party (segment, plan, age band, credit tier...), drawn per party."""

    name: str = Field(pattern=SNAKE)
    doc: str = Field(min_length=10)
    kind: Literal["category", "number"]
    levels: list[str] = Field(default_factory=list)
    weights: list[float] = Field(default_factory=list, description="relative frequency of each level")
    mean: float = 0.0
    sd: float = Field(default=1.0, gt=0)
    min: float | None = None
    max: float | None = None
    decimals: int = Field(default=0, ge=0, le=4)


class PartyShape(_Model):
    """How parties behave in this world (drawn from the pack's ranges by the contract stage)."""

    loyalty: float = Field(gt=0, description="gamma shape of activity per party: low = a few heavy users")
    home_share: float = Field(ge=0, le=1, description="share of events at a unit in the party's home region")
    history_days: int = Field(ge=0, description="parties signed up up to this many days before day 0")
    since: str = Field(description="what the party file calls the sign-up date")
    columns: list[PartyColumn] = Field(default_factory=list)


class EventShape(_Model):
    completion_hours: float = Field(gt=0, description="median hours from an event to its completion")
    feedback_delay_hours: float = Field(gt=0, description="median hours from completion to a feedback answer")
    key_style: Literal["sequence", "uuid"] = Field(description="how the event system numbers events")
    key_offset: int = Field(ge=0, description="the event system's first sequence number minus one")


class Measure(_Model):
    """A numeric column outside the DAG: the unit's capacity or the event's amount."""

    name: str
    unit: str
    mean: float
    sd: float = Field(gt=0)
    min: float
    max: float
    decimals: int = Field(ge=0)
    alt_unit: AltUnit | None = None


class Measures(_Model):
    capacity: Measure = Field(description="units.<name>: the denominator of per-capacity (ratio) effects")
    amount: Measure = Field(description="events.<name>: the money or quantity each event carries")


Observe = Literal["value", "count", "rate", "rolling", "duration", "sporadic", "scale"]


class Variable(_Model):
    """One variable of the world. `observe` is its observation model (see worldgen/packs.py::Variable):
    the value X stores is the value on the reported scale, and children respond to it."""

    name: str
    description: str
    grain: Grain
    dtype: Literal["float", "count", "binary", "categorical"]
    unit: str
    mean: float
    sd: float
    min: float | None = None
    max: float | None = None
    levels: list[str] = Field(default_factory=list)
    pattern: Literal["signal", "policy"] = "signal"
    role: Literal["volume"] | None = None
    system: str
    layer: int = Field(ge=0)
    decimals: int = Field(default=2, ge=0, description="decimals the business systems report this variable with")
    alt_unit: AltUnit | None = Field(default=None, description="the unit a system migrates this variable to")
    observe: Observe = "value"
    denominator: str | None = Field(default=None, description="rate: the count variable holding each day's trials")
    window: int | None = Field(default=None, description="rolling: days in the trailing window")
    scope: Literal["unit", "region", "nation"] = "unit"
    shape: Literal["rain", "temperature", "index", "steps"] | None = None
    response: float | None = Field(default=None, description="scale: the share of events whose survey is answered")


class Edge(_Model):
    parent: str
    child: str
    kind: str
    draw: dict[str, Any] = Field(
        default_factory=dict,
        description="what the draft fixes before data exists: the parameter seed and the child's effect scale",
    )
    params: dict[str, Any] = Field(
        description="mechanism parameters in natural units; resolved from `draw` against the realised parent "
        "when the contract is sealed"
    )
    sign: Literal["+", "-"]
    note: str


class Invariant(_Model):
    id: str
    kind: Literal["unique_key", "foreign_key", "range", "conservation"]
    table: str
    column: str
    references: str | None = Field(default=None, description="table.column for foreign keys and sums")
    min: float | None = None
    max: float | None = None
    note: str = ""


class DeliveredColumn(_Model):
    name: str = Field(description="column name in the observed file")
    source: str = Field(description="canonical table.column it projects")
    format: str | None = Field(
        default=None,
        description="dates: a date style; unit keys: a key template on the unit's code, 'local:<template>' on "
        "this system's own unit id, or 'name'; other keys: a template on the entity's code, or 'uuid'",
    )
    decimals: int | None = Field(default=None, description="decimals the system reports numbers with")
    doc: str = Field(default="", description="what the system's data dictionary says of the column")


class Deliverable(_Model):
    file: str = Field(description="path relative to observed/")
    system: str
    format: Format | Literal["md"]
    grain: Literal["units", "parties", "events", "event_detail", "panel", "schedule", "dictionary"]
    source_tables: list[str]
    columns: list[DeliveredColumn]
    sheets: list[str] = Field(default_factory=list)
    fields: list[DeliveredColumn] = Field(
        default_factory=list, description="change logs: the setting names the field column shows, and what they hold"
    )


class Phenomenon(_Model):
    id: str
    kind: Literal["edge_effect", "period_change", "attribution"]
    statistic: str
    variables: list[str]
    column: str | None = Field(
        default=None, description="table.column of a measure outside the DAG, e.g. events.amount"
    )
    edge: str | None = Field(default=None, description="'parent->child' for edge effects")
    target: float | None = Field(default=None, description="set when the contract is sealed", allow_inf_nan=False)
    tolerance: float = Field(gt=0, allow_inf_nan=False)
    files: list[str] = Field(min_length=1)
    description: str


class Candidate(_Model):
    """A plausible edge of the domain pack, realised in this world or not (rubrics penalise the absent ones)."""

    parent: str
    child: str
    sign: Literal["+", "-"]


class Unidentified(_Model):
    """An edge whose characteristic number the data cannot pin down: no phenomenon, no rubric number."""

    edge: str
    statistic: str
    reason: str


class Contract(_Model):
    schema_version: str = SCHEMA_VERSION
    world_id: str
    seed: int
    index: int = Field(ge=0, description="the world's index in its build: with `seed`, it derives every stream")
    size: Literal["small", "default", "large"]
    domain: str
    persona: Persona
    timeline: Timeline
    regions: list[str] = Field(min_length=1, description="regions units and parties are drawn from")
    calendar: Calendar
    climate: Climate | None = None
    entities: list[Entity]
    measures: Measures
    parties: PartyShape
    events: EventShape
    variables: list[Variable]
    edges: list[Edge]
    layers: list[list[str]]
    invariants: list[Invariant]
    deliverables: list[Deliverable]
    phenomena: list[Phenomenon]
    candidates: list[Candidate] = Field(default_factory=list, description="every plausible edge of the pack")
    unidentified: list[Unidentified] = Field(default_factory=list)
    attempt: int = Field(default=0, ge=0, description="canonical attempt that planted the persona's trend")
    sealed: bool = False

    def variable(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    def entity(self, role: EntityRole) -> Entity:
        return next(e for e in self.entities if e.role == role)

    @property
    def volume(self) -> Variable:
        """The panel variable whose value is the number of events per unit-day."""
        return next(v for v in self.variables if v.role == "volume")


def longest_path_layers(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Depth of each node = length of the longest path reaching it (roots are 0); raises on a cycle."""
    parents: dict[str, list[str]] = {n: [] for n in nodes}
    for p, c in edges:
        parents[c].append(p)
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def visit(node: str) -> int:
        if node in depth:
            return depth[node]
        if node in visiting:
            raise ContractError(f"edges contain a cycle through {node!r}")
        visiting.add(node)
        depth[node] = max((visit(p) + 1 for p in parents[node]), default=0)
        visiting.discard(node)
        return depth[node]

    for n in nodes:
        visit(n)
    return depth


def structural_edges(variables: list[Variable]) -> list[tuple[str, str]]:
    """Edges implied by the data layout: event variables can only be drawn once the volume's events exist,
    and a rate once the count holding its trials exists."""
    volume = [v.name for v in variables if v.role == "volume"]
    edges = [(volume[0], v.name) for v in variables if v.grain == "event"] if volume else []
    return edges + [(v.denominator, v.name) for v in variables if v.denominator]


def generation_layers(contract: Contract) -> dict[str, int]:
    """Layer of each variable: longest-path depth over causal plus structural edges."""
    edges = [(e.parent, e.child) for e in contract.edges] + structural_edges(contract.variables)
    return longest_path_layers([v.name for v in contract.variables], sorted(set(edges)))


def validate_contract(contract: Contract) -> None:
    """Structural rules beyond the schema; every problem is collected, then raised once."""
    problems: list[str] = []
    if contract.schema_version != SCHEMA_VERSION:
        problems.append(f"schema_version {contract.schema_version!r} is not the supported {SCHEMA_VERSION!r}")
    problems += _entity_problems(contract) + _graph_problems(contract) + _phenomenon_problems(contract)
    raise_collected(ContractError, f"contract {contract.world_id!r}", problems)


def _entity_problems(contract: Contract) -> list[str]:
    problems: list[str] = []
    entity_names = {e.name for e in contract.entities}
    tables = {e.table for e in contract.entities} | {"panel"}
    if sorted(e.role for e in contract.entities) != ["event", "party", "unit"]:
        problems.append("entities must include one unit, one party and one event entity")
    for e in contract.entities:
        for fk in e.foreign_keys:
            if fk.references not in entity_names:
                problems.append(
                    f"entity {e.name!r}: foreign key {fk.column!r} references unknown entity {fk.references!r}"
                )
    for inv in contract.invariants:
        if inv.table not in tables:
            problems.append(f"invariant {inv.id!r}: unknown table {inv.table!r}")
    variables = {v.name for v in contract.variables}
    for name in (contract.measures.capacity.name, contract.measures.amount.name):
        if name in variables:
            problems.append(f"measure {name!r} clashes with a variable of the same name")
    if contract.measures.amount.alt_unit is None:
        problems.append("the event amount needs an alt_unit (unit drift needs somewhere to happen)")
    if sum(v.role == "volume" for v in contract.variables) != 1:
        problems.append("exactly one variable must have role 'volume' (events per unit-day)")
    return problems


def _graph_problems(contract: Contract) -> list[str]:
    """Edges name known variables and mechanisms with their parameters; layers are longest-path depths."""
    problems: list[str] = []
    variables = {v.name: v for v in contract.variables}
    edge_pairs: list[tuple[str, str]] = []
    parents = {(e.parent, e.child) for e in contract.edges}
    for edge in contract.edges:
        where = f"edge {edge.parent}->{edge.child}"
        if edge.parent not in variables or edge.child not in variables:
            problems.append(f"{where}: references an unknown variable")
            continue
        edge_pairs.append((edge.parent, edge.child))
        if edge.kind not in MECHANISM_PARAMS:
            problems.append(f"{where}: unknown mechanism kind {edge.kind!r}; allowed: {', '.join(MECHANISM_KINDS)}")
            continue
        missing = [p for p in MECHANISM_PARAMS[edge.kind] if p not in edge.params]
        if contract.sealed and missing:
            problems.append(f"{where}: {edge.kind} mechanism lacks parameter(s) {missing}")
        moderator = edge.params.get("moderator")
        if edge.kind == "interaction" and (moderator, edge.child) not in parents:
            problems.append(f"{where}: moderator {moderator!r} must be another parent of {edge.child!r}")
    try:
        edge_pairs = sorted(set(edge_pairs) | set(structural_edges(contract.variables)))
        depth = longest_path_layers(list(variables), edge_pairs)
    except ContractError as exc:
        return problems + [str(exc)]
    for name, d in depth.items():
        if variables[name].layer != d:
            problems.append(f"variable {name!r}: layer {variables[name].layer} but longest-path depth {d}")
    if depth:
        expected = [sorted(n for n, d in depth.items() if d == k) for k in range(max(depth.values()) + 1)]
        if [sorted(layer) for layer in contract.layers] != expected:
            problems.append("layers do not group variables by longest-path depth")
    return problems


def _phenomenon_problems(contract: Contract) -> list[str]:
    problems: list[str] = []
    variables = {v.name for v in contract.variables}
    files = {d.file for d in contract.deliverables}
    if len(files) != len(contract.deliverables):
        problems.append("deliverable file names repeat")
    edge_ids = {f"{e.parent}->{e.child}" for e in contract.edges}
    for ph in contract.phenomena:
        where = f"phenomenon {ph.id!r}"
        for v in ph.variables:
            if v not in variables:
                problems.append(f"{where}: unknown variable {v!r}")
        if ph.edge is not None and ph.edge not in edge_ids:
            problems.append(f"{where}: unknown edge {ph.edge!r}")
        for f in ph.files:
            if f not in files:
                problems.append(f"{where}: file {f!r} is not a deliverable")
        if contract.sealed and ph.target is None:
            problems.append(f"{where}: sealed contract without a target value")
    covered = {ph.edge for ph in contract.phenomena if ph.kind == "edge_effect"}
    covered |= {u.edge for u in contract.unidentified}
    for e in sorted(edge_ids - covered) if contract.sealed else []:
        problems.append(f"edge {e}: no edge_effect phenomenon and not listed as unidentified")
    if contract.sealed and not any(len(ph.files) >= 2 for ph in contract.phenomena):
        problems.append("at least one phenomenon must need files from two systems")
    return problems


def load_contract(path: Path) -> Contract:
    """Read and validate contract.json; any problem becomes one ContractError naming the file."""
    return contract_from_raw(read_json(path, max_bytes=MAX_CONTRACT_BYTES, what="contract", error=ContractError), path)


def contract_from_raw(raw: Any, path: Path) -> Contract:
    """Validate the parsed JSON of contract.json read from `path` (for a reader that already parsed it);
    any problem becomes one ContractError naming the file."""
    if isinstance(raw, dict) and raw.get("schema_version") not in (None, SCHEMA_VERSION):
        raise ContractError(
            f"{path}: schema_version {raw.get('schema_version')!r} is not the supported {SCHEMA_VERSION!r}"
        )
    try:
        contract = Contract.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise_collected(ContractError, str(path), problems)
        raise
    validate_contract(contract)
    return contract


def json_schema() -> dict[str, Any]:
    schema = Contract.model_json_schema()
    schema["$id"] = f"https://worldgen.dev/schema/contract-{SCHEMA_VERSION}.json"
    return schema

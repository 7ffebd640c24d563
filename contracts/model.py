"""The world contract C: the one data model the generator, the auditor and the rubric code share.

A contract is written before any data exists (entities, timeline, DAG with sampled mechanism parameters,
invariants, deliverables) and sealed after the canonical state is generated, when each phenomenon's
target value is computed from the generation record. `validate_contract` checks the structural rules
pydantic cannot express and reports every problem at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contracts.errors import ContractError, raise_collected
from contracts.safeio import MIB, read_json

MAX_CONTRACT_BYTES = 16 * MIB  # ours are ~40 KiB

SCHEMA_VERSION = "1.0"
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


class Variable(_Model):
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


class Edge(_Model):
    parent: str
    child: str
    kind: str
    draw: dict[str, Any] = Field(
        default_factory=dict,
        description="what the contract fixes before data exists: the parameter seed and the child's effect scale",
    )
    params: dict[str, Any] = Field(
        description="mechanism parameters in natural units; resolved against the realised parent when sealed"
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
    format: str | None = Field(default=None, description="key template or date style used by this system")
    decimals: int | None = Field(default=None, description="decimals the system reports numbers with")


class Deliverable(_Model):
    file: str = Field(description="path relative to observed/")
    system: str
    format: Format
    grain: Literal["units", "parties", "events", "event_detail", "panel", "schedule"]
    source_tables: list[str]
    columns: list[DeliveredColumn]
    sheets: list[str] = Field(default_factory=list)


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


class Contract(_Model):
    schema_version: str = SCHEMA_VERSION
    world_id: str
    seed: int
    size: Literal["small", "default", "large"]
    domain: str
    persona: Persona
    timeline: Timeline
    entities: list[Entity]
    variables: list[Variable]
    edges: list[Edge]
    layers: list[list[str]]
    invariants: list[Invariant]
    deliverables: list[Deliverable]
    phenomena: list[Phenomenon]
    sealed: bool = False


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
    """Edges implied by the data layout: event variables can only be drawn once the volume's events exist."""
    volume = [v.name for v in variables if v.role == "volume"]
    return [(volume[0], v.name) for v in variables if v.grain == "event"] if volume else []


def generation_layers(contract: Contract) -> dict[str, int]:
    """Layer of each variable: longest-path depth over causal plus structural edges."""
    edges = [(e.parent, e.child) for e in contract.edges] + structural_edges(contract.variables)
    return longest_path_layers([v.name for v in contract.variables], sorted(set(edges)))


def validate_contract(contract: Contract) -> None:
    """Structural rules beyond the schema; every problem is collected, then raised once."""
    problems: list[str] = []
    if contract.schema_version != SCHEMA_VERSION:
        problems.append(f"schema_version {contract.schema_version!r} is not the supported {SCHEMA_VERSION!r}")
    variables = {v.name: v for v in contract.variables}
    entity_names = {e.name for e in contract.entities}
    tables = {e.table for e in contract.entities} | {"panel"}
    if {e.role for e in contract.entities} != {"unit", "party", "event"}:
        problems.append("entities must include one unit, one party and one event entity")
    for e in contract.entities:
        for fk in e.foreign_keys:
            if fk.references not in entity_names:
                problems.append(
                    f"entity {e.name!r}: foreign key {fk.column!r} references unknown entity {fk.references!r}"
                )
    edge_pairs: list[tuple[str, str]] = []
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
        if edge.kind == "interaction" and (moderator, edge.child) not in {(e.parent, e.child) for e in contract.edges}:
            problems.append(f"{where}: moderator {moderator!r} must be another parent of {edge.child!r}")
    try:
        edge_pairs = sorted(set(edge_pairs) | set(structural_edges(contract.variables)))
        depth = longest_path_layers(list(variables), edge_pairs)
    except ContractError as exc:
        problems.append(str(exc))
        depth = {}
    for name, d in depth.items():
        if variables[name].layer != d:
            problems.append(f"variable {name!r}: layer {variables[name].layer} but longest-path depth {d}")
    if depth:
        expected = [sorted(n for n, d in depth.items() if d == k) for k in range(max(depth.values()) + 1)]
        if [sorted(layer) for layer in contract.layers] != expected:
            problems.append("layers do not group variables by longest-path depth")
    for inv in contract.invariants:
        if inv.table not in tables:
            problems.append(f"invariant {inv.id!r}: unknown table {inv.table!r}")
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
    for e in sorted(edge_ids - covered) if contract.sealed else []:
        problems.append(f"edge {e}: no edge_effect phenomenon")
    if contract.sealed and not any(len(ph.files) >= 2 for ph in contract.phenomena):
        problems.append("at least one phenomenon must need files from two systems")
    raise_collected(ContractError, f"contract {contract.world_id!r}", problems)


def load_contract(path: Path) -> Contract:
    """Read and validate contract.json; any problem becomes one ContractError naming the file."""
    raw = read_json(path, max_bytes=MAX_CONTRACT_BYTES, what="contract", error=ContractError)
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

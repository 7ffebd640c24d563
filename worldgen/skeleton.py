"""Persona -> dependency skeleton: draw a connected DAG of variables from the domain pack.

The pack's candidate edges form a DAG; a world keeps a random subset of them, takes the connected part
that holds the volume variable (and the persona's focus), and retries until the structural rules hold.
Each kept edge then gets one mechanism kind among those the pack allows for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from contracts.errors import PackError
from worldgen.mechanisms import MECHANISMS
from worldgen.packs import DomainPack

MIN_NODES = 8  # fewer variables make a world too small to hide its causes among
MIN_LONGEST_PATH = 3  # a chain of three edges gives cause and consequence tasks at different depths
MAX_ATTEMPTS = 400  # draws before a pack is declared unable to give a valid DAG (packs pass in a handful)
KEEP_SHARE = (0.35, 0.8)  # each world keeps a share of the pack's candidate edges drawn from this range


@dataclass(frozen=True)
class Skeleton:
    """The sampled DAG: variable names and (parent, child, kind) edges in a stable order."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str, str], ...]

    def graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_nodes_from(self.nodes)
        graph.add_edges_from((p, c, {"kind": k}) for p, c, k in self.edges)
        return graph


def structure_problems(graph: nx.DiGraph, required: list[str], focus: str | None) -> list[str]:
    """Why a candidate DAG breaks the world rules (empty when it is acceptable)."""
    problems = []
    if graph.number_of_nodes() < MIN_NODES:
        problems.append(f"fewer than {MIN_NODES} nodes")
    elif not nx.is_weakly_connected(graph):
        problems.append("not connected")
    if nx.dag_longest_path_length(graph) < MIN_LONGEST_PATH if graph.number_of_nodes() else True:
        problems.append(f"longest path shorter than {MIN_LONGEST_PATH}")
    if max((d for _, d in graph.in_degree()), default=0) < 2:
        problems.append("no node with two parents")
    if max((d for _, d in graph.out_degree()), default=0) < 2:
        problems.append("no node with two children")
    problems += [f"misses {n!r}" for n in required if n not in graph]
    if focus is not None and focus in graph and graph.in_degree(focus) < 2:  # a missing focus is in `required`
        problems.append(f"focus {focus!r} has fewer than two parents")
    return problems


def sample_skeleton(pack: DomainPack, rng: np.random.Generator, focus: str | None = None) -> Skeleton:
    """Draw a DAG satisfying the world rules; raise PackError if the pack cannot provide one."""
    candidates = pack.candidate_graph()
    volume = next(v.name for v in pack.variables if v.role == "volume")
    edges = sorted(candidates.edges)
    for _ in range(MAX_ATTEMPTS):
        keep_p = rng.uniform(*KEEP_SHARE)
        kept = [e for e, u in zip(edges, rng.random(len(edges)), strict=False) if u < keep_p]
        graph = nx.DiGraph(kept)
        if volume not in graph:
            continue
        graph = graph.subgraph(nx.node_connected_component(graph.to_undirected(), volume)).copy()
        crosses_systems = any(pack.variable(p).system != pack.variable(c).system for p, c in graph.edges)
        if crosses_systems and not structure_problems(graph, [volume] + ([focus] if focus else []), focus):
            return Skeleton(tuple(sorted(graph.nodes)), _choose_kinds(pack, graph, rng))
    raise PackError(f"domain pack {pack.domain!r}: no valid DAG after {MAX_ATTEMPTS} draws (focus {focus!r})")


def _choose_kinds(pack: DomainPack, graph: nx.DiGraph, rng: np.random.Generator) -> tuple[tuple[str, str, str], ...]:
    chosen = []
    for parent, child in sorted(graph.edges):
        spec = pack.candidate_graph().edges[parent, child]["spec"]
        kinds = list(spec.kinds)
        moderators = [
            p for p in graph.predecessors(child) if p != parent and pack.variable(p).dtype in {"float", "count"}
        ]
        if not moderators:
            kinds = [k for k in kinds if "moderator" not in MECHANISMS[k].inputs]
        source = pack.variable(parent)
        if (source.pattern == "policy" or source.grain == "unit") and len(kinds) > 1:
            # A management lever or a unit attribute takes few distinct values (one per unit at most), so
            # neither the location of a step nor the bend of a curve between them is identifiable.
            kinds = [k for k in kinds if not MECHANISMS[k].locates] or kinds
        weights = np.array([MECHANISMS[k].weight for k in kinds])
        chosen.append((parent, child, kinds[int(rng.choice(len(kinds), p=weights / weights.sum()))]))
    return tuple(chosen)


def check_pack_sampling(pack: DomainPack, focuses: list[str | None], draws: int = 30) -> list[str]:
    """Problems found by drawing `draws` DAGs per focus (used by pack checks and tests)."""
    problems = []
    for focus in focuses:
        for seed in range(draws):
            try:
                sample_skeleton(pack, np.random.default_rng(seed), focus)
            except PackError as exc:
                problems.append(str(exc))
                break
    return problems

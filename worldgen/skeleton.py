"""Persona -> dependency skeleton: which of the pack's plausible edges this world realises.

Every variable of the pack is in the world (its systems report it), but each child keeps only some of its
candidate parents: at most half of them when it has four or more, at most one otherwise. Variables that
keep no edge at all are there too, as the measures a real company also tracks that drive nothing here.
So the pack's candidate graph is a list of hypotheses, not an answer key: a guess that names every
plausible cause names as many wrong ones as right ones. The DAG is redrawn until the structural rules hold,
and each kept edge gets one mechanism kind among those the pack allows for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from contracts.errors import PackError
from worldgen.mechanisms import MECHANISMS
from worldgen.packs import RICH_PARENTS, DomainPack

MIN_LONGEST_PATH = 3  # a chain of three edges gives cause and consequence tasks at different depths
MAX_ATTEMPTS = 400  # draws before a pack is declared unable to give a valid DAG (packs pass in a handful)
TWO_PARENTS_SHARE = 0.7  # a variable with four or more candidate parents keeps two or more this often
ONE_PARENT_SHARE = 0.65  # a variable with one to three candidates keeps one of them this often


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


def max_parents(candidates: int) -> int:
    """At most half of four or more candidates, at most one of fewer: the pack never gives the answer away."""
    return candidates // 2 if candidates >= RICH_PARENTS else min(candidates, 1)


def structure_problems(graph: nx.DiGraph, candidates: nx.DiGraph, focus: str | None) -> list[str]:
    """Why a candidate DAG breaks the world rules (empty when it is acceptable)."""
    problems = []
    if graph.number_of_edges() == 0 or nx.dag_longest_path_length(graph) < MIN_LONGEST_PATH:
        problems.append(f"longest path shorter than {MIN_LONGEST_PATH}")
    if max((d for _, d in graph.in_degree()), default=0) < 2:
        problems.append("no node with two parents")
    consequences = [n for n in graph if 2 <= graph.out_degree(n) <= candidates.out_degree(n) // 2]
    if not consequences:
        problems.append("no node with two children among at most half of its candidate children")
    if focus is not None and (focus not in graph or graph.in_degree(focus) < 2):
        problems.append(f"focus {focus!r} has fewer than two parents")
    for node in graph:
        if graph.in_degree(node) > max_parents(candidates.in_degree(node)):
            problems.append(f"{node!r} keeps more than half of its candidate parents")
    return problems


def sample_skeleton(pack: DomainPack, rng: np.random.Generator, focus: str | None = None) -> Skeleton:
    """Draw a DAG satisfying the world rules; raise PackError if the pack cannot provide one."""
    candidates = pack.candidate_graph()
    nodes = sorted(candidates.nodes)
    for _ in range(MAX_ATTEMPTS):
        graph = nx.DiGraph()
        graph.add_nodes_from(nodes)
        for child in nodes:
            parents = sorted(candidates.predecessors(child))
            keep = _parents_to_keep(len(parents), child == focus, rng)
            chosen = rng.choice(len(parents), size=keep, replace=False) if keep else []
            graph.add_edges_from((parents[int(i)], child) for i in sorted(chosen))
        crosses_systems = any(pack.variable(p).system != pack.variable(c).system for p, c in graph.edges)
        if crosses_systems and not structure_problems(graph, candidates, focus):
            return Skeleton(tuple(nodes), _choose_kinds(pack, graph, rng))
    raise PackError(f"domain pack {pack.domain!r}: no valid DAG after {MAX_ATTEMPTS} draws (focus {focus!r})")


def _parents_to_keep(candidates: int, is_focus: bool, rng: np.random.Generator) -> int:
    cap = max_parents(candidates)
    if cap >= 2 and (is_focus or rng.random() < TWO_PARENTS_SHARE):
        return int(rng.integers(2, cap + 1))
    return int(cap >= 1 and rng.random() < ONE_PARENT_SHARE)


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
        if pack.variable(child).role == "volume" and len(kinds) > 1:
            # The calendar multiplies the volume by its weekday's level: a weekly cycle of every effect on it,
            # which a planted weekly swing of one effect could not be told apart from.
            kinds = [k for k in kinds if k != "seasonal"] or kinds
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

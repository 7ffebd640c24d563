"""Domain packs and the persona library: coverage, DAG rules per domain, and refused bad input."""

from __future__ import annotations

import json
from collections import Counter

import networkx as nx
import pytest

from contracts.errors import ContractError, PackError, PersonaError
from contracts.model import Contract, validate_contract
from personas import builtin_personas, load_persona_file
from worldgen.contract import WorldSpec, build_contract
from worldgen.packs import DomainPack, builtin_packs, get_pack, validate_pack
from worldgen.phenomena import focus_variable
from worldgen.seeding import Streams
from worldgen.skeleton import sample_skeleton, structure_problems

PACKS = builtin_packs()


def test_library_covers_200_personas_over_16_domains():
    personas = builtin_personas()
    per_domain = Counter(p.domain for p in personas)
    assert len(personas) >= 200 and len(per_domain) >= 16
    assert set(per_domain) == set(PACKS)
    for p in personas:
        assert all(getattr(p, f).strip() for f in ("id", "domain", "role", "organisation", "region", "concern"))


@pytest.mark.parametrize("domain", sorted(PACKS))
def test_pack_draws_valid_dags_and_contracts(domain):
    pack = PACKS[domain]
    assert len(pack.variables) >= 12
    kinds = set()
    focuses = [p for p in builtin_personas() if p.domain == domain]
    for seed in range(12):
        persona = focuses[seed % len(focuses)]
        streams = Streams(seed, 0)
        skeleton = sample_skeleton(pack, streams.rng("skeleton"), persona.focus)
        graph = skeleton.graph()
        candidates = pack.candidate_graph()
        assert not structure_problems(graph, candidates, persona.focus)
        assert graph.number_of_nodes() == len(pack.variables) and nx.dag_longest_path_length(graph) >= 3
        for node in graph:  # a world keeps at most half of four or more candidate parents, else at most one
            kept, plausible = graph.in_degree(node), candidates.in_degree(node)
            assert kept <= (plausible // 2 if plausible >= 4 else min(plausible, 1)), (node, kept, plausible)
        contract = build_contract(WorldSpec(seed, 0, "small", persona), pack, skeleton, streams)
        assert 4 <= len({d.system for d in contract.deliverables}) <= 12
        assert len({d.format for d in contract.deliverables}) >= 3
        kinds |= {e.kind for e in contract.edges}
        if persona.focus:
            assert focus_variable(contract) == persona.focus, "the world must be built around the persona's concern"
    assert len(kinds) >= 4, f"{domain} plants too few mechanism kinds: {kinds}"


def test_unknown_domain_suggests_the_closest():
    with pytest.raises(PackError, match="did you mean 'food_delivery'"):
        get_pack("food_delivry")


def test_pack_validation_reports_every_problem_at_once():
    raw = PACKS["food_delivery"].model_dump()
    raw["variables"][0]["system"] = "crn"
    raw["edges"].append(
        {"parent": "courier_load", "child": "menu_sise", "kinds": ["monotone"], "sign": "+", "note": ""}
    )
    raw["edges"].append({"parent": "cuisine", "child": "daily_orders", "kinds": ["slope"], "sign": "+", "note": ""})
    with pytest.raises(PackError) as err:
        validate_pack(DomainPack.model_validate(raw))
    message = str(err.value)
    assert "3 problem(s)" in message and "did you mean 'crm'" in message and "did you mean 'menu_size'" in message


BAD_PERSONAS = [
    (
        '{"id": "a", "domain": "food_delivery", "role": "r", "organisation": "o", "region": "x"}',
        "record 1: field 'concern'",
    ),
    (
        '{"id": "a", "domain": "food_delivery", "role": "", "organisation": "o", "region": "x", "concern": "c"}',
        "record 1: field 'role'",
    ),
    ("not json", "record 1: not valid JSON"),
    ("[1, 2]", "record 1: expected a JSON object"),
    (
        '{"id": "a", "domain": "food_delivery", "role": "r", "organisation": "o", "region": "x", "concern": "c", "mood": 1}',
        "record 1: field 'mood'",
    ),
]


@pytest.mark.parametrize(
    ("line", "expected"), BAD_PERSONAS, ids=["missing-field", "empty-field", "not-json", "not-object", "extra-field"]
)
def test_malformed_persona_file_names_record_and_field(tmp_path, line, expected):
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(PersonaError, match=expected):
        load_persona_file(path)


def test_contract_validation_collects_every_error(small_build, world_dirs):
    raw = json.loads((world_dirs[0] / "contract.json").read_text())
    raw["edges"][0]["kind"] = "wobble"
    raw["variables"][0]["layer"] = 7
    raw["phenomena"][0]["files"] = ["nowhere.csv"]
    with pytest.raises(ContractError) as err:
        validate_contract(Contract.model_validate(raw))
    message = str(err.value)
    assert "wobble" in message and "layer 7" in message and "nowhere.csv" in message

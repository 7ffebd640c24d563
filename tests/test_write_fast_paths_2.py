"""The write stage's second set of fast paths give what the plain ways give, byte for byte."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from contracts.hashing import file_sha256
from worldgen.write import _Digests, dump_json, indented_json

SCALARS = ["", "a", "ünï", "日本", "\x00\x1f", 'q"\\/', "\u2028", "\ud800", 0, -1, 2**70, 0.1, -0.0, 1e300, 1 / 3]
SCALARS += [float("nan"), float("inf"), float("-inf"), True, False, None]


def _value(rng: random.Random, depth: int = 0):
    kind = rng.random()
    if depth > 4 or kind < 0.45:
        return rng.choice(SCALARS)
    n = rng.choice([0, 1, 2, 5])
    if kind < 0.6:
        return [_value(rng, depth + 1) for _ in range(n)]
    if kind < 0.65:
        return tuple(_value(rng, depth + 1) for _ in range(n))
    return {rng.choice(["k", "ключ", "", 'a"b', "k2", "x\ny"]) + str(i): _value(rng, depth + 1) for i in range(n)}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("indent", [2, 0, 1, 4])
def test_indented_json_is_json_dumps(seed, indent):
    rng = random.Random(seed)
    for _ in range(200):
        value = _value(rng)
        assert indented_json(value, indent) == json.dumps(value, indent=indent, ensure_ascii=False)


class _Text(str):
    pass


class _Number(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", 2.5: None, False: 1, None: 2},  # keys json.dumps converts to text
        {"a": [_Text("sub"), _Number(3)]},  # subclasses: left to json.dumps's own conversion
        [{"a": {"b": []}}, {}],
        "top",
        None,
    ],
)
def test_indented_json_leaves_the_rest_to_json_dumps(value):
    assert indented_json(value, 2) == json.dumps(value, indent=2, ensure_ascii=False)


def test_indented_json_refuses_what_json_dumps_refuses():
    circular: list = []
    circular.append(circular)
    for bad in (circular, {"a": {1, 2}}, {(1, 2): 3}):
        with pytest.raises(Exception) as plain:
            json.dumps(bad, indent=2, ensure_ascii=False)
        with pytest.raises(type(plain.value)):
            indented_json(bad, 2)


def test_indented_json_of_a_deep_structure_is_json_dumps():
    deep: list = []
    for _ in range(300):
        deep = [deep, 1]
    assert indented_json(deep, 2) == json.dumps(deep, indent=2, ensure_ascii=False)


def test_dump_json_writes_the_plain_text(tmp_path: Path):
    payload = {"ünï": [1, 2.5, None, {"x": "日本"}], "empty": {}, "list": []}
    dump_json(tmp_path / "a.json", payload)
    dump_json(tmp_path / "b.json", payload, indent=None)
    text = (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode()
    assert (tmp_path / "a.json").read_bytes() == text
    assert (tmp_path / "b.json").read_bytes() == (json.dumps(payload, ensure_ascii=False) + "\n").encode()


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (3 << 20) + 7])
def test_digests_are_the_file_hash(tmp_path: Path, size):
    path = tmp_path / "f.bin"
    path.write_bytes(random.Random(size).randbytes(size))
    digest = _Digests()
    assert digest(path) == file_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest(path) == file_sha256(path)  # a second call reuses the first hash

"""The auditor's JSON envelope reader gives exactly the frame the stdlib parser and `pl.DataFrame` give
(the same columns, order, types and values), or the same error; polars' reader serves only the envelopes
written as polars writes them."""

from __future__ import annotations

import datetime as dt
import io
import json
import math

import numpy as np
import polars as pl
import pytest

from auditors import bytescan
from auditors.worldio import JSON_SAMPLE, _flat_array, read_json_envelope, read_json_records, read_ndjson
from contracts.errors import WorldFormatError
from contracts.safeio import MAX_DEPTH, json_depth, loads

LONG = 3 * JSON_SAMPLE  # past the sampled first and last records


def _envelope(records: bytes, system: str = "crm") -> bytes:
    header = json.dumps({"system": system, "record_count": 0})[:-1]
    return f'{header}, "records": '.encode() + records + b"}\n"


def _written(frame: pl.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.write_json(out)
    return _envelope(out.getvalue())


def _plain(data: bytes) -> pl.DataFrame:
    return pl.DataFrame(loads(data, where="x")["records"], infer_schema_length=None)


def _check(data: bytes) -> pl.DataFrame | None:
    """Assert the reader agrees with the plain one (frame or error); the fast path's frame, if it served."""
    try:
        expected = _plain(data)
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)) as raised:
            read_json_envelope(data, where="x")
        assert str(raised.value) == str(exc)
        assert read_json_records(data) is None
        return None
    got = read_json_envelope(data, where="x")
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)
    return read_json_records(data)


N = LONG + 7
WRITTEN = {
    "flat": pl.DataFrame({"k": [f"R-{i}" for i in range(N)], "n": list(range(N)), "x": [i / 7 for i in range(N)]}),
    "nulls": pl.DataFrame(
        {"a": [None if i % 3 else i for i in range(N)], "s": [None if i % 2 else "x" for i in range(N)]}
    ),
    "all null": pl.DataFrame({"a": list(range(N)), "b": [None] * N}),
    "typed all null": pl.DataFrame({"a": list(range(N)), "b": pl.Series([None] * N, dtype=pl.Float64)}),
    "null head int": pl.DataFrame({"a": list(range(N)), "b": [None] * (N - 50) + list(range(50))}),
    "null head float": pl.DataFrame({"a": list(range(N)), "b": [None] * (N - 50) + [i + 0.5 for i in range(50)]}),
    "null ends": pl.DataFrame({"a": list(range(N)), "b": [None] * 150 + [1.5] * (N - 300) + [None] * 150}),
    "whole floats": pl.DataFrame({"a": [float(i) for i in range(N)]}),
    "float extremes": pl.DataFrame(
        {"a": [1e300, -1e-300, 5e-324, 1.7976931348623157e308, -0.0, 0.1 + 0.2, 1e16, 123456789.123456789] * 40}
    ),
    "big ints": pl.DataFrame({"a": [2**63 - 1, -(2**63)] * 200}),
    "int128": pl.DataFrame({"a": pl.Series([2**70, 1] * 200, dtype=pl.Int128)}),
    "booleans": pl.DataFrame({"a": [True, False, None] * 150}),
    "unicode": pl.DataFrame({"名前": ["é€😀", "ü"] * 200, "n": [1, 2] * 200}),
    "escapes": pl.DataFrame(
        {"a": ['say "hi"', "back\\slash", "line\nbreak", "tab\t", "nul\x00", "},{", "\\ud800"] * 60}
    ),
    "dates": pl.DataFrame({"d": [dt.date(2025, 1, 1), None] * 200, "t": [dt.datetime(2025, 1, 1, 8, 30)] * 400}),
    "short": pl.DataFrame({"a": [1, 2], "b": ["x", None]}),
    "one column": pl.DataFrame({"a": list(range(N))}),
    "empty records": pl.DataFrame(),
    "nested": pl.DataFrame({"a": [[1, 2]] * 5, "b": [{"c": 1}] * 5}),
}


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_polars_written_envelopes(name):
    frame = WRITTEN[name]
    got = _check(_written(frame))
    flat = all(dtype in (pl.String, pl.Int64, pl.Float64, pl.Boolean, pl.Null) for dtype in frame.schema.values())
    typed_nulls = any(frame[c].null_count() == frame.height and frame[c].dtype != pl.Null for c in frame.columns)
    if flat and not typed_nulls:
        assert got is not None, "polars' own envelope should be read by polars"


def _rows(template: str, n: int = LONG) -> str:
    return ",".join(template.format(i=i) for i in range(n))


HAND = {
    "missing keys": "[" + _rows('{{"a":{i}}}') + ',{"b":2,"a":3}]',
    "key order": "[" + _rows('{{"a":{i},"b":1}}') + ',{"b":2,"a":3}]',
    "first record short": '[{"a":1},' + _rows('{{"b":{i},"a":{i}}}') + "]",
    "duplicate keys": "[" + _rows('{{"a":{i},"b":1}}') + ',{"a":1,"b":2,"a":"x"}]',
    "duplicate same value": "[" + _rows('{{"a":{i},"b":1}}') + ',{"a":1,"b":2,"a":1}]',
    "late float": "[" + _rows('{{"a":{i}}}') + ',{"a":2.5}]',
    "late float middle": "[" + _rows('{{"a":{i}}}') + ',{"a":2.5},' + _rows('{{"a":{i}}}') + "]",
    "late text": "[" + _rows('{{"a":{i}}}') + ',{"a":"x"},' + _rows('{{"a":{i}}}') + "]",
    "late bool": "[" + _rows('{{"a":{i}}}') + ',{"a":true},' + _rows('{{"a":{i}}}') + "]",
    "int written as float": "[" + _rows('{{"a":{i}.0}}') + ',{"a":2},' + _rows('{{"a":{i}.0}}') + "]",
    "exponent form": "[" + _rows('{{"a":{i}E2}}') + "]",
    "spaces": "[" + _rows('{{"a": {i}, "b": "x"}}') + "]",
    "nan": "[" + _rows('{{"a":{i}.5}}') + ',{"a":NaN}]',
    "infinity": "[" + _rows('{{"a":{i}.5}}') + ',{"a":-Infinity}]',
    "huge float": "[" + _rows('{{"a":{i}.5}}') + ',{"a":1e400}]',
    "big int late": "[" + _rows('{{"a":{i}}}') + ',{"a":9223372036854775808}]',
    "escaped unicode": "[" + _rows('{{"a":"\\u00e9{i}"}}') + "]",
    "lone surrogate": "[" + _rows('{{"a":"x{i}"}}') + ',{"a":"\\ud800"}]',
    "surrogate pair": "[" + _rows('{{"a":"x{i}"}}') + ',{"a":"\\ud83d\\ude00"}]',
    "trailing comma": "[" + _rows('{{"a":{i}}}') + ",]",
    "not json": "[" + _rows('{{"a":{i}}}') + ",{a:1}]",
    "truncated": "[" + _rows('{{"a":{i}}}'),
    "text in array": "[" + _rows('{{"a":{i}}}') + ',"x"]',
    "null in array": "[" + _rows('{{"a":{i}}}') + ",null]",
    "empty object": "[{}]",
    "records not a list": '{"a": 1}',
    "deep": "[" + _rows('{{"a":{i}}}') + ',{"a":' + "[" * 70 + "]" * 70 + "}]",
    "control character": "[" + _rows('{{"a":"x{i}"}}') + ',{"a":"x\ty"}]',
    "splitter in text": "[" + _rows('{{"a":"}},{{{i}"}}') + "]",
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_written_envelopes(name):
    _check(_envelope(HAND[name].encode()))


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}]}} ',
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}]} x',
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}]}\n\n',
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}], "records": [{"b":2}]}\n',
        b'{"system": "c\\"rm", "record_count": 1, "records": [{"a":1}]}\n',
        b'{"system": "crm", "record_count": 01, "records": [{"a":1}]}\n',
        b'\xef\xbb\xbf{"system": "crm", "record_count": 1, "records": [{"a":1}]}\n',
        b'{"system": "crm", "record_count": 1, "records": [{"a":"\xff"}]}\n',
        b'{"system": "\xc3\xa9", "record_count": 1, "records": [{"a":1}]}\n',
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}]',
        b'{"system": "crm", "record_count": 1, "records": [{"a":1}]}',
    ],
)
def test_envelope_edges(data):
    _check(data)


def test_malformed_file_still_rejected():
    data = _envelope(b'[{"a":1},{"a":2]')
    with pytest.raises(WorldFormatError, match="not valid JSON"):
        read_json_envelope(data, where="observed/x.json")
    with pytest.raises(WorldFormatError, match="lone UTF-16 surrogate"):
        read_json_envelope(_envelope(b'[{"a":"\\udc00"}]'), where="observed/x.json")
    with pytest.raises(WorldFormatError, match="nested"):
        read_json_envelope(_envelope(b"[" * 100 + b"]" * 100), where="observed/x.json")


def test_float_text_round_trips():
    """Every float polars writes reads back (by the stdlib parser) as the same float."""
    values = [
        math.ldexp(1 + k / 997, e) * s for k in range(0, 997, 13) for e in range(-1074, 1024, 97) for s in (1, -1)
    ]
    frame = pl.DataFrame({"a": values, "b": list(range(len(values)))})
    assert _check(_written(frame)) is not None


def _check_ndjson(path) -> None:
    """read_ndjson reads a file as polars does, or refuses it as polars does (the same error), except one
    nested deeper than MAX_DEPTH, which it refuses before polars sees it."""
    if path.exists() and json_depth(path.read_bytes()) > MAX_DEPTH:
        with pytest.raises(WorldFormatError, match="levels deep, over the limit"):
            read_ndjson(path)
        return
    try:
        expected = pl.read_ndjson(path, infer_schema_length=None)
    except Exception as exc:  # noqa: BLE001
        with pytest.raises(type(exc)) as raised:
            read_ndjson(path)
        assert str(raised.value) == str(exc)
        return
    got = read_ndjson(path)
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)


@pytest.mark.parametrize("name", sorted(WRITTEN))
def test_ndjson_written_by_polars(tmp_path, name):
    path = tmp_path / "f.jsonl"
    try:
        WRITTEN[name].write_ndjson(path)
    except pl.exceptions.PolarsError:
        pytest.skip("polars does not write this frame as NDJSON")
    _check_ndjson(path)


@pytest.mark.parametrize("name", sorted(HAND))
def test_ndjson_hand_written(tmp_path, name):
    records = HAND[name]
    lines = records[1:-1].replace("},{", "}\n{") + "\n" if records.startswith("[") else records
    path = tmp_path / "f.jsonl"
    path.write_bytes(lines.encode())
    _check_ndjson(path)


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"\n",
        b'{"a":1}',
        b'{"a":1}\n\n',
        b'{"a":1}\r\n' * 300,
        b'{"a":1}\n' * 300 + b'{"a":1',
        b'\xef\xbb\xbf{"a":1}\n',
    ],
)
def test_ndjson_edges(tmp_path, text):
    path = tmp_path / "f.jsonl"
    path.write_bytes(text)
    _check_ndjson(path)


def test_ndjson_missing_file(tmp_path):
    _check_ndjson(tmp_path / "absent.jsonl")


@pytest.mark.parametrize(
    "records",
    [b"[" + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"]", b"[" + b"[" * 1000 + b"]" * 1000 + b"]"],
    ids=["objects", "arrays"],
)
def test_deep_nesting_never_reaches_polars(monkeypatch, records):
    """A few kilobytes nested a thousand deep would keep polars' JSON type inference busy for minutes; the
    fast path must hand such a file to the bounded stdlib parser, which refuses it."""
    import auditors.worldio as worldio

    calls = []
    monkeypatch.setattr(worldio.pl, "read_json", lambda *args, **kwargs: calls.append(args) or pl.DataFrame())
    monkeypatch.setattr(worldio.pl, "read_ndjson", lambda *args, **kwargs: calls.append(args) or pl.DataFrame())
    data = b'{"system": "s", "record_count": 1, "records": ' + records + b"}\n"
    assert read_json_records(data) is None
    with pytest.raises(WorldFormatError, match="nested"):
        read_json_envelope(data, "observed/deep.json")
    assert not calls, "polars' JSON reader was given a deeply nested document"


@pytest.mark.parametrize(
    "line",
    [b'{"a":' * 1000 + b"1" + b"}" * 1000, b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}"],
    ids=["objects", "arrays"],
)
def test_deep_ndjson_never_reaches_polars(monkeypatch, tmp_path, line):
    """NDJSON lines a thousand deep keep polars' type inference busy for minutes: refused before polars."""
    import auditors.worldio as worldio

    calls = []
    monkeypatch.setattr(worldio.pl, "read_ndjson", lambda *args, **kwargs: calls.append(args) or pl.DataFrame())
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b'{"a":1}\n' + line + b"\n")
    with pytest.raises(WorldFormatError, match=r"nested 10\d\d levels deep"):
        read_ndjson(path)
    assert not calls, "polars' NDJSON reader was given a deeply nested file"


def test_ndjson_with_brackets_in_text_or_shallow_nesting_reads_as_before(tmp_path):
    """The depth scan only refuses: a string holding braces, or records nested a few levels, read as polars
    reads them."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":"{[x]}","b":{"c":[3]}}\n{"a":"}","b":{"c":[1,2]}}\n')
    assert read_ndjson(path).equals(pl.read_ndjson(path, infer_schema_length=None))


def test_ndjson_depth_is_scanned_in_blocks_of_whole_lines(tmp_path):
    """A nested file over a block reads as polars reads it; a deep line in a later block is still found; a
    nested line longer than a block is refused (the scan's memory stays bounded: ~35 bytes a bracket)."""
    from auditors.worldio import NDJSON_BLOCK

    shallow = b'{"a":{"b":[1,2,3]},"c":"x"}\n'
    lines = shallow * (2 * NDJSON_BLOCK // len(shallow) + 3)
    path = tmp_path / "big.jsonl"
    path.write_bytes(lines)
    assert read_ndjson(path).equals(pl.read_ndjson(path, infer_schema_length=None))
    path.write_bytes(lines + b'{"a":' * 80 + b"1" + b"}" * 80 + b"\n")
    with pytest.raises(WorldFormatError, match="nested 80 levels deep"):
        read_ndjson(path)
    path.write_bytes(b'{"a":[' + b"1," * NDJSON_BLOCK + b"1]}\n")
    with pytest.raises(WorldFormatError, match="longer than 1 MiB"):
        read_ndjson(path)


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64, bytescan.BRACE_BLOCK])
@pytest.mark.parametrize("seed", range(12))
def test_flat_array_marks_record_lines(monkeypatch, seed, block):
    """The flat-array scan turns the comma of every `},{` into a line break in its copy, as `bytes.replace`
    would (the matches never overlap), across block edges, and leaves the count it answers unchanged."""
    monkeypatch.setattr(bytescan, "BRACE_BLOCK", block)
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'{},\n["a1 :', dtype=np.uint8)
    noise = alphabet[rng.integers(0, len(alphabet), int(rng.integers(0, 200)))].tobytes()
    pieces = [b"},{", b"}},{{", b"{", b"},", b",{", b"},{},{", b"}\n{"]
    data = noise + b"".join(pieces[i] for i in rng.integers(0, len(pieces), 30))
    for body in (data, data[::-1], b"[{" + data + b"}]", b"},{" + data):
        marked = np.frombuffer(body, dtype=np.uint8).copy()
        assert _flat_array(body, marked) == _flat_array(body)
        if body.count(b"[") == 1:  # past the bracket check, the scan marks every `},{`
            assert marked.tobytes() == body.replace(b"},{", b"}\n{")
        assert bytescan.braces_not_after(body, b"},", marked) == body.count(b"{") - body.count(b"},{")


def test_polars_envelopes_are_read_as_lines(monkeypatch):
    """polars' own envelopes are read whole by the NDJSON reader (the array reader only reads the two
    samples), into one chunk a column as the array reader gives; a string holding `},{` falls back."""
    import auditors.worldio as worldio

    calls = []
    read_json = pl.read_json
    monkeypatch.setattr(
        worldio.pl, "read_json", lambda source, **kwargs: calls.append(len(source)) or read_json(source, **kwargs)
    )
    frame = WRITTEN["flat"]
    data = _written(frame)
    got = read_json_records(data)
    assert got is not None and got.equals(frame) and got.n_chunks("all") == [1] * frame.width
    assert len(calls) == 2 and max(calls) < len(data) // 2
    calls.clear()
    tricky = frame.with_columns(k=pl.when(pl.col("n") == N // 2).then(pl.lit("},{")).otherwise("k"))
    got = read_json_records(_written(tricky))
    assert got is not None and got.equals(tricky) and len(calls) == 3

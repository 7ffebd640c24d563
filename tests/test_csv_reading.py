"""The auditor's CSV reader infers every row's types exactly as polars does over the whole file."""

from __future__ import annotations

import polars as pl
import pytest

from auditors.worldio import read_csv
from contracts.safeio import json_depth

LONG = 20_000  # past polars' default inference window, so a late value changes the type

CASES = {
    "late float": "a,b\n" + "1,x\n" * LONG + "2.5,y\n",
    "late text": "a\n" + "1\n" * LONG + "1x\n",
    "blank then ints": "a,b\n" + ",k\n" * LONG + "7,k\n",
    "all blank": "a,b\n" + ",1\n" * 100,
    "booleans": "a\n" + "true\nFalse\n" * 50,
    "bool and int": "a\n" + "true\n" * 70 + "1\n",
    "int and float": "a\n" + "1\n" * 70 + "1e5\n-0.5\n",
    "odd numbers": "a\n" + "\n".join(["inf", "NaN", "-3", "+4", "1_000", "0x10", " 5", "1.", ".5"] * 10) + "\n",
    "big ints": "a\n" + "1\n" * 70 + "99999999999999999999999\n",
    "spaces": "a,b\n" + " ,  x \n" * 80,
    "header only": "a,b,c\n",
    "quoted": 'a,b\n"1",2\n"x, y",3\n',
    "dates": "d\n" + "2025-01-02\n" * 80 + "2025-01-03 10:00:00\n",
    "long decimals": "a\n" + "".join(f"{i / 7:.17g}\n{i * 1e-300:.17g}\n" for i in range(-50, 50)) + "-0.0\n",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_read_csv_matches_full_inference(tmp_path, name):
    path = tmp_path / "f.csv"
    path.write_text(CASES[name])
    expected = pl.read_csv(path, infer_schema_length=None)
    got = read_csv(path)
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"[]",
        b'{"a": [1, {"b": "]]]"}]}',
        b'"[[[',
        b'["x", "[", "]"] ]',
        b'[[1]] "unterminated [[[',
        b'{"a": "\\"["}',
    ],
)
def test_json_depth_ignores_brackets_in_strings(text):
    import re

    import numpy as np

    strings = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
    brackets = re.sub(rb"[^\[\]{}]+", b"", strings.sub(b'""', text)) if (b"[" in text or b"{" in text) else b""
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    assert json_depth(text) == (int(np.cumsum(steps).max()) if len(codes) else 0)

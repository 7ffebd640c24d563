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
    # Past the first values: each digit stands for any other only while an integer surely fits in an Int64.
    "ints of 18 and 19 digits": "a,b\n"
    + "".join(f"{i},{10**17 + i}\n" for i in range(100))
    + "9" * 18
    + ",9223372036854775808\n",
    "ints then 20 digits": "a\n" + "1\n" * 100 + "-" + "9" * 20 + "\n",
    "many shapes": "a,b\n" + "".join(f"{i * 37 % 1001},{i / 13:.{i % 9}f}\n" for i in range(3000)) + "1e-7,+8\n",
    "late exponent": "a\n" + "".join(f"{i}.5\n" for i in range(200)) + "2E+10\n",
    "late inf": "a\n" + "".join(f"{i}.5\n" for i in range(200)) + "-inf\n",
    "late bool": "a\n" + "true\nfalse\n" * 100 + "TRUE\n",
    "late bool and text": "a\n" + "true\n" * 100 + "yes\n",
    "unicode": "a,b\n" + "é,1\n" * 100 + "ü€,2\n",
    "digits beside text": "a\n" + "12\n" * 100 + "12a\n",
    # Quoted fields: the text read serves when the quotes are only those a comma or a line break needs.
    "quoted names": "id,name,v\n" + "".join(f'{i},"Smith, Jones {i}",{i / 4}\n{i},Lee,{i}\n' for i in range(100)),
    "quoted line break": "id,name\n" + "".join(f'{i},"a\nb"\n{i},c\n' for i in range(100)),
    "quoted number": "id,name,v\n" + "".join(f'{i},"Smith, Jones",{i}\n' for i in range(100)) + '7,x,"8"\n',
    "quoted number alone": "id,v\n" + "".join(f"{i},{i}\n" for i in range(100)) + '7,"8"\n',
    "quoted bool": "id,name,v\n" + "".join(f'{i},"A, B",true\n' for i in range(100)) + '7,x,"false"\n',
    "quoted empty": "id,name\n" + "".join(f'{i},"A, B"\n' for i in range(100)) + '7,""\n',
    "escaped quotes": "id,name\n" + "".join(f'{i},"say ""hi"", {i}"\n' for i in range(100)),
    "quoted header": '"a, b",c\n' + "".join(f"{i},{i}\n" for i in range(100)),
    "quoted plain text": "id,name\n" + "".join(f'{i},"A, B"\n' for i in range(100)) + '7,"plain"\n',
    "quoted text of numbers": "id,name\n" + "".join(f'{i},"1,5"\n{i},2\n' for i in range(100)),
    "quoted blank column": "id,name,v\n" + "".join(f'{i},"A, B",\n' for i in range(100)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_read_csv_matches_full_inference(tmp_path, name):
    path = tmp_path / "f.csv"
    path.write_bytes(CASES[name].encode())
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

"""The auditor's CSV reader infers every row's types exactly as polars does over the whole file."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditors.worldio import (
    CSV_SAMPLE,
    HEAD_ROWS,
    PLAIN_PATTERNS,
    _first_values,
    _plain_shapes_infer,
    _quoted_columns,
    read_csv,
)
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


# Fields near the plain number patterns: each inferred otherwise than a plain number in at least one way (a
# sign, a point at an end, an exponent, too many digits, spaces, words polars reads as floats) or not.
NUMBERISH = [
    "0", "-7", "123", "9" * 18, "-" + "9" * 18, "9" * 19, "1" + "0" * 18, "-" + "9" * 19, "0" * 25,
    "1.5", "-0.25", "9" * 18 + "." + "9" * 18, "1" * 19 + ".5", "0." + "0" * 19, "+4", "+4.5", "1.", ".5", "-.5",
    "1e5", "2E-3", "inf", "NaN", "-inf", " 5", "5 ", "1_000", "0x10", "--1", "1-2", "1.2.3", "-", ".", "true",
    "x", "\u0663", "1,5", "",
]  # fmt: skip
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


HEADS = ["int", "float", "mixed"]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("late", NUMBERISH)
def test_read_csv_one_late_near_number(tmp_path_factory, head, late):
    """Each near-number shape alone after a numeric column's first values."""
    test_read_csv_numbers_past_the_first_values.hypothesis.inner_test(tmp_path_factory, head, [late], 2 * CSV_SAMPLE)


@given(
    head=st.sampled_from(HEADS),
    late=st.lists(st.sampled_from(NUMBERISH), max_size=6),
    where=st.integers(0, 2 * CSV_SAMPLE),
)
@FUZZ
def test_read_csv_numbers_past_the_first_values(tmp_path_factory, head, late, where):
    """A numeric column's late values of every near-number shape: the type is what the whole file infers
    (plain numbers prove it in one pass; any other value sends the column the general way)."""
    first = {"int": str, "float": lambda i: f"{i}.5", "mixed": lambda i: f"{i}" if i % 2 else f"-{i}.25"}
    values = [first[head](i) for i in range(3 * CSV_SAMPLE)]
    values[where:where] = late
    text = "a,b\n" + "".join(f"{value},{k}\n" for k, value in enumerate(values))
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_text(text)
    try:
        expected = pl.read_csv(path, infer_schema_length=None)
    except pl.exceptions.PolarsError as exc:  # a digit polars' inference takes for one and its parser does not
        with pytest.raises(type(exc)):
            read_csv(path)
        return
    got = read_csv(path)
    assert got.schema == expected.schema
    assert got.equals(expected, null_equal=True)


def test_plain_number_patterns_hold():
    """The polars installed infers the plain patterns' shapes as the fast path relies on (else it is off)."""
    assert _plain_shapes_infer()
    matches = pl.Series(["-" + "9" * 18, "0" * 18 + "." + "0" * 18, "+4", "1.", "1e5", "9" * 19, " 5"])
    assert matches.str.contains(PLAIN_PATTERNS[pl.Int64]).to_list() == [True] + [False] * 6
    assert matches.str.contains(PLAIN_PATTERNS[pl.Float64]).to_list() == [True, True] + [False] * 5


@given(rows=st.lists(st.lists(st.sampled_from(["1", "x", "a, b", "a\nb", 'say ""hi""', ""]), min_size=3, max_size=3)))
@FUZZ
def test_quoted_columns_matches_per_column_scan(rows):
    """`_quoted_columns` (one select) against the per-column scan it stands for, on files quoted right
    (each comma or line break value quoted) and wrong (a quoted plain value, an escaped quote)."""
    fields = [
        [f'"{v}"' if any(c in v for c in ',\n"') or v == "x" and k == 1 else v for k, v in enumerate(r)] for r in rows
    ]
    data = ("a,b,c\n" + "".join(",".join(r) + "\n" for r in fields)).encode()
    text = pl.read_csv(data, infer_schema=False)
    assert _quoted_columns(data, text) == _quoted_columns_per_column(data, text)


def _quoted_columns_per_column(data: bytes, text: pl.DataFrame) -> set[str] | None:
    needed, columns, holds_quote = 0, set(), False
    for name in text.columns:
        holds_quote |= bool(text[name].str.contains('"', literal=True).any())
        special = int(text[name].str.contains("[,\n]").sum())
        needed += 2 * special
        columns |= {name} if special else set()
    return None if holds_quote or data.count(b'"') != needed else columns


@pytest.mark.parametrize(
    "values",
    [["x, y", None], ['x"y', "p,q"], [None, None], ["a\nb", "1"], ['"', "a,b", "c,d"]],
)
def test_quoted_columns_counts(values):
    """Frames with as many quotes in the file as their special values need, one of them holding a quote
    itself (which polars' reader would not give for such a file, but the check must not rely on it)."""
    text = pl.DataFrame(
        {"a": values, "b": ["1"] * len(values), "c": [None] * len(values)}, schema=dict.fromkeys("abc", pl.String)
    )
    for data in (b'a,b,c\n""', b'a,b,c\n""""', b"a,b,c\n"):
        assert _quoted_columns(data, text) == _quoted_columns_per_column(data, text)


@given(
    nulls=st.lists(st.booleans(), max_size=3 * HEAD_ROWS),
    leading=st.sampled_from([0, HEAD_ROWS - CSV_SAMPLE, HEAD_ROWS - 1, HEAD_ROWS, 2 * HEAD_ROWS]),
)
@FUZZ
def test_first_values_are_the_first_non_null_values(nulls, leading):
    column = pl.Series(
        "a", [None] * leading + [None if null else str(k) for k, null in enumerate(nulls)], dtype=pl.String
    )
    assert _first_values(column, CSV_SAMPLE).to_list() == column.drop_nulls().head(CSV_SAMPLE).to_list()


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

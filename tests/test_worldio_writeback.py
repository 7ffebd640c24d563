"""The JSON envelope reader's write-back check by NDJSON (`_array_writes_back`) says what the plain one
(`_writes_back`: the frame's JSON array compared with the body) says, on tricky frames and on bodies a
byte away from them; and the envelopes it serves still read as the stdlib parser reads them."""

from __future__ import annotations

import io
import json

import numpy as np
import polars as pl
import pytest

from auditors.worldio import (
    JSON_HEADER,
    NEWLINE,
    _array_is_joined_lines,
    _array_writes_back,
    _flat_array,
    _writes_back,
    read_json_records,
)
from contracts.safeio import loads

TRICKY = {
    "floats": pl.DataFrame({"f": [1.0, None, float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e300, 5e-324]}),
    "ints": pl.DataFrame({"i": [1, None, -3, 2**63 - 1, -(2**63), 0, 5, 6, 7]}),
    "texts": pl.DataFrame({"s": ['x\n"y', None, "\u00e9\u2028", "\x01\x7f", "\\", "},{", "", "\r\t", "\U0001f600"]}),
    "separator in text": pl.DataFrame({"s": ["a", "},{", "b"], "n": [1, 2, 3]}),
    "lone separator": pl.DataFrame({"s": ["},{"]}),
    "booleans": pl.DataFrame({"b": [True, None, False]}),
    "nulls only": pl.DataFrame({"n": [None, None]}),
    "typed nulls": pl.DataFrame({"x": [None, None]}, schema={"x": pl.Float64}),
    "ties": pl.DataFrame({"a": [1, 1, 1], "b": ["x", "x", "x"]}),
    "one row": pl.DataFrame({"a": [1.5], "b": ["x"]}),
    "empty": pl.DataFrame({"a": []}, schema={"a": pl.Int64}),
    "no columns": pl.DataFrame(),
    "dates": pl.DataFrame({"d": [None]}).with_columns(pl.lit("2024-01-01").str.to_date().alias("d")),
    "nested": pl.DataFrame({"l": [[1, 2], [3]]}),
}


def _body(frame: pl.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.write_json(out)
    return out.getvalue()


def _lines(body: bytes) -> bytes | None:
    """What `read_json_records` makes of an array's body: `},{` and the closing bracket line breaks."""
    marked = np.frombuffer(body, dtype=np.uint8).copy()
    if not _flat_array(body, marked) or not (body.startswith(b"[") and body.endswith(b"]")):
        return None
    marked[-1] = NEWLINE
    return marked[1:].tobytes()


def _variants(body: bytes) -> list[bytes]:
    """The body, and bodies a byte away (changed, dropped, a line break in place of a comma or added)."""
    out = [body, body[:-1] + b" ]", body.replace(b",", b"\n", 1), body[:1] + b"\n" + body[1:]]
    for at in {1, len(body) // 2, max(len(body) - 2, 1)}:
        if 0 < at < len(body) - 1:
            out.append(body[:at] + body[at + 1 :])
            out.append(body[:at] + (b"0" if body[at : at + 1] != b"0" else b"1") + body[at + 1 :])
    return out


def test_polars_writes_the_array_as_joined_lines():
    assert _array_is_joined_lines()


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_ndjson_write_back_agrees_with_the_array(name):
    frame = TRICKY[name]
    for body in _variants(_body(frame)):
        lines = _lines(body)
        assert _array_writes_back(frame, body, lines) == _writes_back(frame, body), (name, body[:80])
        assert _array_writes_back(frame, body, None) == _writes_back(frame, body)


def test_other_frames_do_not_write_back():
    """A frame one value away from the body's is refused both ways."""
    frame = TRICKY["texts"]
    body = _body(frame)
    for other in (frame.with_row_index().drop("index").head(8), frame.reverse(), TRICKY["separator in text"]):
        assert _array_writes_back(other, body, _lines(body)) == _writes_back(other, body) == False  # noqa: E712


@pytest.mark.parametrize("name", ["floats", "ints", "texts", "separator in text", "booleans", "ties", "one row"])
def test_envelopes_read_as_the_stdlib_reads_them(name):
    frame = TRICKY[name]
    header = json.dumps({"system": "crm", "record_count": frame.height})[:-1]
    data = f'{header}, "records": '.encode() + _body(frame) + b"}\n"
    assert JSON_HEADER.match(data)
    got = read_json_records(data)
    if got is None:  # not served (e.g. a text with a line break): the plain way reads it
        return
    expected = pl.DataFrame(loads(data, where="x")["records"], infer_schema_length=None)
    assert got.schema == expected.schema and got.equals(expected, null_equal=True)


# --- the events' means on the grid (`_with_event_means`), every event in it or not -------------------------


@pytest.mark.parametrize("seed", range(8))
def test_event_means_on_the_grid_are_the_joined_group_means(seed):
    """Columns with a value on every event (the shared count) and columns with blanks, NaN and infinities
    (the weighted count), -0.0, sums that overflow, ties; events all in the grid or some outside it."""
    from auditors.dataset import _with_event_means, group_means

    rng = np.random.default_rng(700 + seed)
    periods, units = int(rng.integers(1, 20)), np.sort(rng.choice(50, int(rng.integers(1, 6)), replace=False))
    panel = pl.DataFrame(
        {"unit_id": np.repeat(units, periods), "day": np.tile(np.arange(periods), len(units)), "open": 1},
        schema={"unit_id": pl.Int64, "day": pl.Int64, "open": pl.Int8},
    )
    n = 0 if seed == 0 else int(rng.integers(1, 300))
    unit, day = rng.choice(units, n), rng.integers(0, periods, n)
    if seed % 2:  # some events outside the grid: another unit, a day past the end
        unit[rng.random(n) < 0.1], day[rng.random(n) < 0.1] = 999, periods
    full = rng.choice([-0.0, 0.0, 1.5, 1e308, -1e308, 3.0], n)  # ties, signed zeros, sums past the largest float
    gaps = rng.standard_normal(n)
    gaps[rng.random(n) < 0.2], gaps[rng.random(n) < 0.05], gaps[rng.random(n) < 0.05] = np.nan, np.inf, -np.inf
    events = pl.DataFrame(
        {
            "unit_id": unit,
            "day": day,
            "full": full,
            "gaps": gaps,
            "count": rng.integers(-3, 3, n),
            "blank": pl.Series(rng.integers(0, 9, n)).set(pl.Series(rng.random(n) < 0.3), None),
        },
        schema_overrides={"unit_id": pl.Int64, "day": pl.Int64},
    )
    columns = ["full", "gaps", "count", "blank"]
    got = _with_event_means(panel, events, columns)
    want = panel.join(group_means(events, columns), on=["unit_id", "day"], how="left", maintain_order="left")
    assert got.schema == want.schema
    assert got.equals(want, null_equal=True)
    assert not any(got[c].is_nan().any() for c in columns)  # blanks are nulls, never NaN

"""More of the auditor's fast paths against its plain code, on random and hostile inputs: keys read off their
bytes and by the regex, braces counted in blocks and by the bytes' counts, rows of ids looked up in a table of
their span and by a join."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from auditors import bytescan, worldio
from auditors.bytescan import MAX_KEY_BYTES, MAX_KEY_DIGITS, MAX_KEY_WIDTHS, trailing_digit_numbers
from auditors.checks import _range, _range_stats
from auditors.dataset import DENSE_IDS_SPAN, row_of
from auditors.worldio import _flat_array, _infer_columns, key_numbers, key_to_int

INT64_MAX = 2**63 - 1


def _regex(keys: pl.Series) -> pl.Series | str:
    """The plain reading (or its error, worded)."""
    try:
        return keys.to_frame().select(key_to_int(pl.col(keys.name))).to_series()
    except pl.exceptions.PolarsError as exc:
        return f"{type(exc).__name__}: {exc}"


def _assert_reads_as_the_regex(keys: pl.Series) -> None:
    expected = _regex(keys)
    fast = trailing_digit_numbers(keys)
    if fast is not None:  # the fast path answers only where the regex reads a number for every key
        assert not isinstance(expected, str)
        assert fast.name == expected.name and fast.dtype == expected.dtype
        assert fast.equals(expected, null_equal=True)
    try:
        got = key_numbers(keys)
    except pl.exceptions.PolarsError as exc:
        got = f"{type(exc).__name__}: {exc}"
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got.name == expected.name and got.dtype == expected.dtype
        assert got.equals(expected, null_equal=True)


def _random_keys(rng: np.random.Generator, n: int) -> list[str | None]:
    prefixes = ["", "R-", "r", "RES_", "CSC-", "a1b", "x9-", "ch", "Ab c", "-", "É", "٣", "R-0"]
    widths = [0, 1, 3, 5, 6, 17, 18, 19, 21]
    keys: list[str | None] = []
    for _ in range(n):
        prefix = prefixes[rng.integers(len(prefixes))]
        width = widths[rng.integers(len(widths))]
        digits = "".join(str(d) for d in rng.integers(0, 10, rng.integers(1, 22)))
        key = f"{prefix}{digits.zfill(width)}"
        roll = rng.random()
        if roll < 0.03:
            key = None
        elif roll < 0.05:
            key = key + rng.choice([" ", "\t", "x", "", "١"])
        keys.append(key)
    return keys


@pytest.mark.parametrize("seed", range(30))
def test_random_keys_read_as_the_regex_reads_them(seed):
    rng = np.random.default_rng(seed)
    _assert_reads_as_the_regex(pl.Series("k", _random_keys(rng, int(rng.integers(1, 400)))))


@pytest.mark.parametrize("seed", range(20))
def test_generated_key_styles_read_as_the_regex_reads_them(seed):
    """Keys as the generator writes them (a fixed prefix, padded or not): the fast path reads them all."""
    rng = np.random.default_rng(seed)
    numbers = rng.integers(0, 10 ** int(rng.integers(1, 9)), 500)
    style = ["CSC-{:06d}", "D{:05d}", "ch{}", "D_{:03d}", "{}", "CH-{:04d}"][seed % 6]
    keys = pl.Series("k", [style.format(int(x)) for x in numbers])
    if seed % 3 == 0:
        keys = keys.scatter(rng.choice(500, 20, replace=False), None)
    assert trailing_digit_numbers(keys) is not None
    _assert_reads_as_the_regex(keys)


@pytest.mark.parametrize(
    "keys",
    [
        ["A-" + "9" * MAX_KEY_DIGITS, "A-" + "0" * MAX_KEY_DIGITS],  # the longest run read: below 10**18
        ["A-" + "9" * (MAX_KEY_DIGITS + 1), "A-1" + "0" * MAX_KEY_DIGITS],  # one more digit: the cast decides
        ["A-" + "9" * 19, "A-" + "1" * 19],
        ["A-" + "9" * 20, "A-1"],  # too large for an Int64: the error
        ["0" * 30 + "12", "7"],  # many leading zeros: fits, read by the cast
        [str(INT64_MAX), "R-" + str(INT64_MAX)],
        ["a1b22", "ab122", "a1b23"],  # runs starting at different positions in keys of one length
        ["1", "12", "123", "a1", "b12"],
        ["A-1", "A-12", "A-x"],  # a key without a trailing digit
        ["A-1", "", "A-2"],  # an empty key
        ["A-1 ", "A-2"],  # a trailing space: the regex skips it
        ["A-١٢", "A-12"],  # Unicode digits: the regex reads them
        ["É-12", "E-12"],  # non-ASCII before the digits
        ["x" * (MAX_KEY_BYTES + 1) + "5", "x5"],  # a key longer than the fast path takes
        ["x" * MAX_KEY_BYTES + "5", "x5"],
        [f"{'x' * k}{k}" for k in range(MAX_KEY_WIDTHS + 3)],  # more lengths than the fast path takes
        [None, None],
        [None, "A-1", None],
        ["0", "00", "000"],
        ["/9", ":9", "9/", "9:"],  # the bytes either side of the digits
    ],
)
def test_hostile_keys_read_as_the_regex_reads_them(keys):
    _assert_reads_as_the_regex(pl.Series("k", keys * 5, dtype=pl.String))


def test_keys_of_one_length_whose_runs_differ_go_the_plain_way():
    keys = pl.Series("k", ["a1b22", "ab122"])
    assert trailing_digit_numbers(keys) is None
    _assert_reads_as_the_regex(keys)


def _joined_rows(keys: pl.Series, ids: pl.Series) -> np.ndarray:
    """Each key's row in `ids` by a join (-1 where none)."""
    left = keys.rename("key").to_frame().with_row_index("at")
    right = ids.rename("key").to_frame().with_row_index("row")
    joined = left.join(right, on="key", how="left", maintain_order="left").sort("at")
    assert joined.height == keys.len()  # distinct ids: one row at most per key
    return joined["row"].cast(pl.Int64).fill_null(-1).to_numpy()


@pytest.mark.parametrize("seed", range(30))
def test_rows_of_ids_in_a_short_span_are_the_join(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 600))
    low = int(rng.choice([0, -50, 1_718_556, INT64_MAX - 4 * n, -(2**63)]))
    span = int(rng.integers(n, DENSE_IDS_SPAN * n + 1))
    ids = low + rng.choice(span, n, replace=False).astype(np.int64)
    if rng.random() < 0.5:
        ids = np.sort(ids)
    wanted = np.concatenate(
        [rng.choice(ids, 300), low + rng.integers(-10, span + 10, 300), [-(2**63), INT64_MAX, 0, low, ids.max()]]
    )
    wanted = np.clip(wanted, -(2**63), INT64_MAX).astype(np.int64)  # near the ends the offsets may wrap
    keys = pl.Series("k", wanted, dtype=pl.Int64).scatter(rng.choice(len(wanted), 7, replace=False), None)
    table = pl.Series("i", ids, dtype=pl.Int64)
    got = row_of(keys, table)
    assert got is not None
    assert np.array_equal(got, _joined_rows(keys, table))
    twice = pl.concat([table, table.slice(int(rng.integers(n)), 1)])
    assert row_of(keys, twice) is None  # an id twice: the join repeats rows, the caller joins


@pytest.mark.parametrize("spread", [DENSE_IDS_SPAN - 1, DENSE_IDS_SPAN, DENSE_IDS_SPAN + 1, 10**12])
def test_rows_of_ids_either_side_of_the_span_limit_are_the_join(spread):
    rng = np.random.default_rng(spread % 97)
    ids = np.unique(rng.integers(0, 200 * spread, 200)).astype(np.int64)
    ids[-1] = ids[0] + spread * len(ids)  # the span right at (or past) the limit
    ids = np.unique(ids)
    keys = pl.Series("k", np.concatenate([ids[::3], ids[:5] + 1]), dtype=pl.Int64)
    table = pl.Series("i", rng.permutation(ids), dtype=pl.Int64)
    assert np.array_equal(row_of(keys, table), _joined_rows(keys, table))


def _flat_array_plain(body: bytes) -> bool:
    return body.count(b"[") == 1 and body.count(b"{") - body.count(b"},{") <= 1


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("seed", range(20))
def test_braces_counted_in_blocks_are_the_counts(seed, block, monkeypatch):
    monkeypatch.setattr(bytescan, "BRACE_BLOCK", block)
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'{},\n["a1 :', dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), int(rng.integers(0, 300)))].tobytes()
    pieces = [b"},{", b"\n{", b"{", b"[", b"},{},{", b"\n\n{{"]
    data += b"".join(pieces[i] for i in rng.integers(0, len(pieces), 20))
    for text in (data, data[::-1], b"{" + data, data + b"},{"):
        assert bytescan.braces_not_after(text, b"},") == text.count(b"{") - text.count(b"},{")
        assert bytescan.braces_not_after(text, b"\n") == text.count(b"{") - text.count(b"\n{")
        assert _flat_array(text) == _flat_array_plain(text)


@pytest.mark.parametrize(
    "body",
    [b"", b"[", b"[]", b"[[]", b"[{},{}]", b"[{},{},{]", b"[{}, {}]", b"[{{}}]", b"{", b"}{", b"},{", b"[]]"],
)
def test_flat_arrays_are_what_the_counts_say(body):
    assert _flat_array(body) == _flat_array_plain(body)


def _infer_columns_by_polars(columns: dict[str, pl.Series]) -> dict[str, pl.DataType]:
    """The CSV of the columns built by polars expressions (the reference for `_infer_columns`)."""
    height = max(column.len() for column in columns.values())
    padded = pl.DataFrame(
        [
            column.extend_constant(None, height - column.len()).alias(f"c{k}")
            for k, column in enumerate(columns.values())
        ]
    )
    lines = padded.select(pl.concat_str(pl.all().fill_null(""), separator=",")).to_series().str.join("\n").item()
    inferred = pl.read_csv(f"{','.join(padded.columns)}\n{lines}\n".encode(), infer_schema_length=None).schema
    return {name: inferred[f"c{k}"] for k, name in enumerate(columns)}


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("joined_by", ["python", "polars"])
def test_columns_inferred_from_python_text_as_from_polars_text(seed, joined_by, monkeypatch):
    if joined_by == "polars":  # what many texts take (the Python join would be slower on them)
        monkeypatch.setattr(worldio, "PYTHON_JOIN_VALUES", 0)
    rng = np.random.default_rng(seed)
    pool = ["1", "-2", "3.5", "1e5", "0x1", "true", "False", "NaN", "inf", "007", "2024-03-01", "a", "é", "9" * 20]
    columns = {}
    for k in range(int(rng.integers(1, 6))):
        values = [str(rng.choice(pool)) for _ in range(int(rng.integers(1, 80)))]
        column = pl.Series(f"x{k}", values, dtype=pl.String)
        if rng.random() < 0.3:
            column = column.scatter(int(rng.integers(column.len())), None)
        columns[f"name {k}"] = column
    assert _infer_columns(columns) == _infer_columns_by_polars(columns)


def _range_one_by_one(tables, inv):
    try:
        return tables[inv.table].select(_range(inv.column)).row(0)
    except (Exception, pl.exceptions.PanicException) as exc:  # noqa: BLE001
        return type(exc).__name__


@pytest.mark.parametrize("seed", range(20))
def test_ranges_of_a_table_in_one_select_are_each_ones_own(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 50))
    floats = rng.normal(size=n)
    floats[rng.random(n) < 0.2] = np.nan
    panel = pl.DataFrame(
        {
            "x": floats,
            "k": rng.integers(-(2**62), 2**62, n),
            "flag": rng.integers(0, 2, n).astype(np.int8),
            "blank": pl.Series([None] * n, dtype=pl.Float64),
            "text": [str(v) for v in rng.integers(0, 9, n)],
        }
    ).with_columns(pl.col("x").fill_nan(None).fill_null(float("nan")).alias("nan"))
    if rng.random() < 0.3:
        panel = panel.with_columns(pl.Series("text", ["x"] * n))  # text that is no number: the cast fails
    tables = {"panel": panel, "units": pl.DataFrame({"cap": rng.integers(1, 9, 5)})}
    columns = [("panel", c) for c in panel.columns] + [("units", "cap"), ("units", "missing"), ("nowhere", "x")]
    invariants = [
        SimpleNamespace(kind=str(rng.choice(["range", "range", "unique_key"])), table=t, column=c)
        for t, c in (columns[i] for i in rng.integers(0, len(columns), 12))
    ]
    stats = _range_stats(tables, invariants)
    ranged = [v for v in invariants if v.kind == "range" and v.table in tables and v.column in tables[v.table].columns]
    for k, inv in enumerate(invariants):
        if k in stats:
            assert stats[k] == _range_one_by_one(tables, inv)
        elif inv in ranged:  # left out only when one of its table's ranges cannot be computed
            assert any(isinstance(_range_one_by_one(tables, v), str) for v in ranged if v.table == inv.table)

"""The projection check's fast paths give what its plain code gives on random and awkward inputs: frames
compared by exact equality first (the closeness test only where they differ), and blank rows of a numeric
column read off its float values (the gather only for text or for rows out of range)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from auditors.checks import _blank_rows, _blanks, frames_match, undo

AWKWARD = [0.0, -0.0, 1.0, 1.0 + 1e-7, 1.0 + 1e-5, 1e-10, -1e-10, 1e300, np.inf, -np.inf, np.nan, None]


def _plain_frames_match(observed: pl.DataFrame, expected: pl.DataFrame) -> str | None:
    """frames_match as it was before its fast paths."""
    if observed.columns != expected.columns:
        return f"columns {observed.columns} differ from {expected.columns}"
    if observed.height != expected.height:
        return f"{observed.height} rows, expected {expected.height}"
    for name in expected.columns:
        a, b = observed[name], expected[name]
        if b.dtype.is_numeric() and a.dtype.is_numeric():
            x, y = a.cast(pl.Float64).to_numpy(), b.cast(pl.Float64).to_numpy()
            same = np.isclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True)
        else:
            same = (a.cast(pl.String).fill_null("\0") == b.cast(pl.String).fill_null("\0")).to_numpy()
        if not same.all():
            row = int(np.flatnonzero(~same)[0])
            return f"column {name!r} row {row}: {a[row]!r} vs {b[row]!r}"
    return None


def _column(rng: np.random.Generator, kind: str, n: int) -> pl.Series:
    if kind == "float":
        return pl.Series("c", [AWKWARD[i] for i in rng.integers(0, len(AWKWARD), n)], dtype=pl.Float64)
    if kind == "int":
        values = rng.integers(-3, 3, n).tolist()
        return pl.Series("c", [None if rng.random() < 0.2 else v for v in values], dtype=pl.Int64)
    texts = ["a", "b", "", "\0", "é", None]
    return pl.Series("c", [texts[i] for i in rng.integers(0, len(texts), n)], dtype=pl.String)


def _perturbed(rng: np.random.Generator, column: pl.Series, kind_b: str) -> pl.Series:
    """The column itself, or with a few values changed (some only within the tolerance), or another type."""
    if rng.random() < 0.3:
        return column
    values = column.to_list()
    for i in rng.integers(0, len(values), rng.integers(1, 3)) if values else []:
        if column.dtype == pl.String:
            values[i] = ["a", "b", None, "\0", "x"][rng.integers(0, 5)]
        else:
            values[i] = AWKWARD[rng.integers(0, len(AWKWARD))]
    if kind_b == "string":
        return pl.Series("c", [None if v is None else str(v) for v in values], dtype=pl.String)
    return pl.Series("c", values, dtype=pl.Float64 if column.dtype != pl.String else pl.String, strict=False)


@pytest.mark.parametrize("seed", range(300))
def test_frames_match_is_the_plain_comparison(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 12))
    kinds = ["float", "int", "string"]
    observed, expected = {}, {}
    for k in range(int(rng.integers(1, 4))):
        kind = kinds[rng.integers(0, 3)]
        a = _column(rng, kind, n)
        b = _perturbed(rng, a, kinds[rng.integers(0, 3)] if rng.random() < 0.1 else kind)
        observed[f"c{k}"], expected[f"c{k}"] = a, b
    a_frame, b_frame = pl.DataFrame(observed), pl.DataFrame(expected)
    assert frames_match(a_frame, b_frame) == _plain_frames_match(a_frame, b_frame)
    assert frames_match(b_frame, a_frame) == _plain_frames_match(b_frame, a_frame)


def test_frames_match_keeps_the_tolerance_and_the_blank_text():
    x = pl.DataFrame({"v": [1.0, np.inf, np.nan, None], "t": ["a", None, "b", "c"]})
    close = pl.DataFrame({"v": [1.0 + 1e-7, np.inf, None, np.nan], "t": ["a", None, "b", "c"]})
    assert frames_match(x, close) is None
    assert frames_match(x, x.with_columns(pl.Series("v", [1.0, -np.inf, np.nan, None]))) is not None
    assert frames_match(x, x.with_columns(pl.Series("t", ["a", "\0", "b", "c"]))) is None  # as the plain code
    assert frames_match(x, x.with_columns(pl.Series("t", ["a", "", "b", "c"]))) is not None


SAME_TYPE_VALUES = {
    pl.Float64: [0.0, -0.0, 1.0, 1.0 + 1e-12, np.nan, None, np.inf],
    pl.Float32: [0.0, -0.0, 1.5, np.nan, None],
    pl.Int64: [0, 1, -1, 2**53, 2**53 + 1, None],  # 2**53 + 1 is 2**53 as a float, as the plain code compares
    pl.String: ["a", "", "\0", None],
}


@pytest.mark.parametrize("seed", range(200))
def test_frames_of_one_type_per_column_match_as_the_plain_comparison(seed):
    """Columns of the same type on both sides (the generator's case, compared by equality first)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 8))
    observed, expected = {}, {}
    for k, dtype in enumerate(list(SAME_TYPE_VALUES)[: int(rng.integers(1, 5))]):
        values = SAME_TYPE_VALUES[dtype]
        a = [values[i] for i in rng.integers(0, len(values), n)]
        b = [values[i] if rng.random() < 0.15 else v for v, i in zip(a, rng.integers(0, len(values), n), strict=True)]
        observed[f"c{k}"], expected[f"c{k}"] = pl.Series(a, dtype=dtype), pl.Series(b, dtype=dtype)
    a_frame, b_frame = pl.DataFrame(observed), pl.DataFrame(expected)
    assert frames_match(a_frame, b_frame) == _plain_frames_match(a_frame, b_frame)


def _plain_rows(rng: np.random.Generator, n: int):
    picks = [
        rng.integers(0, max(n, 1), rng.integers(0, 6)).tolist(),  # in range, maybe repeated, maybe empty
        [n],  # just beyond
        [-1],  # negative
        [0.0] if n else [],  # a float row number
        np.arange(0, n, 2),  # an array, as `_rows` gives
        [2**70],  # beyond any integer
    ]
    return picks[rng.integers(0, len(picks))]


@pytest.mark.parametrize("seed", range(300))
def test_blank_rows_are_the_gathered_blanks(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 10))
    kind = ["float", "int", "string"][rng.integers(0, 3)]
    column = _column(rng, kind, n)
    numeric = column.dtype.is_numeric()
    values = column.cast(pl.Float64).to_numpy().copy() if numeric else np.array(column.to_list(), dtype=object)
    rows = _plain_rows(rng, n)

    def outcome(fn):
        try:
            return ("ok", fn().tolist())
        except Exception as exc:  # noqa: BLE001 - the same rows must fail the same way
            return ("error", type(exc).__name__, str(exc))

    assert outcome(lambda: _blank_rows(column, values, rows, numeric)) == outcome(lambda: _blanks(column, rows))


def test_undo_of_blanks_refuses_a_row_holding_a_value():
    frame = pl.DataFrame({"v": [1.0, None, float("nan"), 4.0]})
    restored = undo(frame, [{"kind": "missing", "column": "v", "rows": [1, 2], "values": [2.0, 3.0]}])
    assert restored["v"].to_list() == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="row 3 is recorded as blanked but holds"):
        undo(frame, [{"kind": "missing", "column": "v", "rows": [1, 3], "values": [2.0, 3.0]}])
    with pytest.raises(pl.exceptions.OutOfBoundsError):
        undo(frame, [{"kind": "missing", "column": "v", "rows": [1, 4], "values": [2.0, 3.0]}])


@pytest.mark.parametrize("seed", range(200))
def test_rows_of_ranges_are_the_concatenated_aranges(seed):
    from auditors.checks import _rows, _rows_plain

    rng = np.random.default_rng(seed)
    ranges = [[int(a), int(b)] for a, b in rng.integers(-3, 30, (rng.integers(0, 8), 2))]
    got, want = _rows(ranges), _rows_plain(ranges)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_rows_of_ranges_that_are_not_integer_pairs_are_the_plain_ones():
    from auditors.checks import _rows, _rows_plain

    for ranges in ([[1.5, 3]], [[0, 0]], [[5, 2], [0, 1]], [[2**70, 2**70 + 2]], [[1, 2, 3]], [[1, 2], [3]]):
        assert outcome(lambda r=ranges: _rows(r).tolist()) == outcome(lambda r=ranges: _rows_plain(r).tolist())


def outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("seed", range(60))
def test_a_key_on_its_own_rows_is_the_looked_up_key(seed):
    """An entity file's key column taken from its own rows equals the lookup by id (ids unique or not)."""
    from auditors.checks import _shown, _shown_on_own_rows
    from contracts.model import Deliverable, DeliveredColumn

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    ids = rng.permutation(n * 2)[:n] if seed % 3 else rng.integers(0, n, n)  # unique, or (often) repeated
    events = pl.DataFrame(
        {
            "event_id": ids.astype(np.int64),
            "code": [f"E{k}" for k in rng.integers(0, 1000, n)],
            "uuid": [None if rng.random() < 0.1 else f"u{k}" for k in range(n)],
        }
    )
    tables = {"events": events.sample(fraction=0.7, seed=seed) if seed % 2 else events}
    if seed % 10 == 0:
        tables["events"] = events.clear()
    for fmt, grain in [("{P}{n:05d}", "events"), ("uuid", "events"), ("uuid", "event_detail")]:
        column = DeliveredColumn(name="Key", source="events.event_id", format=fmt)
        d = Deliverable(file="f.csv", system="s", format="csv", grain=grain, source_tables=["events"], columns=[column])
        own = _shown_on_own_rows(d, column, tables)
        if own is None:
            assert tables["events"].is_empty() or tables["events"]["event_id"].is_duplicated().any()
            continue
        plain = tables["events"].select(_shown(d, column, tables, pl.col("event_id")).alias("Key"))
        assert tables["events"].select(own).equals(plain)


@pytest.mark.parametrize("seed", range(100))
def test_a_series_hash_is_the_column_hash_of_its_values(seed):
    from contracts.hashing import column_sha256, series_sha256

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    texts = ["", "a", "é", "\x1f", "x y", "€", None]
    kind = seed % 4
    if kind == 0:
        series = pl.Series("c", [texts[i] for i in rng.integers(0, len(texts), n)], dtype=pl.String)
    elif kind == 1:
        series = pl.Series(
            "c", [None if rng.random() < 0.2 else int(v) for v in rng.integers(-5, 5, n)], dtype=pl.Int64
        )
    elif kind == 2:
        series = pl.Series("c", [AWKWARD[i] for i in rng.integers(0, len(AWKWARD), n)], dtype=pl.Float64)
    else:
        series = pl.Series("c", [None] * n, dtype=pl.String)
    assert series_sha256(series) == column_sha256(series.to_numpy())


@pytest.mark.parametrize("ranges", [[[0, 2**62]] * 4, [[-(2**63), 2**63 - 1]], [[0, 2**41], [2**41, 2**42]]])
def test_rows_of_ranges_too_large_to_sum_are_refused_as_the_plain_way_refuses(ranges):
    """Found by review: summed in int64, such lengths wrapped and numpy crashed the process (or gave no
    rows); they go the plain way, which refuses them with an error the projection check reports."""
    from auditors.checks import _rows, _rows_plain

    with pytest.raises((ValueError, MemoryError)) as plain:
        _rows_plain(ranges)
    with pytest.raises(plain.type):
        _rows(ranges)


KEY_TEXTS = ["A-1", "a1", "a 1", "B-2", "b2", "é", "", "x", None]


@pytest.mark.parametrize("seed", range(200))
def test_undone_key_variants_are_the_value_by_value_mapping(seed):
    """Only the rows showing a variant are replaced: the column equals each value mapped by itself (a
    swap, a variant that is another key's original, blanks, a variant never shown), the frame untouched."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    frame = pl.DataFrame({"k": [KEY_TEXTS[i] for i in rng.integers(0, len(KEY_TEXTS), n)], "n": range(n)})
    texts = [t for t in KEY_TEXTS if t is not None]
    pairs = rng.integers(0, len(texts), (rng.integers(1, 5), 2))
    changes = [[texts[a], texts[b], "how"] for a, b in pairs]
    before = frame.clone()
    got = outcome(lambda: undo(frame, [{"kind": "id_variants", "column": "k", "changes": changes}])["k"].to_list())
    back = {variant: original for original, variant, _ in changes}
    listed = frame["k"].to_list()
    never = [v for v in back if v not in set(listed)]
    if never:
        assert got == ("ValueError", f"k should show the recorded variant {never[0]!r}, which it never does")
    else:
        assert got == [back.get(v, v) for v in listed]
    assert frame.equals(before)


ORDER_COLUMNS = {
    "day": lambda rng, n: pl.Series(rng.integers(0, 400, n), dtype=pl.Int64),
    "key": lambda rng, n: pl.Series(rng.integers(-5, 5, n), dtype=pl.Int32),
    "wide": lambda rng, n: pl.Series(rng.integers(-(2**62), 2**62, n), dtype=pl.Int64),  # key too wide
    "edge": lambda rng, n: pl.Series(rng.choice([-(2**63), 2**63 - 1, 0], n), dtype=pl.Int64),
    "small": lambda rng, n: pl.Series(rng.integers(0, 3, n), dtype=pl.UInt8),  # ties
    "unique": lambda rng, n: pl.Series(rng.permutation(n), dtype=pl.Int64),  # none
    "blank": lambda rng, n: pl.Series([None if v < 2 else int(v) for v in rng.integers(0, 9, n)], dtype=pl.Int64),
    "text": lambda rng, n: pl.Series([f"k{v}" for v in rng.integers(0, 4, n)]),
    "float": lambda rng, n: pl.Series(rng.integers(0, 4, n).astype(float)),
}


@pytest.mark.parametrize("seed", range(300))
def test_rows_sorted_by_a_combined_key_are_the_stable_sort(seed, monkeypatch):
    """sorted_rows is the stable multi-column sort: ties keep their order (the row number shows it), and
    orders it cannot key (text, floats, blanks, too wide, repeated or unknown names) go the plain way."""
    from auditors import checks

    rng = np.random.default_rng(seed)
    monkeypatch.setattr(checks, "KEYED_SORT_ROWS", 2)  # the key on small frames too
    monkeypatch.setattr(checks, "RUN_ROWS", [1, 64, 10**9][seed % 3])  # sorted as runs, or unstably first
    n = int(rng.integers(0, 40))
    view = pl.DataFrame({name: make(rng, n) for name, make in ORDER_COLUMNS.items()}).with_row_index("row")
    if seed % 7 == 0:
        view = view.sort(["day", "key"])  # already in order
    names = list(ORDER_COLUMNS)
    order = [names[i] for i in rng.choice(len(names), int(rng.integers(1, 4)), replace=False)]
    if seed % 11 == 0:
        order = [order[0], "missing"] if seed % 2 else order[:1] * 2
    plain = outcome(lambda: view.sort(order, maintain_order=True).to_dict(as_series=False))
    assert outcome(lambda: checks.sorted_rows(view, order).to_dict(as_series=False)) == plain


def test_rows_sorted_by_a_combined_key_on_a_large_frame():
    from auditors.checks import KEYED_SORT_ROWS, sorted_rows

    rng = np.random.default_rng(0)
    n = KEYED_SORT_ROWS * 3
    view = pl.DataFrame({"day": rng.integers(0, 300, n), "unit": rng.integers(1000, 1090, n), "row": range(n)})
    for order in (["day", "unit"], ["unit", "day"], ["day"]):
        assert sorted_rows(view, order).equals(view.sort(order, maintain_order=True))


def _plain_table_view(d, contract, tables):
    """_table_view as it was before it filtered only the columns it reads."""
    from auditors.checks import BASE_TABLE, _replace, _shown, _shown_on_own_rows
    from contracts.keys import shown

    base = BASE_TABLE[d.grain]
    frame = tables[base]
    if d.grain == "panel":
        frame = frame.filter(pl.col("open") == 1)
    if d.grain == "event_detail":
        surveys = {v.name for v in contract.variables if v.observe == "scale"}
        answered = [f"responded_{c.source.split('.', 1)[1]}" for c in d.columns if c.source.split(".", 1)[1] in surveys]
        if answered:
            frame = frame.filter(pl.any_horizontal([pl.col(a) == 1 for a in answered]))
    exprs = []
    for c in d.columns:
        table, column = c.source.split(".", 1)
        if shown(d, c) is not None:
            own = _shown_on_own_rows(d, c, tables)
            exprs.append(own if own is not None else _shown(d, c, tables, pl.col(column)).alias(c.name))
            continue
        if table == "units" and base != "units":
            units = tables["units"]
            exprs.append(_replace(pl.col("unit_id"), units["unit_id"], units[column]).alias(c.name))
            continue
        expr = pl.col(column)
        if c.decimals is not None and frame.schema[column].is_float():
            expr = expr.round(c.decimals).fill_nan(None)
        exprs.append(expr.alias(c.name))
    return frame.select(exprs)


def test_reported_rows_of_the_columns_read_are_those_of_the_whole_table(world_dirs):
    """A daily or survey file's view filters only the columns it reads: the view of the whole table
    filtered, and with any column it reads missing (or the filter's own), the same error."""
    from auditors.checks import BASE_TABLE, _kept_rows, _table_view, _view_columns
    from auditors.worldio import load_world

    seen = 0
    for path in world_dirs[:4]:
        world = load_world(path)
        tables, contract = world.canonical, world.contract
        for d in (d for d in contract.deliverables if d.grain in ("panel", "event_detail")):
            keep = _kept_rows(d, contract)
            if keep is None:
                continue
            seen += 1
            base = BASE_TABLE[d.grain]
            assert _table_view(d, contract, tables).equals(_plain_table_view(d, contract, tables))
            read = {n for e in [*_view_columns(d, tables), keep] for n in e.meta.root_names()}
            filtered_by = keep.meta.root_names()[0]
            for gone in [*([c] for c in sorted(read)), *([c, filtered_by] for c in sorted(read - {filtered_by}))]:
                broken = {**tables, base: tables[base].drop(gone)}
                if "unit_id" in gone:
                    broken["units"] = tables["units"].drop("unit_id")
                want = outcome(lambda b=broken, d=d, c=contract: _plain_table_view(d, c, b).to_dict(as_series=False))
                got = outcome(lambda b=broken, d=d, c=contract: _table_view(d, c, b).to_dict(as_series=False))
                assert got == want
            # The filter's column there but of another type (its comparison fails), and a column read missing:
            # the filter's error, as when the whole table was filtered first.
            mistyped = tables[base].with_columns(pl.col(filtered_by).cast(pl.String))
            for gone in sorted(read - {filtered_by, "unit_id"}):
                broken = {**tables, base: mistyped.drop(gone)}
                want = outcome(lambda b=broken, d=d, c=contract: _plain_table_view(d, c, b).to_dict(as_series=False))
                got = outcome(lambda b=broken, d=d, c=contract: _table_view(d, c, b).to_dict(as_series=False))
                assert got == want
    assert seen

"""The fourth set of fast paths of the projection and the write stage give what the plain ways give."""

from __future__ import annotations

import datetime as dt
import json
import math
import random

import numpy as np
import polars as pl
import pytest

from worldgen import observe
from worldgen.defects import SpellingVariants, respelled_names
from worldgen.observe import KEY_ORDER_MIN_ROWS, _key_order, sort_rows
from worldgen.write import json_text

NAMES = ["Acme Ltd", "acme ltd", "Acme", "Acme Ltd.", "", " x", "Bäcker & Söhne", "日本", "Zed", "a\x00b", "a"]


def _same(fast: pl.DataFrame, plain: pl.DataFrame) -> None:
    assert fast.equals(plain)
    assert fast.schema == plain.schema
    assert [fast[c].flags for c in fast.columns] == [plain[c].flags for c in plain.columns]


def _uuid_like(rng: random.Random, n: int, shared: int) -> list[str]:
    """Texts of one width, many sharing their first `shared` characters (so that prefixes tie)."""
    head = "".join(rng.choice("0123456789abcdef") for _ in range(shared))
    return [head + "".join(rng.choice("0123456789abcdef-") for _ in range(36 - shared)) for _ in range(n)]


def _texts(rng: random.Random, n: int, kind: str) -> list[str | None]:
    match kind:
        case "names":  # few distinct values: ranked by an Enum
            return [rng.choice(NAMES) for _ in range(n)]
        case "uuids":
            return _uuid_like(rng, n, rng.choice([0, 6, 7, 8]))
        case "ragged":  # many distinct values of many lengths, sharing prefixes, some a prefix of another
            stems = ["", "ab", "abcdefg", "abcdefgh", "日本語テキスト", "zz\x00"]
            return [rng.choice(stems) + str(rng.randint(0, 10 * n)) * rng.randint(0, 2) for _ in range(n)]
        case "blanks":
            return [None if rng.random() < 0.01 else rng.choice(NAMES) for _ in range(n)]
    raise AssertionError(kind)


def _frame(rng: random.Random, n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "day": pl.Series([rng.randint(0, rng.choice([3, 400])) for _ in range(n)], dtype=pl.Int64),
            "id": pl.Series(rng.sample(range(10 * n), n), dtype=pl.Int64),
            "time": pl.Series([rng.randint(0, 20 * n) for _ in range(n)], dtype=pl.Int64),  # a few tie
            "small": pl.Series([rng.randint(-100, 100) for _ in range(n)], dtype=pl.Int8),
            "big": pl.Series([rng.choice([0, 2**64 - 1, 2**63, 5]) for _ in range(n)], dtype=pl.UInt64),
            "wide": pl.Series([rng.choice([-(2**62), 2**62, 0]) for _ in range(n)], dtype=pl.Int64),
            "names": _texts(rng, n, "names"),
            "uuids": _texts(rng, n, "uuids"),
            "ragged": _texts(rng, n, "ragged"),
            "blanks": _texts(rng, n, "blanks"),
            "value": [rng.random() for _ in range(n)],
        }
    )


ORDERS = [
    ["uuids"],
    ["ragged"],
    ["names"],
    ["names", "day"],
    ["day", "names"],
    ["day", "id"],
    ["id", "day"],
    ["day", "uuids"],
    ["day", "ragged"],
    ["time", "uuids"],
    ["time", "ragged"],
    ["time", "blanks"],
    ["names", "ragged", "day"],
    ["day", "small"],
    ["small", "names", "day"],
    ["big", "day"],
    ["wide", "day"],
    ["wide", "wide"],
    ["blanks", "day"],
    ["day", "blanks"],
    ["day", "value"],
    ["uuids", "day"],
]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("few", [observe.STRING_RANK_MAX_DISTINCT, 16])
def test_sort_rows_is_the_stable_sort_on_text_and_integer_keys(seed, few, monkeypatch):
    """With few texts ranked (16 distinct at most), the UUIDs and ragged texts are coded by their first bytes."""
    monkeypatch.setattr(observe, "STRING_RANK_MAX_DISTINCT", few)
    rng = random.Random(seed)
    for n in (KEY_ORDER_MIN_ROWS - 1, KEY_ORDER_MIN_ROWS, 3000):
        frame = _frame(rng, n)
        for by in ORDERS:
            _same(sort_rows(frame, by), frame.sort(by, maintain_order=True))


@pytest.mark.parametrize("few", [observe.STRING_RANK_MAX_DISTINCT, 16])
def test_key_order_is_taken_where_it_pays(few, monkeypatch):
    """The coded order is used for the keys the worlds sort by (not only the polars fallback)."""
    monkeypatch.setattr(observe, "STRING_RANK_MAX_DISTINCT", few)
    rng = random.Random(0)
    frame = _frame(rng, 3000).with_columns(uuids=pl.Series(_uuid_like(rng, 3000, 0)))  # no prefix shared
    for by in (["uuids"], ["names", "day"], ["day", "id"], ["time", "uuids"], ["small", "names"]):
        assert _key_order(frame, by) is not None, by
    for by in (["blanks"], ["value"], ["day", "value"]):  # blanks, floats: polars sorts
        assert _key_order(frame, by) is None, by


def test_tied_codes_are_ordered_by_their_texts(monkeypatch):
    """Texts coded by their first bytes alone tie a lot when those bytes are shared: the ties are put in order
    by the texts, and too many tied rows go back to polars."""
    rng = random.Random(3)
    texts = _uuid_like(rng, 600, 7) + _uuid_like(rng, 5000, 0)  # more distinct than an Enum ranks
    frame = pl.DataFrame({"u": texts, "row": np.arange(len(texts))})
    _same(sort_rows(frame, ["u"]), frame.sort(["u"], maintain_order=True))
    monkeypatch.setattr(observe, "TIED_ROWS_MAX", 10)
    assert _key_order(frame, ["u"]) is None
    _same(sort_rows(frame, ["u"]), frame.sort(["u"], maintain_order=True))


@pytest.mark.parametrize("seed", range(3))
def test_equal_keys_keep_their_order(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    names = np.array(NAMES, dtype=object)[rng.integers(0, len(NAMES), n)]
    frame = pl.DataFrame({"name": names, "day": rng.integers(0, 3, n), "row": np.arange(n)})
    for by in (["name"], ["name", "day"], ["day", "name"], ["day"]):
        _same(sort_rows(frame, by), frame.sort(by, maintain_order=True))


@pytest.mark.parametrize("seed", range(8))
def test_respelled_names_is_replace(seed):
    rng = random.Random(seed)
    pool = ["Acme Ltd", "acme ltd", "Bäcker & Söhne", "", " x ", "Farm 1", "Farm 10", "日本", "a\x00b"]
    for n in (1, 5, 300):
        values = [None if rng.random() < 0.1 else rng.choice(pool) for _ in range(n)]
        frame = pl.DataFrame({"k": range(n), "n": pl.Series(values, dtype=pl.String)})
        if rng.random() < 0.5:
            frame = frame.sort("n")  # a sorted, flagged column, as a master file sorted by name has
        names = sorted(frame["n"].drop_nulls().unique().to_list())
        if not names:
            continue
        keys = rng.sample(names, k=rng.randint(0, len(names)))
        mapping = {k: rng.choice([k.upper(), k + "  ", "Acme Ltd", ""]) for k in keys}
        fast = frame.with_columns(respelled_names(frame["n"], names, mapping))
        _same(fast, frame.with_columns(pl.col("n").replace(mapping)))


@pytest.mark.parametrize("seed", range(4))
def test_spelling_variants_apply_as_replace(seed):
    """The defect's frame is the frame with each chosen name replaced, whichever way the column is looked up."""
    rng = random.Random(seed)
    for values in (NAMES * 20, [None] * 7, [None, *NAMES]):
        frame = pl.DataFrame({"n": pl.Series(values, dtype=pl.String), "v": range(len(values))})
        out, record = SpellingVariants("n", 0.5).apply(frame, np.random.default_rng(seed + rng.randint(0, 99)))
        mapping = {original: shown for original, shown, _ in record["changes"]}
        _same(out, frame.with_columns(pl.col("n").replace(mapping)))


KEY_FORMS = [
    "{P}-{n:04d}",
    "{P}{n:05d}",
    "{p}{n}",
    "{n}",
    "{P}_{n:03d}",
    "{PP}-{n:06d}",
    "{n:5d}",
    "x{n:01d}ü",
    "{n:00d}",
]


def _plain_key(values: pl.Series, form: str, prefix: str) -> pl.Series:
    """The key texts as polars' string expressions render them (`_render_key` row by row)."""
    bounds = (values.min(), values.max()) if values.null_count() < len(values) else None
    return values.to_frame().select(observe._render_key(pl.col(values.name), form, prefix, bounds)).to_series()


@pytest.mark.parametrize("seed", range(6))
def test_glued_keys_are_the_rendered_keys(seed):
    rng = random.Random(seed)
    taken = 0
    for _ in range(40):
        low = rng.choice([0, 1, 7, 99, 100, 999, 5_259_163, 10**17 - 5])
        n = rng.choice([1, 2, 50, 400])
        values = [low + rng.randint(0, rng.choice([0, 5, 10 ** rng.randint(1, 7)])) for _ in range(n)]
        if rng.random() < 0.1:
            values[0] = None
        if rng.random() < 0.1:
            values[-1] = -1
        small = max(v or 0 for v in values) < 2**31
        dtype = rng.choice([pl.Int64, pl.Int32] + [pl.UInt64] * (-1 not in values)) if small else pl.Int64
        series = pl.Series("k", values, dtype=dtype)
        form, prefix = rng.choice(KEY_FORMS), rng.choice(["ab", "Ü", "x"])
        bounds = (series.min(), series.max()) if series.null_count() < n else None
        glued = observe._glued_key(series, form, prefix, bounds)
        if glued is not None:
            _same(glued.to_frame(), _plain_key(series, form, prefix).alias("k").to_frame())
            taken += 1
    assert taken > 5


def test_glued_keys_are_taken_for_ids_and_not_for_mixed_lengths():
    ids = pl.Series("k", range(5_259_163, 5_259_163 + 500))
    assert observe._glued_key(ids, "{P}{n:05d}", "ab", (ids.min(), ids.max())) is not None  # 7 digits each
    assert observe._glued_key(ids, "{n:09d}", "ab", (ids.min(), ids.max())) is not None  # padded to 9
    mixed = pl.Series("k", range(95, 95 + 500))
    assert observe._glued_key(mixed, "{n}", "ab", (mixed.min(), mixed.max())) is None  # 2 and 3 digits


def test_glued_keys_leave_empty_fields_and_zero_widths_to_the_plain_path():
    """An empty prefix has no bytes to glue and `{n:00d}` is the plain path's own reading: both decline
    (they crashed or disagreed with `_render_key`); the key column rendered either way is the plain one."""
    ids = pl.Series("k", range(5_259_163, 5_259_163 + 500))
    assert observe._glued_key(ids, "{P}{n:05d}", "", (ids.min(), ids.max())) is None
    assert observe._glued_key(ids, "{n:00d}", "ab", (ids.min(), ids.max())) is None
    zeros = pl.Series("k", [0] * 500)
    assert observe._glued_key(zeros, "x{n:00d}", "ab", (0, 0)) is None


def test_cached_text_tables_are_read_only():
    for table in (observe._digit_table(3), observe._time_table()):
        for array in (table.items, *table.words):
            with pytest.raises(ValueError):
                array[0] = array[1]


@pytest.mark.parametrize("style", ["%Y-%m-%d", "%d/%m/%Y", "%m/%d/%Y", "%Y%m%d", "%e %b %Y"])
@pytest.mark.parametrize("seed", range(3))
def test_glued_times_are_the_rendered_times(style, seed):
    rng = np.random.default_rng(seed)
    taken = 0
    for low, spread in ((0, 86400 * 365), (-86400 * 3, 86400 * 5), (5, 3), (86400 * 40, 86400 * 900)):
        seconds = pl.Series("t", np.sort(low + rng.integers(0, spread, int(rng.integers(1, 3000)))))
        start = dt.date(int(rng.integers(1990, 2030)), 1, 1) + dt.timedelta(days=int(rng.integers(0, 365)))
        glued = observe._glued_time(seconds, start, style)
        if glued is None:
            continue
        days = observe._via_lookup(seconds // 86400, lambda col, start=start: observe._day_text(col, start, style))
        plain = days + observe._times_of_day().gather(seconds % 86400)
        _same(glued.alias("t").to_frame(), plain.alias("t").to_frame())
        taken += 1
    assert taken or style == "%e %b %Y"  # (dates of several lengths: polars renders them)


def _json_value(rng: random.Random, depth: int):
    leaves = [
        lambda: rng.choice(["", "a", "ü日本", 'q"uo\\te', "\x00\x1f\x7f", "\u2028", "é" * 3, "😀x\ud800"]),
        lambda: rng.choice([0, -1, 2**70, True, False, None]),
        lambda: rng.choice([0.1, -0.0, 1e16, 1e-05, 123456.789, math.nan, math.inf, -math.inf, 5e-324]),
    ]
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(leaves)()
    kind = rng.choice(["dict", "list", "tuple"])
    items = [_json_value(rng, depth - 1) for _ in range(rng.choice([0, 1, 3]))]
    if kind == "dict":
        return {rng.choice(["k", "é", "", "a b", '"']) + str(i): v for i, v in enumerate(items)}
    return items if kind == "list" else tuple(items)


@pytest.mark.parametrize("seed", range(20))
def test_json_text_is_json_dumps(seed):
    rng = random.Random(seed)
    for _ in range(30):
        value = _json_value(rng, 4)
        for indent in (2, 0, 1, 4, None):
            assert json_text(value, indent) == json.dumps(value, indent=indent, ensure_ascii=False)
            ascii_text = json.dumps(value, indent=indent)  # the task files' form
            assert json_text(value, indent, ensure_ascii=True) == ascii_text


def test_json_text_leaves_other_values_to_json_dumps():
    for value in ({1: "a", 2.5: [1]}, {None: 1, True: 2}, [{"a": {3: 4}}]):  # keys json.dumps converts
        assert json_text(value, 2) == json.dumps(value, indent=2, ensure_ascii=False)
        assert json_text(value, 1, ensure_ascii=True) == json.dumps(value, indent=1)
    with pytest.raises(TypeError):  # what json.dumps raises for a value it cannot write
        json_text({"a": {1, 2}}, 2)
    circular: dict = {"a": []}
    circular["a"].append(circular)
    with pytest.raises(ValueError, match="Circular reference"):  # json.dumps' error, not a RecursionError
        json_text(circular, 2)


def test_glued_times_leave_seconds_beyond_int64_to_polars():
    huge = pl.Series("t", [2**63 + 5, 2**63 + 86400], dtype=pl.UInt64)
    assert observe._glued_time(huge, dt.date(2024, 1, 1), "%Y-%m-%d") is None


def test_glued_texts_without_string_views(monkeypatch):
    """An older pyarrow without string views gets the same texts as an Arrow string array."""
    ids = pl.Series("k", range(5_259_163, 5_259_163 + 500))
    views = observe._glued_key(ids, "{P}{n:05d}", "ab", (ids.min(), ids.max()))
    monkeypatch.delattr(observe.pa, "string_view")
    _same(observe._glued_key(ids, "{P}{n:05d}", "ab", (ids.min(), ids.max())).to_frame(), views.to_frame())

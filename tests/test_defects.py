"""Every defect is undone exactly by its own record, on arbitrary tables (Hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from worldgen.defects import (
    DEFECTS,
    Duplicates,
    MissingValues,
    ReportingDelay,
    SchemaDrift,
    SpellingVariants,
    UnitDrift,
    undo_all,
)

NAMES = st.text(alphabet=st.sampled_from("abcdefgh &-.,'XYZ"), min_size=1, max_size=14)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 80))
    return pl.DataFrame(
        {
            "name": draw(st.lists(NAMES, min_size=n, max_size=n)),
            "day": draw(st.lists(st.integers(0, 364), min_size=n, max_size=n)),
            "amount": [
                round(v, 2) for v in draw(st.lists(st.floats(0, 5000, allow_nan=False), min_size=n, max_size=n))
            ],
            "count": draw(st.lists(st.integers(0, 50), min_size=n, max_size=n)),
        }
    )


def defect_strategy():
    rate = st.floats(0.0, 1.0)
    return st.one_of(
        st.builds(SpellingVariants, st.just("name"), rate),
        st.builds(MissingValues, st.sampled_from(["name", "amount", "count"]), rate),
        st.builds(Duplicates, rate),
        st.builds(ReportingDelay, st.just("day"), rate, st.integers(1, 7), st.integers(-1, 100)),
        st.builds(
            UnitDrift,
            st.just("amount"),
            st.just("day"),
            st.integers(0, 364),
            st.sampled_from([100.0, 1000.0, 2.2046, 0.001, 0.4536]),
            st.just("USD"),
            st.just("alt"),
            st.just(2),
        ),
        st.builds(
            SchemaDrift,
            st.sampled_from(["amount", "count", "name"]),
            st.just("renamed"),
            st.just("day"),
            st.integers(0, 364),
        ),
    )


@settings(max_examples=300, deadline=None)
@given(
    df=tables(),
    defects=st.lists(defect_strategy(), min_size=1, max_size=4, unique_by=lambda d: type(d)),
    seed=st.integers(0, 2**32 - 1),
)
def test_undo_of_apply_restores_the_table_exactly(df, defects, seed):
    rng = np.random.default_rng(seed)
    frame, records = df, []
    for defect in defects:
        if isinstance(defect, SchemaDrift) and "renamed" in frame.columns:
            continue
        frame, record = defect.apply(frame, rng)
        records.append(json.loads(json.dumps(record)))  # what projection.json stores
    assert undo_all(frame, records).equals(df)


@settings(max_examples=50, deadline=None)
@given(df=tables(), seed=st.integers(0, 2**32 - 1))
def test_defects_never_mutate_their_input(df, seed):
    snapshot = df.clone()
    for defect in (
        SpellingVariants("name", 0.5),
        MissingValues("amount", 0.5),
        Duplicates(0.5),
        ReportingDelay("day", 0.5, 3),
        UnitDrift("amount", "day", 10, 100.0, "USD", "cents", 2),
        SchemaDrift("count", "count_v2", "day", 100),
    ):
        defect.apply(df, np.random.default_rng(seed))
    assert df.equals(snapshot)


def test_defects_change_what_they_claim():
    df = pl.DataFrame(
        {"name": ["Acme Inc", "Beta and Co"] * 50, "day": list(range(100)), "amount": [10.5] * 100, "count": [1] * 100}
    )
    rng = np.random.default_rng(0)
    out, rec = UnitDrift("amount", "day", 50, 100.0, "USD", "cents", 2).apply(df, rng)
    assert out["amount"][:50].to_list() == [10.5] * 50 and out["amount"][50:].to_list() == [1050.0] * 50
    out, rec = Duplicates(0.1).apply(df, rng)
    assert out.height == 110 and out.is_duplicated().sum() == 20
    out, rec = SchemaDrift("count", "n", "day", 60).apply(df, rng)
    assert out["count"].null_count() == 40 and out["n"].null_count() == 60
    assert set(DEFECTS) == {"id_variants", "missing", "duplicates", "delay", "unit_drift", "schema_drift"}

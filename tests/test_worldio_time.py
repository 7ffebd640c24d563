"""parse_time's timeline origin is made once per start: each start still gets its own origin."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from auditors.worldio import parse_time
from contracts.model import DATE_STYLES


@pytest.mark.parametrize("seconds", [False, True])
def test_each_start_has_its_own_origin(seconds):
    stamps = [dt.datetime(2025, 1, 2, 5, 44, 41), dt.datetime(2024, 12, 31, 23, 0, 0), None]
    frame = pl.DataFrame({"t": stamps})
    for start in [dt.date(2025, 1, 1), dt.date(2024, 6, 30), dt.date(2025, 1, 1), dt.date(2020, 2, 29)]:
        origin = dt.datetime.combine(start, dt.time())
        got = frame.select(parse_time(frame, "t", next(iter(DATE_STYLES)), start, seconds)).to_series().to_list()
        deltas = [None if s is None else s - origin for s in stamps]
        expected = [
            None if d is None else (d.total_seconds() if seconds else int(d / dt.timedelta(days=1))) for d in deltas
        ]
        assert got == expected

"""worldio: parse_time's timeline origin is made once per start (each start still gets its own); the
ledger is read once per world."""

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


def test_the_ledger_is_read_once_and_an_unreadable_one_still_raises(world_dirs, tmp_path, monkeypatch):
    """load_world keeps the ledger it read (World.ledger does not read it again); a ledger it cannot read
    stays a verdict for the ledger check: World.ledger raises, as before."""
    import shutil

    from auditors import worldio
    from contracts.errors import WorldFormatError

    world = shutil.copytree(world_dirs[0], tmp_path / "w")
    expected = worldio._read_ledger(world)
    loaded = worldio.load_world(world)
    monkeypatch.setattr(worldio, "_read_ledger", lambda root: pytest.fail("the ledger was read again"))
    assert loaded.ledger == expected
    monkeypatch.undo()
    (world / "ledger.jsonl").write_bytes(b"{not json\n")
    broken = worldio.load_world(world)
    with pytest.raises(WorldFormatError):
        _ = broken.ledger

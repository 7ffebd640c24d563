"""The XLSX writer's own row serialiser gives the bytes openpyxl gives, cell by cell, for any frame."""

from __future__ import annotations

import datetime as dt
import gc
import random
import sys

import polars as pl
import pytest

from worldgen.write import write_xlsx, write_xlsx_openpyxl

TEXTS = ["a", " lead", "trail ", "a&b<c>d", "", "=", "=SUM(A1)", "#N/A", "x\ty", "line\nbreak", "ünï", " ", "r\rx"]
TEXTS += ["bad\x01", "y" * 40_000, '"q"', "]]>"]


def _frame(rng: random.Random) -> pl.DataFrame:
    n = rng.randint(0, 12)
    pick = lambda options: [rng.choice(options) for _ in range(n)]  # noqa: E731
    columns = {
        "s": pl.Series(pick([*TEXTS, None]), dtype=pl.String),
        "i": pl.Series(pick([0, -5, 2**60, None, 7]), dtype=pl.Int64),
        "f": pl.Series(pick([0.1, -0.0, 1e20, 1 / 3, None, float("nan"), float("inf")]), dtype=pl.Float64),
        "d": pl.Series(pick([dt.date(2025, 1, 2), None, dt.date(1999, 12, 31)]), dtype=pl.Date),
        "t": pl.Series(pick([dt.datetime(2025, 1, 2, 3, 4, 5), None, dt.datetime(2025, 6, 1, 23, 59, 59, 123000)])),
        "g": pl.Series(pick(["north", "south", "east"]), dtype=pl.String),
        "b": pl.Series(pick([True, False, None]), dtype=pl.Boolean),
    }
    names = [c for c in columns if rng.random() < 0.8] or ["s"]
    rng.shuffle(names)
    return pl.DataFrame({c: columns[c] for c in names})


def _outcome(write, *args):
    try:
        write(*args)
    except Exception as exc:  # noqa: BLE001 - both writers must refuse the same frames
        # openpyxl leaves the refused worksheet's row generator open; collect it quietly, here
        hook, sys.unraisablehook = sys.unraisablehook, lambda _: None
        try:
            gc.collect()
        finally:
            sys.unraisablehook = hook
        return type(exc).__name__
    return args[-2 if write is write_xlsx else -1].read_bytes()


@pytest.mark.parametrize("seed", range(4))
def test_xlsx_bytes_match_openpyxl(tmp_path, seed):
    rng = random.Random(seed)
    for _ in range(25):
        frame = _frame(rng)
        by = "g" if "g" in frame.columns and rng.random() < 0.5 else None
        groups = [(str(k), g) for (k,), g in frame.group_by(by, maintain_order=True)] if by else [("data", frame)]
        groups = sorted(groups, key=lambda kg: kg[0])
        fast = _outcome(write_xlsx, frame, tmp_path / "a.xlsx", by)
        reference = _outcome(write_xlsx_openpyxl, groups, tmp_path / "b.xlsx")
        assert fast == reference


def test_xlsx_date_styles_in_the_order_openpyxl_meets_them(tmp_path):
    """A datetime column that starts late in the first sheet, a date column early in the second: the style
    ids follow the order cells are written in, across sheets."""
    late = [None] * 30 + [dt.datetime(2025, 3, 1, 12)]
    frame = pl.DataFrame(
        {
            "g": ["a"] * 31 + ["b"] * 31,
            "t": late + [None] * 31,
            "d": [None] * 31 + [dt.date(2025, 1, 1)] * 31,
            "x": list(range(62)),
        }
    )
    groups = sorted([(str(k), g) for (k,), g in frame.group_by("g", maintain_order=True)], key=lambda kg: kg[0])
    write_xlsx(frame, tmp_path / "a.xlsx", "g")
    write_xlsx_openpyxl(groups, tmp_path / "b.xlsx")
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()


TITLES = ["North & <South>", 'Say "hi"', "l'Aquila", "Île-de-France", "a" * 40, "a" * 31 + "b", "Mixed", "mixed"]
TITLES += ["x/y", "[z]", "", "tab\there", "ctl\x02", "Sheet", "data", " padded ", *(f"r{k}" for k in range(12))]


@pytest.mark.filterwarnings("ignore:Title is more than 31 characters")  # openpyxl's renaming of a duplicate
@pytest.mark.parametrize("seed", range(6))
def test_xlsx_sheet_titles_as_openpyxl_writes_them(tmp_path, seed):
    """Titles are put into the workbook as openpyxl escapes them; those it refuses or renames (invalid
    characters, empty, equal but for case or after truncation) give what openpyxl gives."""
    rng = random.Random(seed)
    for _ in range(12):
        names = rng.sample(TITLES, rng.randint(1, 13))
        n = rng.randint(len(names), 3 * len(names))
        frame = pl.DataFrame(
            {
                "g": [names[i % len(names)] for i in range(n)],
                "d": [rng.choice([None, dt.date(2025, 1, 2)]) for _ in range(n)],
                "t": [rng.choice([None, dt.datetime(2025, 1, 2, 3, 4)]) for _ in range(n)],
                "v": [rng.random() for _ in range(n)],
            }
        ).select(rng.sample(["g", "d", "t", "v"], 4))
        groups = sorted([(str(k), g) for (k,), g in frame.group_by("g", maintain_order=True)], key=lambda kg: kg[0])
        assert _outcome(write_xlsx, frame, tmp_path / "a.xlsx", "g") == _outcome(
            write_xlsx_openpyxl, groups, tmp_path / "b.xlsx"
        )

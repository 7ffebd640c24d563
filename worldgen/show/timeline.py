"""The timeline strip of a world card: when policies change, when systems switch units or rename columns.

One row per policy variable (a tick on every day some unit's setting changes, taller when more units change
that day), one row of unit switches and one of schema drift (a marker on the first day of each, labelled with
file and column; labels that would collide are moved to another lane), over month ticks, with the
management change day and the H1/H2 split drawn across.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from worldgen.show.svg import esc, line, n, svg_open, text, text_width

WIDTH, LEFT, RIGHT = 1180.0, 170.0, 16.0
ROW, LANE, TOP, LABEL_SIZE = 20.0, 15.0, 30.0, 10.5


@dataclass(frozen=True)
class Mark:
    day: int
    label: str
    title: str


@dataclass(frozen=True)
class Strip:
    start: dt.date
    periods: int
    change_day: int
    policies: dict[str, dict[int, int]]  # policy variable -> day -> number of units whose setting changed
    unit_switches: list[Mark]
    schema_drift: list[Mark]


def draw(strip: Strip) -> str:
    plot = WIDTH - LEFT - RIGHT

    def x(day: float) -> float:
        return LEFT + plot * day / max(strip.periods, 1)

    body: list[str] = []
    y = TOP
    for name, days in sorted(strip.policies.items()):
        body.append(text(LEFT - 8, y + 14, f"policy: {name}", "lbl", "end"))
        top = max(days.values(), default=1)
        for day, count in sorted(days.items()):
            h = 4 + (ROW - 6) * count / top
            body.append(
                f'<line x1="{n(x(day + 0.5))}" y1="{n(y + ROW - 2)}" x2="{n(x(day + 0.5))}" y2="{n(y + ROW - 2 - h)}" '
                f'class="policy"><title>{esc(f"day {day}: {count} unit(s) changed {name}")}</title></line>'
            )
        y += ROW
    for title, marks, css in (
        ("unit switches", strip.unit_switches, "switch"),
        ("schema drift", strip.schema_drift, "drift"),
    ):
        body.append(text(LEFT - 8, y + 14, title, "lbl", "end"))
        lanes = _lanes(marks, x)
        for mark, (lane, label_x) in zip(marks, lanes, strict=True):
            my = y + 4 + lane * LANE
            body.append(
                f'<g class="mark {css}"><title>{esc(mark.title)}</title>'
                f'<path d="M{n(x(mark.day))},{n(my + 9)}l-5,-8h10z"/>{text(label_x, my + 9, mark.label)}</g>'
            )
        y += max(ROW, LANE * (max((lane for lane, _ in lanes), default=0) + 1) + 6)
    height = y + 8
    head = [svg_open(WIDTH, height, "timeline", "timeline of policy changes, unit switches and schema drift")]
    head += _axis(strip, x, height)
    return "".join(head + body) + "</svg>"


def _axis(strip: Strip, x, height: float) -> list[str]:
    out = [line(LEFT, TOP - 4, WIDTH - RIGHT, TOP - 4, "axis")]
    day = 0
    while day < strip.periods:
        date = strip.start + dt.timedelta(days=day)
        if date.day == 1 or day == 0:
            out.append(line(x(day), TOP - 8, x(day), height - 4, "grid"))
            out.append(
                text(x(day) + 3, TOP - 10, date.strftime("%b %Y" if date.month == 1 or day == 0 else "%b"), "note")
            )
        day += 1
    half = strip.periods // 2
    out.append(line(x(half), 6, x(half), height - 2, "split"))
    out.append(text(x(half) - 4, 10, "H1 | H2", "note", "end"))
    out.append(line(x(strip.change_day), 6, x(strip.change_day), height - 2, "change"))
    out.append(text(x(strip.change_day) + 4, 10, f"management change (day {strip.change_day})", "note"))
    return out


def _lanes(marks: list[Mark], x) -> list[tuple[int, float]]:
    """(lane, label x) per mark so that no two labels overlap: the first lane whose last label ends before
    this one starts. A label that would leave the strip on the right goes on the left of its marker."""
    ends: list[float] = []
    out = []
    for mark in marks:
        width = text_width(mark.label, LABEL_SIZE)
        flip = x(mark.day) + 8 + width > WIDTH - RIGHT
        left = x(mark.day) - 10 - width if flip else x(mark.day) - 6
        right = x(mark.day) + 6 if flip else x(mark.day) + 8 + width
        lane = next((i for i, end in enumerate(ends) if end < left), len(ends))
        if lane == len(ends):
            ends.append(right)
        else:
            ends[lane] = right
        out.append((lane, left + 2 if flip else x(mark.day) + 7))
    return out

"""SVG written directly: the few chart shapes the pages need, as strings, the same bytes for the same input.

No plotting library: every chart here is a handful of rectangles, lines and text, so a string builder keeps
the output byte-stable (no library version in the bytes, no font metrics, no timestamps) and adds no
dependency. Text widths are estimated from character counts (`text_width`), which is enough to size boxes
and avoid label collisions; the pages set the font to the system sans-serif.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

CHAR_EM = 0.6  # average advance of a sans-serif character, in em (DejaVu Sans ~0.55-0.6; an overestimate is safe)


def esc(text: object) -> str:
    """Text safe inside SVG/HTML text and attribute values."""
    return escape(str(text), quote=True)


def n(x: float) -> str:
    """A coordinate with at most one decimal, no trailing zeros: stable bytes for the same float."""
    s = f"{x:.1f}"
    return s[:-2] if s.endswith(".0") else s


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_EM


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for people: `digits` significant digits, a real minus sign, 'n/a' for None or NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 10**digits and float(x).is_integer():
        text = f"{int(x):,}"
    else:
        text = f"{x:.{digits}g}"
        if "e" in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
    return text.replace("-", "\u2212")


def pct(x: float | None, digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x * 100:.{digits}f}%".replace("-", "\u2212")


def svg_open(width: float, height: float, css: str, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{esc(css)}" width="{n(width)}" height="{n(height)}" '
        f'viewBox="0 0 {n(width)} {n(height)}" role="img" aria-label="{esc(label)}">'
    )


def text(x: float, y: float, content: str, css: str = "", anchor: str = "start", size: float | None = None) -> str:
    attrs = f' class="{css}"' if css else ""
    attrs += f' text-anchor="{anchor}"' if anchor != "start" else ""
    attrs += f' font-size="{n(size)}"' if size else ""
    return f'<text x="{n(x)}" y="{n(y)}"{attrs}>{esc(content)}</text>'


def rect(x: float, y: float, w: float, h: float, css: str = "", title: str = "") -> str:
    body = f'<rect x="{n(x)}" y="{n(y)}" width="{n(max(w, 0))}" height="{n(max(h, 0))}" class="{css}"'
    return body + (f"><title>{esc(title)}</title></rect>" if title else "/>")


def line(x1: float, y1: float, x2: float, y2: float, css: str) -> str:
    return f'<line x1="{n(x1)}" y1="{n(y1)}" x2="{n(x2)}" y2="{n(y2)}" class="{css}"/>'


@dataclass(frozen=True)
class Bar:
    """One row of a bar chart: a label, stacked segments (value, css class, tooltip) and a note at the end."""

    label: str
    segments: tuple[tuple[float, str, str], ...]
    note: str = ""


def bar_chart(bars: Sequence[Bar], label: str, width: float = 520, scale_max: float | None = None) -> str:
    """Horizontal (stacked) bars, one per row, labelled on the left and annotated on the right."""
    row, size = 20, 12
    left = min(220.0, max((text_width(b.label, size) for b in bars), default=40) + 10)
    right = max((text_width(b.note, size) for b in bars), default=0) + 10
    top = max(scale_max or 0, max((sum(v for v, _, _ in b.segments) for b in bars), default=0)) or 1
    plot = width - left - right
    out = [svg_open(width, row * len(bars) + 6, "chart bars", label)]
    for i, b in enumerate(bars):
        y = 3 + i * row
        out.append(text(left - 6, y + 14, b.label, "lbl", "end"))
        x = left
        for value, css, tip in b.segments:
            w = plot * value / top
            out.append(rect(x, y + 3, w, row - 6, css, tip))
            x += w
        out.append(text(x + 5, y + 14, b.note, "note"))
    return "".join(out) + "</svg>"


def column_chart(counts: Sequence[tuple[str, int]], label: str, axis: str, width: float = 520) -> str:
    """Vertical bars over categories (a histogram whose bins are already labelled), counts on top."""
    height, bottom, top_pad, left = 150, 34, 16, 8
    top = max((c for _, c in counts), default=0) or 1
    slot = min((width - left * 2) / max(len(counts), 1), 72.0)
    start = (width - slot * len(counts)) / 2
    plot = height - bottom - top_pad
    out = [svg_open(width, height, "chart columns", label)]
    for i, (name, count) in enumerate(counts):
        x = start + i * slot
        h = plot * count / top
        out.append(rect(x + slot * 0.12, top_pad + plot - h, slot * 0.76, h, "bar", f"{name}: {count}"))
        if count:
            out.append(text(x + slot / 2, top_pad + plot - h - 3, str(count), "note", "middle"))
        out.append(text(x + slot / 2, height - bottom + 14, name, "lbl", "middle"))
    out.append(line(left, top_pad + plot, width - left, top_pad + plot, "axis"))
    out.append(text(width / 2, height - 4, axis, "note", "middle"))
    return "".join(out) + "</svg>"


def bins(values: Iterable[float], edges: Sequence[float], unit: str = "") -> list[tuple[str, int]]:
    """Counts of `values` in [edges[i], edges[i+1]) with a last open bin, labelled for a column chart."""
    values = list(values)
    out = []
    for i, low in enumerate(edges):
        high = edges[i + 1] if i + 1 < len(edges) else math.inf
        name = f"{fmt(low, 2)}-{fmt(high, 2)}{unit}" if math.isfinite(high) else f"\u2265{fmt(low, 2)}{unit}"
        out.append((name, sum(low <= v < high for v in values)))
    return out


def nice_edges(values: Sequence[float], most: int = 8) -> list[float]:
    """Round bin edges covering `values`, at most `most` bins: evenly spaced on a 1-2-5 step, or on the
    1-2-5 series itself when the values spread over more than a decade (timings on a loaded machine)."""
    low, high = min(values), max(values)
    series = [m * 10.0**e for e in range(-4, 7) for m in (1, 2, 5)]
    if high <= low:
        return [low]
    if low > 0 and high / low > 10:
        edges = [x for x in series if max([x for x in series if x <= low] or [series[0]]) <= x <= high]
        while len(edges) > most:
            edges = edges[::2]
        return edges
    step = next((x for x in series if (high - low) / x < most), series[-1])
    first = math.floor(low / step) * step
    return [round(first + k * step, 10) for k in range(int((high - first) / step) + 1)]


@dataclass(frozen=True)
class Interval:
    label: str
    mean: float | None
    low: float | None
    high: float | None
    note: str = ""


def interval_chart(rows: Sequence[Interval], label: str, width: float = 560) -> str:
    """Means with their 95% intervals on a 0-1 axis: a dot on a whisker per row."""
    row, size = 24, 12
    left = min(200.0, max((text_width(r.label, size) for r in rows), default=40) + 16)
    right = max((text_width(r.note, size) for r in rows), default=0) + 16
    plot = width - left - right
    height = row * len(rows) + 26

    def x(v: float) -> float:
        return left + plot * min(max(v, 0.0), 1.0)

    out = [svg_open(width, height, "chart intervals", label)]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(line(x(tick), 4, x(tick), height - 20, "grid"))
        out.append(text(x(tick), height - 6, f"{tick:g}", "note", "middle"))
    for i, r in enumerate(rows):
        y = 4 + i * row + row / 2
        out.append(text(left - 8, y + 4, r.label, "lbl", "end"))
        if r.low is not None and r.high is not None:
            out.append(line(x(r.low), y, x(r.high), y, "whisker"))
            out.append(line(x(r.low), y - 5, x(r.low), y + 5, "whisker"))
            out.append(line(x(r.high), y - 5, x(r.high), y + 5, "whisker"))
        if r.mean is not None:
            tip = f"{r.label}: {fmt(r.mean)} [{fmt(r.low)}, {fmt(r.high)}]"
            out.append(
                f'<circle cx="{n(x(r.mean))}" cy="{n(y)}" r="4.5" class="dot"><title>{esc(tip)}</title></circle>'
            )
        out.append(text(left + plot + 10, y + 4, r.note, "note"))
    return "".join(out) + "</svg>"


def gauge(target: float | None, tolerance: float, estimate: float | None, raw: float | None) -> str:
    """A phenomenon at a glance: the tolerance band around the target, the audit's estimate, the raw figure."""
    width, height = 150, 18
    if target is None:
        return ""
    span = max(
        [3 * tolerance] + [abs(v - target) * 1.15 for v in (estimate, raw) if v is not None and math.isfinite(v)]
    )

    def x(v: float) -> float:
        return width / 2 + (v - target) / span * (width / 2 - 6)

    out = [svg_open(width, height, "gauge", "target, tolerance and estimates")]
    out.append(rect(x(target - tolerance), 3, x(target + tolerance) - x(target - tolerance), 12, "band"))
    out.append(line(x(target), 1, x(target), 17, "target"))
    if raw is not None and math.isfinite(raw):
        out.append(
            f'<circle cx="{n(x(raw))}" cy="9" r="3.5" class="raw"><title>raw files: {esc(fmt(raw))}</title></circle>'
        )
    if estimate is not None and math.isfinite(estimate):
        tip = f"audit estimate: {fmt(estimate)}"
        out.append(f'<circle cx="{n(x(estimate))}" cy="9" r="3.5" class="est"><title>{esc(tip)}</title></circle>')
    return "".join(out) + "</svg>"

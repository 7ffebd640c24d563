"""The world's DAG as SVG: one column per layer, edges as curves labelled with mechanism and planted value.

A layered (Sugiyama-style) drawing, small enough to read in one sitting:
1. columns are the contract's layers (longest-path depth), left to right;
2. an edge that skips layers passes through a thin slot in every column it crosses, so it never runs over a
   node;
3. nodes are ordered within their column by barycentre sweeps (the order with the fewest crossings is kept);
4. vertical positions pull every node towards its neighbours' mean, keeping the order and the spacing
   (an isotonic least-squares fit per column, pool-adjacent-violators);
5. each label goes to the first spot along its edge that overlaps no node and no earlier label.
Everything is sorted and computed in floats rounded on output, so the same contract gives the same bytes.
Each variable is one `<g class="node" data-variable="...">` (tests count them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contracts.model import MECHANISM_KINDS
from worldgen.show.svg import esc, n, svg_open, text_width

NAME_SIZE, SUB_SIZE, LABEL_SIZE, TAG_SIZE = 12.5, 10.0, 10.5, 9.5
LINE_H, PAD = 15.0, 7.0
BOLD_WIDEN = 1.12  # names are bold: DejaVu Sans Bold runs ~0.66 em a character
TAG_WIDEN = 1.3  # tags are bold capitals with letter spacing: ~1.3x an average lower-case run
NODE_GAP = 16.0  # vertical space between two boxes of a column
SLOT_H = 14.0  # height of a skipping edge's passage through a column
COLUMN_GAP = 150.0  # room between columns for the edge labels
MARGIN = 12.0
SWEEPS = 12
ALIGN_ROUNDS = 8
LABEL_SPOTS = (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.15, 0.85)  # where along a curve a label may sit, best first
WRAP = 15  # a name longer than this is split at underscores onto two lines
KINDS = MECHANISM_KINDS  # one legend entry and colour per mechanism kind, in the contract's order


@dataclass(frozen=True)
class Node:
    name: str
    layer: int
    sub: str = ""  # a second line, e.g. "panel · packhouse"
    tags: tuple[str, ...] = ()  # e.g. ("cause task", "focus")
    css: str = ""  # extra classes, e.g. "grain-panel policy"
    title: str = ""  # tooltip


@dataclass(frozen=True)
class Edge:
    parent: str
    child: str
    kind: str  # a mechanism kind, or "structural"
    label: str = ""
    title: str = ""
    css: str = ""  # e.g. "unidentified"


@dataclass
class _Box:
    key: str
    layer: int
    height: float
    width: float = 0.0
    lines: tuple[str, ...] = ()
    node: Node | None = None  # None for an edge's passage through a column
    y: float = 0.0  # centre
    x: float = 0.0  # left
    ins: list[str] = field(default_factory=list)
    outs: list[str] = field(default_factory=list)


def wrap(name: str) -> tuple[str, ...]:
    """A variable name on one line, or two split at the underscore nearest the middle."""
    if len(name) <= WRAP or "_" not in name:
        return (name,)
    cuts = [i for i, c in enumerate(name) if c == "_"]
    cut = min(cuts, key=lambda i: (abs(i - len(name) / 2), i))
    return (name[:cut], name[cut + 1 :])


def draw(nodes: list[Node], edges: list[Edge]) -> str:
    """The whole DAG as one SVG element."""
    boxes, chains = _boxes(nodes, edges)
    columns = _order(boxes, chains)
    width, height = _place(boxes, columns)
    out = [svg_open(width, height, "dag", "dependency graph of the world's variables"), _markers()]
    taken = [_rect(b) for b in boxes.values() if b.node is not None]
    paths, labels = [], []
    ports = _ports(boxes, chains)
    for edge, chain in chains:
        points = _points(boxes, chain, ports)
        paths.append(_path(edge, points))
        if edge.label:
            labels.append(_label(edge, points, taken))
    out += paths
    out += [_node(boxes[v.name]) for v in sorted(nodes, key=lambda v: (v.layer, v.name))]
    out += labels
    return "".join(out) + "</svg>"


def _boxes(nodes: list[Node], edges: list[Edge]) -> tuple[dict[str, _Box], list[tuple[Edge, list[str]]]]:
    boxes: dict[str, _Box] = {}
    for v in nodes:
        lines = wrap(v.name)
        height = LINE_H * len(lines) + (LINE_H - 2 if v.sub else 0) + (LINE_H - 3 if v.tags else 0) + PAD * 2
        texts = [text_width(s, NAME_SIZE) * BOLD_WIDEN for s in lines] + [text_width(v.sub, SUB_SIZE)]
        texts.append(text_width(" · ".join(v.tags), TAG_SIZE) * TAG_WIDEN)
        boxes[v.name] = _Box(v.name, v.layer, height, max(texts) + PAD * 2, lines, v)
    chains = []
    for k, e in enumerate(sorted(edges, key=lambda e: (e.kind == "structural", e.parent, e.child))):
        chain = [e.parent]
        for layer in range(boxes[e.parent].layer + 1, boxes[e.child].layer):
            key = f"\x00{k}:{layer}"
            boxes[key] = _Box(key, layer, SLOT_H)
            chain.append(key)
        chain.append(e.child)
        for a, b in zip(chain, chain[1:], strict=False):
            boxes[a].outs.append(b)
            boxes[b].ins.append(a)
        chains.append((e, chain))
    return boxes, chains


def _order(boxes: dict[str, _Box], chains) -> list[list[str]]:
    """Columns of box keys, ordered by barycentre sweeps; the order with the fewest crossings wins."""
    depth = max(b.layer for b in boxes.values()) + 1
    columns = [
        sorted((k for k, b in boxes.items() if b.layer == i), key=lambda k: (k.startswith("\x00"), k))
        for i in range(depth)
    ]
    best, best_crossings = [list(c) for c in columns], _crossings(boxes, columns)
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        for i in range(1, depth) if down else range(depth - 2, -1, -1):
            ref = {k: j for j, k in enumerate(columns[i - 1 if down else i + 1])}
            pos = {k: j for j, k in enumerate(columns[i])}

            def key(k: str, ref=ref, pos=pos, down=down) -> tuple[float, int]:
                near = [ref[x] for x in (boxes[k].ins if down else boxes[k].outs) if x in ref]
                return (sum(near) / len(near) if near else float(pos[k]), pos[k])

            columns[i] = sorted(columns[i], key=key)
        crossings = _crossings(boxes, columns)
        if crossings < best_crossings:
            best, best_crossings = [list(c) for c in columns], crossings
    return best


def _crossings(boxes: dict[str, _Box], columns: list[list[str]]) -> int:
    total = 0
    for left, right in zip(columns, columns[1:], strict=False):
        pos = {k: j for j, k in enumerate(right)}
        pairs = [(i, pos[o]) for i, k in enumerate(left) for o in boxes[k].outs if o in pos]
        total += sum(
            1
            for a in range(len(pairs))
            for b in range(a)
            if (pairs[a][0] - pairs[b][0]) * (pairs[a][1] - pairs[b][1]) < 0
        )
    return total


def _place(boxes: dict[str, _Box], columns: list[list[str]]) -> tuple[float, float]:
    """x per column, y per box (centres); returns the drawing's size."""
    x = MARGIN
    for column in columns:
        width = max((boxes[k].width for k in column if boxes[k].node), default=40.0)
        for k in column:
            boxes[k].x = x + (width - boxes[k].width) / 2 if boxes[k].node else x
            boxes[k].width = boxes[k].width if boxes[k].node else width
        x += width + COLUMN_GAP
    for column in columns:  # start stacked
        y = 0.0
        for k in column:
            boxes[k].y = y + boxes[k].height / 2
            y += boxes[k].height + NODE_GAP
    for r in range(ALIGN_ROUNDS):
        order = range(len(columns)) if r % 2 == 0 else range(len(columns) - 1, -1, -1)
        for i in order:
            _align(boxes, columns[i])
    top = min(b.y - b.height / 2 for b in boxes.values())
    for b in boxes.values():
        b.y += MARGIN - top
    bottom = max(b.y + b.height / 2 for b in boxes.values())
    return x - COLUMN_GAP + MARGIN, bottom + MARGIN


def _align(boxes: dict[str, _Box], column: list[str]) -> None:
    """Move a column's boxes towards their neighbours' mean height, keeping order and spacing (PAV)."""
    desired = []
    for k in column:
        near = [boxes[x].y for x in boxes[k].ins + boxes[k].outs]
        desired.append(sum(near) / len(near) if near else boxes[k].y)
    offsets, acc = [], 0.0
    for j, k in enumerate(column):
        if j:
            acc += boxes[column[j - 1]].height / 2 + NODE_GAP + boxes[k].height / 2
        offsets.append(acc)
    fitted = _isotonic([d - o for d, o in zip(desired, offsets, strict=True)])
    for k, z, o in zip(column, fitted, offsets, strict=True):
        boxes[k].y = z + o


def _isotonic(values: list[float]) -> list[float]:
    """The non-decreasing sequence closest to `values` in least squares (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, c2 = blocks.pop()
            m1, c1 = blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    out: list[float] = []
    for mean, count in blocks:
        out += [mean] * int(count)
    return out


def _ports(boxes: dict[str, _Box], chains) -> dict[tuple[str, str, str], float]:
    """Where each edge leaves and enters a node: spread over the box's height in the order of the far ends."""
    ports: dict[tuple[str, str, str], float] = {}
    for b in boxes.values():
        if b.node is None:
            continue
        for ends, side in ((b.outs, "out"), (b.ins, "in")):
            ordered = sorted(ends, key=lambda k: (boxes[k].y, k))
            span = min(b.height * 0.6, 8.0 * max(len(ordered) - 1, 0))
            for j, k in enumerate(ordered):
                offset = 0.0 if len(ordered) == 1 else -span / 2 + span * j / (len(ordered) - 1)
                ports[(b.key, k, "out") if side == "out" else (k, b.key, "in")] = b.y + offset
    return ports


def _points(boxes: dict[str, _Box], chain: list[str], ports) -> list[tuple[float, float]]:
    """Where an edge runs: out of its parent, straight through each column it crosses, into its child."""
    first, last = boxes[chain[0]], boxes[chain[-1]]
    points = [(first.x + first.width, ports[(chain[0], chain[1], "out")])]
    for k in chain[1:-1]:
        b = boxes[k]
        points += [(b.x, b.y), (b.x + b.width, b.y)]
    points.append((last.x - 4, ports[(chain[-2], chain[-1], "in")]))
    return points


def _path(edge: Edge, points: list[tuple[float, float]]) -> str:
    d = [f"M{n(points[0][0])},{n(points[0][1])}"]
    for j, ((x1, y1), (x2, y2)) in enumerate(zip(points, points[1:], strict=False)):
        if j % 2 == 1:  # a passage through a column: straight
            d.append(f"L{n(x2)},{n(y2)}")
        else:
            mid = (x1 + x2) / 2
            d.append(f"C{n(mid)},{n(y1)} {n(mid)},{n(y2)} {n(x2)},{n(y2)}")
    kind = edge.kind if edge.kind in KINDS else "structural"
    css = " ".join(c for c in ("edge", f"k-{kind}", edge.css) if c)
    title = f"<title>{esc(edge.title)}</title>" if edge.title else ""
    return (
        f'<g class="{css}" data-edge="{esc(edge.parent)}-&gt;{esc(edge.child)}">{title}'
        f'<path d="{" ".join(d)}" marker-end="url(#ah-{kind})"/></g>'
    )


def _bezier(p: tuple[float, float], q: tuple[float, float], t: float) -> tuple[float, float]:
    mid = (p[0] + q[0]) / 2
    xs, ys = (p[0], mid, mid, q[0]), (p[1], p[1], q[1], q[1])
    u = 1 - t
    x = u**3 * xs[0] + 3 * u * u * t * xs[1] + 3 * u * t * t * xs[2] + t**3 * xs[3]
    y = u**3 * ys[0] + 3 * u * u * t * ys[1] + 3 * u * t * t * ys[2] + t**3 * ys[3]
    return x, y


def _label(edge: Edge, points: list[tuple[float, float]], taken: list[tuple[float, float, float, float]]) -> str:
    """The label on the first free spot along its edge (or the least crowded one), on a white halo."""
    w, h = text_width(edge.label, LABEL_SIZE) + 4, LABEL_SIZE + 3
    spots = []
    for j in range(0, len(points) - 1, 2):  # the curved stretches, between columns
        spots += [_bezier(points[j], points[j + 1], t) for t in LABEL_SPOTS]
    for j in range(1, len(points) - 1, 2):  # the passages through columns
        spots.append(((points[j][0] + points[j + 1][0]) / 2, points[j][1]))
    candidates = spots + [(x, y + dy) for dy in (-h, h) for x, y in spots]  # then just above or below the line
    best, best_overlap = candidates[0], float("inf")
    for cx, cy in candidates:
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        overlap = sum(_overlap(box, other) for other in taken)
        if overlap < best_overlap:
            best, best_overlap = (cx, cy), overlap
        if overlap == 0:
            break
    cx, cy = best
    taken.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    kind = edge.kind if edge.kind in KINDS else "structural"
    return f'<text class="elabel k-{kind}" x="{n(cx)}" y="{n(cy + LABEL_SIZE * 0.35)}" text-anchor="middle">{esc(edge.label)}</text>'


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return w * h if w > 0 and h > 0 else 0.0


def _rect(b: _Box) -> tuple[float, float, float, float]:
    return (b.x - 2, b.y - b.height / 2 - 2, b.x + b.width + 2, b.y + b.height / 2 + 2)


def _node(b: _Box) -> str:
    v = b.node
    assert v is not None
    css = " ".join(c for c in ("node", v.css, "task" if v.tags else "") if c)
    top = b.y - b.height / 2
    out = [f'<g class="{esc(css)}" data-variable="{esc(v.name)}">']
    out.append(f"<title>{esc(v.title or v.name)}</title>")
    out.append(f'<rect x="{n(b.x)}" y="{n(top)}" width="{n(b.width)}" height="{n(b.height)}" rx="6"/>')
    y = top + PAD
    cx = b.x + b.width / 2
    if v.tags:
        y += LINE_H - 3
        out.append(
            f'<text class="tag" x="{n(cx)}" y="{n(y - 2)}" text-anchor="middle">{esc(" · ".join(v.tags))}</text>'
        )
    for s in b.lines:
        y += LINE_H
        out.append(f'<text class="name" x="{n(cx)}" y="{n(y - 3)}" text-anchor="middle">{esc(s)}</text>')
    if v.sub:
        y += LINE_H - 2
        out.append(f'<text class="sub" x="{n(cx)}" y="{n(y - 2)}" text-anchor="middle">{esc(v.sub)}</text>')
    return "".join(out) + "</g>"


def _markers() -> str:
    out = ["<defs>"]
    for kind in (*KINDS, "structural"):
        out.append(
            f'<marker id="ah-{kind}" class="k-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker>'
        )
    return "".join(out) + "</defs>"

"""Rendering pages: jinja2 templates (worldgen/show/templates/), autoescaped, one inline stylesheet, no script.

Every page is one self-contained HTML document: no external asset, font or script, and a Content Security
Policy (`default-src 'none'`) so that even a stray reference could not reach the network. SVG figures are
built in Python (worldgen/show/svg.py, dag.py, timeline.py) and inserted as markup; everything else is
escaped by the template engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from worldgen import __version__
from worldgen.show.marker import HTML_MARKER

TEMPLATES = Path(__file__).with_name("templates")
# One colour per mechanism kind (Tableau 10, darkened where a thin line on white needs it).
PALETTE = (
    ("monotone", "#3f6fb0"),
    ("threshold", "#d1433b"),
    ("saturation", "#2f9a93"),
    ("lag", "#e07b12"),
    ("interaction", "#9c5b94"),
    ("seasonal", "#3f8f3a"),
    ("categorical", "#8a6244"),
    ("ratio", "#a88a00"),
    ("structural", "#a3abb5"),
)
_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render(template: str, context: dict[str, Any]) -> str:
    """One page. Figures come in as `markupsafe.Markup` (SVG built by worldgen/show); every other string is
    escaped."""
    base = {"marker": Markup(HTML_MARKER), "palette": PALETTE, "version": __version__, "back": None}
    return _ENV.get_template(template).render(base | context)

"""Pages a person can look at: a world card, a build overview and an eval report (`worldgen show`, `worldgen
eval --html`). Self-contained HTML with SVG figures written directly, the same bytes for the same inputs.

    show_world(WORLD, out=Path("card.html"), png=Path("card.png"))   # one world's card (and a screenshot)
    show_build(BUILD, out=BUILD / "show")                            # index.html + worlds/<id>.html
    write_eval_page(report, results, RUNS, Path("report.html"))      # `worldgen eval RUNS --html`

The pages show hidden truth (mechanisms, planted values, defects, rubrics): they are for maintainers, are
never written inside a world or an export, and the exports refuse any file that is one (marker.py).
"""

from __future__ import annotations

from typing import Any

__all__ = ["show_build", "show_world", "write_eval_page"]


def __getattr__(name: str) -> Any:  # lazy: the exports import worldgen.show.marker without the page machinery
    if name in __all__:
        from worldgen.show import api

        return getattr(api, name)
    raise AttributeError(name)

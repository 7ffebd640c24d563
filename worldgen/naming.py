"""How each business system names things: column case, key column names, key formats, date styles.

Drawn per world from the projection-plan stream, so two systems of one world rarely agree: the same
restaurant is `R-0012` in one file and `12` or `r12` in another, under a different column name each time.
"""

from __future__ import annotations

import re

import numpy as np

from contracts.model import DATE_STYLES as STRFTIME

CASE_STYLES = ("snake", "camel", "title", "upper")

DATE_STYLES = tuple(STRFTIME)
KEY_TEMPLATES = ("{P}-{n:04d}", "{P}{n:05d}", "{p}{n}", "{n}", "{P}_{n:03d}", "{PP}-{n:06d}")
KEY_SUFFIXES = ("id", "code", "ref", "no", "key")


def apply_case(name: str, style: str) -> str:
    words = [w for w in re.split(r"[_\s]+", name) if w]
    match style:
        case "camel":
            return words[0].lower() + "".join(w.capitalize() for w in words[1:])
        case "title":
            return " ".join(w.capitalize() for w in words)
        case "upper":
            return "_".join(w.upper() for w in words)
    return "_".join(w.lower() for w in words)


def system_style(rng: np.random.Generator) -> dict[str, str]:
    """One system's conventions."""
    return {
        "case": CASE_STYLES[int(rng.integers(len(CASE_STYLES)))],
        "date": DATE_STYLES[int(rng.integers(len(DATE_STYLES)))],
        "key": KEY_TEMPLATES[int(rng.integers(len(KEY_TEMPLATES)))],
    }

"""How a page or screenshot written by `worldgen show` recognises itself (and how exports recognise one).

Pages carry hidden truth (the DAG, planted values, defects), so they must never reach an analyst. Every HTML
page starts with `HTML_MARKER` within its first bytes and every PNG carries a tEXt chunk `Software: worldgen
show` right after its header: `worldgen show` only overwrites files that carry them, and the exports refuse
any data file that does (worldgen/export/leaks.py).
"""

from __future__ import annotations

GENERATOR = "worldgen show"
HTML_MARKER = f'<meta name="generator" content="{GENERATOR}">'
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_TEXT = b"Software\x00" + GENERATOR.encode()
HEAD_BYTES = 4096  # the markers sit within the first few hundred bytes; this much is read to look for them


def is_show_output(head: bytes) -> bool:
    """Whether the first bytes of a file are those of a page or screenshot `worldgen show` wrote."""
    if head.startswith(PNG_SIGNATURE):
        return b"tEXt" + PNG_TEXT in head[:HEAD_BYTES]
    return HTML_MARKER.encode() in head[:HEAD_BYTES]

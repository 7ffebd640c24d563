"""The bad-input suite: every way a user or an adversary can hand the `worldgen` command something wrong.

One module per command (`build_cases`, `audit_cases`, `grade_cases`, and `export_cases` for the export
command to come), each a list of `Case`s. `tests/test_bad_input.py` runs every case the same way and asserts
what the house rules promise: the documented exit code (2 for bad input), exactly one line on stderr, no
traceback, nothing created, changed or deleted outside the intended output (a hash snapshot of the case's
whole sandbox before and after), and an end within a time bound enforced by the harness.

To cover a new command, add `<command>_cases.py` with a `CASES` list and name it in `COMMANDS` below.
"""

from __future__ import annotations

COMMANDS = ("build", "audit", "grade", "export", "show")

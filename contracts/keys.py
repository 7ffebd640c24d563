"""What a delivered column shows, in canonical terms: one definition for the projection and the auditor.

A key column of an observed file shows, for the row's entity, one canonical column: a unit's master code,
the unit's id in the file's own system (`local:` formats) or its name (`name`); a party's code; an event's
running number or UUID. `shown` names that column; everything else a column shows is its `source`.
"""

from __future__ import annotations

from contracts.model import Deliverable, DeliveredColumn

ID_COLUMNS = {"unit_id": "units", "party_id": "parties", "event_id": "events"}
# Which rows of its base table a file reports.
BASE_TABLE = {"units": "units", "parties": "parties", "events": "events", "event_detail": "events", "panel": "panel"}


def shown(d: Deliverable, c: DeliveredColumn) -> tuple[str, str] | None:
    """(entity table, canonical column) a key column shows; None for a column that is not a key."""
    column = c.source.split(".", 1)[1]
    entity = ID_COLUMNS.get(column)
    if entity is None:
        return None
    fmt = c.format or ""
    if entity == "units":
        if fmt == "name":
            return "units", "name"
        if fmt.startswith("local:"):
            return "units", f"local_{d.system}"
        return "units", "code"
    if entity == "events" and fmt == "uuid":
        return "events", "uuid"
    return entity, "code"


def template(c: DeliveredColumn) -> str | None:
    """The key template a numeric key is rendered with (None for names, UUIDs and non-keys)."""
    fmt = c.format or ""
    if fmt in ("name", "uuid") or "{" not in fmt:
        return None
    return fmt.removeprefix("local:")


def is_text_key(c: DeliveredColumn) -> bool:
    """Keys shown as text that parse to themselves (names, UUIDs) rather than to a number."""
    return c.format in ("name", "uuid")

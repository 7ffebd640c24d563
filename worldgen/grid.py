"""The three grains of a world and the moves between them: unit (U,), panel (U, T) and event (N,)."""

from __future__ import annotations

import numpy as np


class Grid:
    """Shapes and index maps between the grains; events are registered once the volume step has drawn them."""

    def __init__(self, units: int, periods: int):
        self.units, self.periods = units, periods
        self.event_unit = np.zeros(0, dtype=np.int64)
        self.event_day = np.zeros(0, dtype=np.int64)
        self.event_cell = np.zeros(0, dtype=np.int64)  # each event's cell in the flattened panel

    def set_events(self, unit_idx: np.ndarray, day: np.ndarray) -> None:
        self.event_unit, self.event_day = unit_idx, day
        self.event_cell = unit_idx * self.periods + day

    def shape(self, grain: str) -> tuple[int, ...]:
        return {"unit": (self.units,), "panel": (self.units, self.periods), "event": (len(self.event_unit),)}[grain]

    def time(self, grain: str) -> np.ndarray:
        if grain == "panel":
            return np.broadcast_to(np.arange(self.periods, dtype=float), self.shape("panel"))
        return self.event_day.astype(float)

    def align(self, values: np.ndarray, source: str, target: str, fill: float = 0.0) -> np.ndarray:
        """Move values from the source grain to the target grain (event -> panel averages per cell)."""
        if source == target:
            return values
        if source == "unit":
            return values[:, None] * np.ones(self.periods) if target == "panel" else values[self.event_unit]
        if source == "panel" and target == "event":
            # values[event_unit, event_day], gathered by flat cell (a quarter of the cost of two index arrays)
            return np.take(np.reshape(values, (self.units * self.periods,)), self.event_cell)
        if source == "event" and target == "panel":
            size = self.units * self.periods
            total = np.bincount(self.event_cell, weights=values, minlength=size)
            count = np.bincount(self.event_cell, minlength=size)
            # Cells without events carry the parent's nominal level, so they contribute nothing.
            mean = np.where(count > 0, total / np.maximum(count, 1), fill)
            return mean.reshape(self.units, self.periods)
        raise ValueError(f"cannot align {source} values to {target}")

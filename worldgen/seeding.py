"""Named seed streams, all derived from one root seed through numpy's SeedSequence.

World k of a build with root seed S draws stage `name` from
SeedSequence(S, spawn_key=(k, stream_id(name), *sub)), where stream_id is the first four bytes of the
name's sha256 (never Python's salted hash). A stage's stream therefore depends only on (S, k, stage name,
sub-keys): changing the defect settings never changes the canonical state, and world k is identical
whatever N or the worker count.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from contracts.errors import InputError

MAX_SEED = 2**63 - 1


def check_seed(seed: object) -> int:
    """Validate a user-provided root seed (a non-negative integer)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    return seed


def stream_id(name: str) -> int:
    """A stable 32-bit id for a stage name (never Python's salted hash())."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def seed_sequence(root_seed: int, world_index: int, stage: str, *sub: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(check_seed(root_seed), spawn_key=(world_index, stream_id(stage), *sub))


def rng_for(root_seed: int, world_index: int, stage: str, *sub: int) -> np.random.Generator:
    """The generator of one named stage of one world."""
    return np.random.default_rng(seed_sequence(root_seed, world_index, stage, *sub))


def seed_record(root_seed: int, world_index: int, stage: str, *sub: int) -> dict[str, object]:
    """What the ledger stores so that anyone can re-derive the stream."""
    return {"entropy": root_seed, "spawn_key": [world_index, stream_id(stage), *sub], "stage": stage}


@dataclass(frozen=True)
class Streams:
    """The streams of one world: `rng(stage, *sub)` to draw, `record(stage, *sub)` for the ledger."""

    root_seed: int
    world_index: int

    def rng(self, stage: str, *sub: int) -> np.random.Generator:
        return rng_for(self.root_seed, self.world_index, stage, *sub)

    def record(self, stage: str, *sub: int) -> dict[str, object]:
        return seed_record(self.root_seed, self.world_index, stage, *sub)

"""The audit report: the auditor's verdict on one world, typed, with its JSON Schema beside the contract's.

The auditor writes it (audit.json); the task builder reads it by attributes. Every check has a status and a
one-line reason; checks that compare estimates with the contract carry one row per phenomenon, and the
recoverability check also carries the sign of each edge's effect as the blind analysis found it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from contracts.model import SCHEMA_VERSION

CHECKS = ("contract", "ledger", "invariants", "edges", "projection", "recoverability", "non_triviality")
# recorded_verdict appears only when world.json's recorded verdict disagrees with the audit.
CheckName = Literal[
    "contract", "ledger", "invariants", "edges", "projection", "recoverability", "non_triviality", "recorded_verdict"
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Estimate(_Model):
    """One phenomenon as an analysis recovered it, against the contract's target and tolerance."""

    id: str
    target: float | None
    estimate: float | None = Field(description="None when the analysis could not compute it")
    tolerance: float
    within: bool


class CheckResult(_Model):
    name: CheckName
    status: Literal["pass", "fail", "skip"]
    reason: str
    estimates: list[Estimate] = Field(default_factory=list, description="edges, recoverability, non_triviality")
    directions: dict[str, float] = Field(
        default_factory=dict, description="recoverability: edge id -> sign (+1/-1) of the effect found blind in E"
    )
    problems: list[str] = Field(default_factory=list, description="what failed, most telling first (capped)")


class AuditReport(_Model):
    schema_version: str = SCHEMA_VERSION
    world_id: str
    verdict: Literal["pass", "fail"]
    failing: list[str]
    checks: list[CheckResult]
    # Wall-clock timings: returned to callers, never written (audits must stay byte-identical).
    _seconds: float = PrivateAttr(default=0.0)
    _seconds_by_check: dict[str, float] = PrivateAttr(default_factory=dict)

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def _estimates(self, name: str) -> list[Estimate]:
        found = self.check(name)
        return found.estimates if found else []

    @property
    def recovered(self) -> dict[str, float]:
        """Phenomena the blind analysis of the cleaned observed files recovered: id -> estimate."""
        return {r.id: r.estimate for r in self._estimates("recoverability") if r.within and r.estimate is not None}

    @property
    def raw_estimates(self) -> dict[str, float]:
        """What the same analysis finds on the uncleaned files: id -> estimate."""
        return {r.id: r.estimate for r in self._estimates("non_triviality") if r.estimate is not None}

    @property
    def directions(self) -> dict[str, float]:
        found = self.check("recoverability")
        return dict(found.directions) if found else {}

    @property
    def seconds(self) -> float:
        return self._seconds

    @property
    def seconds_by_check(self) -> dict[str, float]:
        return self._seconds_by_check

    def timed(self, seconds: float, by_check: dict[str, float]) -> AuditReport:
        self._seconds, self._seconds_by_check = seconds, dict(by_check)
        return self

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def json_schema() -> dict[str, Any]:
    schema = AuditReport.model_json_schema()
    schema["$id"] = f"https://worldgen.dev/schema/audit-{SCHEMA_VERSION}.json"
    return schema

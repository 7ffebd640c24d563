"""The audit of one world: every check, a binary verdict with reasons, written to audit.json.

The report is a `contracts.audit.AuditReport` (typed, with a JSON Schema in contracts/).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path

from auditors.checks import check_contract, check_invariants, check_ledger, check_projection
from auditors.dataset import from_canonical, from_observed
from auditors.estimate import recover_phenomena
from auditors.worldio import World, load_world
from contracts.audit import CHECKS, AuditReport, CheckResult, Estimate
from contracts.errors import WorldFormatError
from contracts.safeio import atomic_write

__all__ = ["CHECKS", "audit_world"]


def _compare(values: dict[str, float], world: World, kinds: set[str] | None = None) -> list[Estimate]:
    assert world.contract is not None
    rows = []
    for ph in world.contract.phenomena:
        if kinds is not None and ph.kind not in kinds:
            continue
        got = values.get(ph.id, float("nan"))
        target = ph.target if ph.target is not None else float("nan")
        error = abs(got - target) if math.isfinite(got) and math.isfinite(target) else float("inf")
        rows.append(
            Estimate(
                id=ph.id,
                target=ph.target,
                estimate=None if not math.isfinite(got) else round(got, 6),
                tolerance=ph.tolerance,
                within=error <= ph.tolerance,
            )
        )
    return rows


def _first_miss(missed: list[Estimate]) -> str:
    r = missed[0]
    return f"{r.id}: estimated {r.estimate}, target {r.target} +- {r.tolerance:.4g}"


def check_edges(world: World) -> CheckResult:
    """(d) Each edge's pattern re-estimated in X with a mechanism-specific estimator matches the contract."""
    found = recover_phenomena(from_canonical(world), world.contract, {"edge_effect"})
    rows = _compare(found.values, world, {"edge_effect"})
    missed = [r for r in rows if not r.within]
    if missed:
        reason = f"{len(missed)} edge(s) not realised in X, e.g. {_first_miss(missed)}"
        return CheckResult(name="edges", status="fail", reason=reason, estimates=rows)
    reason = f"all {len(rows)} edges re-estimated in X within tolerance"
    return CheckResult(name="edges", status="pass", reason=reason, estimates=rows)


def check_recoverability(world: World) -> tuple[CheckResult, CheckResult]:
    """(f) every phenomenon recovered from cleaned E; (g) the raw files miss at least one."""
    contract = world.contract
    recovered = recover_phenomena(from_observed(world, clean=True), contract)
    clean = _compare(recovered.values, world)
    raw_data = from_observed(world, clean=False)
    # Non-triviality needs one miss: try the cheap period comparisons first, the full analysis only if needed.
    raw = _compare(recover_phenomena(raw_data, contract, {"period_change"}).values, world, {"period_change"})
    if all(r.within for r in raw):
        raw = _compare(recover_phenomena(raw_data, contract).values, world)
    missed = [r for r in clean if not r.within]
    if missed:
        status, reason = "fail", f"{len(missed)} phenomenon(s) not recoverable from E, e.g. {_first_miss(missed)}"
    else:
        status, reason = "pass", f"all {len(clean)} phenomena recovered from the cleaned observed files"
    f = CheckResult(
        name="recoverability", status=status, reason=reason, estimates=clean, directions=recovered.directions
    )
    raw_missed = [r.id for r in raw if not r.within]
    if raw_missed:
        reason = f"uncleaned files miss {len(raw_missed)} phenomenon(s), e.g. {raw_missed[0]}"
        g = CheckResult(name="non_triviality", status="pass", reason=reason, estimates=raw, problems=raw_missed)
    else:
        reason = "every phenomenon can be read off the raw files: the defects do not matter"
        g = CheckResult(name="non_triviality", status="fail", reason=reason, estimates=raw)
    return f, g


def audit_world(path: Path, write: bool = True, durable: bool = True) -> AuditReport:
    """Audit one world directory; raise WorldFormatError only if it is not a world at all.

    `durable=False` leaves audit.json to the operating system to write out (no fsync): for a world that is
    itself still a temporary directory, renamed into place whole, none of whose other files is synced."""
    started = time.perf_counter()
    world = load_world(path)
    if write and (path / "audit.json").is_dir():  # refuse before the work, not after it
        raise WorldFormatError(f"{path}: cannot write audit.json (it is a directory)")
    checks = [check_contract(world)]
    clock: dict[str, float] = {}
    if checks[0].status == "pass":
        for fn in (check_ledger, check_invariants, check_edges, check_projection):
            tick = time.perf_counter()
            checks.append(_guarded(fn.__name__.removeprefix("check_"), fn, world))
            clock[checks[-1].name] = round(time.perf_counter() - tick, 3)
        try:
            tick = time.perf_counter()
            checks.extend(check_recoverability(world))
            clock["recoverability+non_triviality"] = round(time.perf_counter() - tick, 3)
        except Exception as exc:  # noqa: BLE001 - an unreadable or broken E is a verdict, not a crash
            reason = f"cannot analyse the observed files: {type(exc).__name__}: {str(exc)[:120]}"
            checks += [
                CheckResult(name="recoverability", status="fail", reason=reason),
                CheckResult(name="non_triviality", status="fail", reason=reason),
            ]
    else:
        checks += [CheckResult(name=name, status="skip", reason="contract invalid") for name in CHECKS[1:]]
    failing = [c.name for c in checks if c.status != "pass"]
    disagreement = recorded_disagreement(world.meta, "fail" if failing else "pass", failing)
    if disagreement:  # only ever added on a disagreement, so an agreeing world's audit.json keeps its bytes
        checks.append(CheckResult(name="recorded_verdict", status="fail", reason=disagreement))
        failing.append("recorded_verdict")
    report = AuditReport(
        world_id=world.meta.get("world_id", path.name),
        verdict="fail" if failing else "pass",
        failing=failing,
        checks=checks,
    )
    if write:
        try:  # a new file renamed over audit.json: never written through a link, never seen half-written
            atomic_write(
                path / "audit.json",
                json.dumps(report.to_json(), indent=1, allow_nan=False) + "\n",
                fsync=durable,
            )
        except (OSError, ValueError) as exc:
            raise WorldFormatError(f"{path}: cannot write audit.json ({exc})") from None
    return report.timed(round(time.perf_counter() - started, 3), clock)


def recorded_disagreement(meta: dict, verdict: str, failing: list[str]) -> str | None:
    """Why world.json's recorded verdict disagrees with this audit's (None if it agrees or records none).

    A world built before its audit (the generator's own audit of its temporary directory) records none.
    """
    status, recorded = meta.get("status"), meta.get("audit")
    if recorded is None and status not in ("pass", "fail"):
        return None
    found = f"this audit finds {verdict!r} (failing: {', '.join(failing) or 'none'})"
    if status in ("pass", "fail") and status != verdict:
        return f"world.json records status {status!r} but {found}"
    if recorded is None:
        return None
    if not isinstance(recorded, dict):
        return f"world.json's audit record is not an object; {found}"
    if (recorded.get("verdict"), recorded.get("failing")) != (verdict, failing):
        shown = recorded.get("failing")
        shown = ", ".join(map(str, shown)) if isinstance(shown, list) else repr(shown)
        return f"world.json records verdict {recorded.get('verdict')!r} (failing: {shown or 'none'}) but {found}"
    return None


def _guarded(name: str, fn: Callable[[World], CheckResult], world: World) -> CheckResult:
    try:
        return fn(world)
    except WorldFormatError as exc:
        return CheckResult(name=name, status="fail", reason=str(exc))
    except Exception as exc:  # noqa: BLE001
        return CheckResult(
            name=name, status="fail", reason=f"check crashed on this world: {type(exc).__name__}: {str(exc)[:160]}"
        )

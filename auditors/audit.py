"""The audit of one world: every check, a binary verdict with reasons, written to audit.json."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from auditors.checks import Check, check_contract, check_invariants, check_ledger, check_projection
from auditors.dataset import from_canonical, from_observed
from auditors.estimate import recover_phenomena
from auditors.worldio import World, load_world
from contracts.errors import WorldFormatError
from contracts.model import SCHEMA_VERSION
from contracts.safeio import atomic_write

CHECKS = ("contract", "ledger", "invariants", "edges", "projection", "recoverability", "non_triviality")


def _compare(values: dict[str, float], world: World, kinds: set[str] | None = None) -> list[dict]:
    assert world.contract is not None
    rows = []
    for ph in world.contract.phenomena:
        if kinds is not None and ph.kind not in kinds:
            continue
        got = values.get(ph.id, float("nan"))
        target = ph.target if ph.target is not None else float("nan")
        error = abs(got - target) if math.isfinite(got) and math.isfinite(target) else float("inf")
        rows.append(
            {
                "id": ph.id,
                "target": target,
                "estimate": None if not math.isfinite(got) else round(got, 6),
                "tolerance": ph.tolerance,
                "within": error <= ph.tolerance,
            }
        )
    return rows


def check_edges(world: World) -> Check:
    """(d) Each edge's pattern re-estimated in X with a mechanism-specific estimator matches the contract."""
    rows = _compare(recover_phenomena(from_canonical(world), world.contract, {"edge_effect"}), world, {"edge_effect"})
    missed = [r for r in rows if not r["within"]]
    if missed:
        r = missed[0]
        return Check(
            "edges",
            "fail",
            f"{len(missed)} edge(s) not realised in X, e.g. {r['id']}: estimated {r['estimate']}, "
            f"contract {r['target']} +- {r['tolerance']:.4g}",
            {"edges": rows},
        )
    return Check("edges", "pass", f"all {len(rows)} edges re-estimated in X within tolerance", {"edges": rows})


def check_recoverability(world: World) -> tuple[Check, Check]:
    """(f) every phenomenon recovered from cleaned E; (g) the raw files miss at least one."""
    contract = world.contract
    recovered = recover_phenomena(from_observed(world, clean=True), contract)
    clean = _compare(recovered, world)
    directions = {
        k.split(":", 1)[1]: v for k, v in recovered.items() if k.startswith("direction:") and math.isfinite(v)
    }
    raw_data = from_observed(world, clean=False)
    # Non-triviality needs one miss: try the cheap period comparisons first, the full analysis only if needed.
    raw = _compare(recover_phenomena(raw_data, contract, {"period_change"}), world, {"period_change"})
    if all(r["within"] for r in raw):
        raw = _compare(recover_phenomena(raw_data, contract), world)
    missed = [r for r in clean if not r["within"]]
    if missed:
        r = missed[0]
        f = Check(
            "recoverability",
            "fail",
            f"{len(missed)} phenomenon(s) not recoverable from E, e.g. {r['id']}: "
            f"estimated {r['estimate']}, target {r['target']} +- {r['tolerance']:.4g}",
            {"phenomena": clean, "directions": directions},
        )
    else:
        f = Check(
            "recoverability",
            "pass",
            f"all {len(clean)} phenomena recovered from the cleaned observed files",
            {"phenomena": clean, "directions": directions},
        )
    raw_missed = [r["id"] for r in raw if not r["within"]]
    if raw_missed:
        g = Check(
            "non_triviality",
            "pass",
            f"uncleaned files miss {len(raw_missed)} phenomenon(s), e.g. {raw_missed[0]}",
            {"missed_raw": raw_missed, "phenomena": raw},
        )
    else:
        g = Check(
            "non_triviality",
            "fail",
            "every phenomenon can be read off the raw files: the defects do not matter",
            {"phenomena": raw},
        )
    return f, g


def audit_world(path: Path, write: bool = True) -> dict:
    """Audit one world directory; raise WorldFormatError only if it is not a world at all."""
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
            checks += [Check("recoverability", "fail", reason), Check("non_triviality", "fail", reason)]
    else:
        checks += [Check(name, "skip", "contract invalid") for name in CHECKS[1:]]
    failing = [c.name for c in checks if c.status != "pass"]
    disagreement = recorded_disagreement(world.meta, "fail" if failing else "pass", failing)
    if disagreement:  # only ever added on a disagreement, so an agreeing world's audit.json keeps its bytes
        checks.append(Check("recorded_verdict", "fail", disagreement))
        failing.append("recorded_verdict")
    report = {
        "schema_version": SCHEMA_VERSION,
        "world_id": world.meta.get("world_id", path.name),
        "verdict": "fail" if failing else "pass",
        "failing": failing,
        "checks": [{"name": c.name, "status": c.status, "reason": c.reason, "details": c.details} for c in checks],
    }
    if write:
        try:  # a new file renamed over audit.json: never written through a link, never seen half-written
            atomic_write(path / "audit.json", json.dumps(report, indent=1, allow_nan=False, default=str) + "\n")
        except (OSError, ValueError) as exc:
            raise WorldFormatError(f"{path}: cannot write audit.json ({exc})") from None
    report["seconds"] = round(time.perf_counter() - started, 3)  # returned, never written: audits stay byte-identical
    report["seconds_by_check"] = clock
    return report


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


def _guarded(name: str, fn, world: World) -> Check:
    try:
        return fn(world)
    except WorldFormatError as exc:
        return Check(name, "fail", str(exc))
    except Exception as exc:  # noqa: BLE001
        return Check(name, "fail", f"check crashed on this world: {type(exc).__name__}: {str(exc)[:160]}")

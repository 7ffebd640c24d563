"""The persona library (JSONL data under personas/library/) and its loader.

A persona is who asks the questions: role, organisation, region and concern pick the domain and, through
the optional `focus`, the variable whose change the world is built around.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from contracts.errors import PersonaError, did_you_mean
from contracts.model import Persona
from contracts.safeio import MIB, loads, one_line, read_text

REQUIRED = ("id", "domain", "role", "organisation", "region", "concern")
MAX_PERSONA_FILE_BYTES = 16 * MIB  # the library's 223 personas take 60 KiB
MAX_RECORD_CHARS = 16_384
MAX_FIELD_CHARS = 2_000  # a field is a phrase that goes into prompts; longer is a pasted document, not a persona


def parse_persona_lines(lines: list[str], source: str) -> list[Persona]:
    """Parse JSONL persona records; the first bad record raises one line naming record and field."""
    personas: list[Persona] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}: record {number}"
        if len(line) > MAX_RECORD_CHARS:
            raise PersonaError(f"{where}: longer than {MAX_RECORD_CHARS} characters")
        raw = loads(line, where=where, error=PersonaError)
        if not isinstance(raw, dict):
            raise PersonaError(f"{where}: expected a JSON object, got {type(raw).__name__}")
        for field in REQUIRED:
            value = raw.get(field)
            if not isinstance(value, str) or not value.strip():
                raise PersonaError(
                    f"{where}: field {field!r} must be a non-empty string, got {one_line(repr(value), 80)}"
                )
        for field, value in raw.items():
            if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
                raise PersonaError(
                    f"{where}: field {one_line(repr(field), 40)} is longer than {MAX_FIELD_CHARS} characters"
                )
        try:
            persona = Persona.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(map(str, err["loc"])) or "?"
            raise PersonaError(f"{where}: field {field!r}: {err['msg']}") from None
        if persona.id in seen:
            raise PersonaError(f"{where}: field 'id': duplicate persona id {persona.id!r}")
        seen.add(persona.id)
        personas.append(persona)
    if not personas:
        raise PersonaError(f"{source}: no persona records")
    return personas


def load_persona_file(path: Path) -> list[Persona]:
    """A user's JSONL persona file: a bounded regular UTF-8 file (never a FIFO or a device)."""
    text = read_text(path, max_bytes=MAX_PERSONA_FILE_BYTES, what="persona file", error=PersonaError)
    return parse_persona_lines(text.split("\n"), one_line(path))


def builtin_personas() -> list[Persona]:
    """Every persona shipped with worldgen, sorted by id."""
    folder = resources.files("personas") / "library"
    personas: list[Persona] = []
    for f in sorted(folder.iterdir(), key=lambda f: f.name):
        if f.name.endswith(".jsonl"):
            personas += parse_persona_lines(f.read_text(encoding="utf-8").splitlines(), f"personas/library/{f.name}")
    return sorted(personas, key=lambda p: p.id)


FOCUS_CANDIDATE_PARENTS = 4  # a world keeps at most half of a variable's candidate parents, and a focus needs two


def check_against_packs(personas: list[Persona], packs: dict, source: str) -> None:
    """Every persona names a known domain and, if it has one, a focus the pack can build around."""
    for p in personas:
        if p.domain not in packs:
            raise PersonaError(
                f"{source}: persona {p.id!r}: field 'domain': unknown domain {p.domain!r}{did_you_mean(p.domain, packs)}"
            )
        if p.focus is not None:
            graph = packs[p.domain].candidate_graph()
            if p.focus not in graph:
                raise PersonaError(
                    f"{source}: persona {p.id!r}: field 'focus': unknown variable {p.focus!r}{did_you_mean(p.focus, graph.nodes)}"
                )
            if graph.in_degree(p.focus) < FOCUS_CANDIDATE_PARENTS:
                raise PersonaError(
                    f"{source}: persona {p.id!r}: field 'focus': {p.focus!r} has fewer than "
                    f"{FOCUS_CANDIDATE_PARENTS} candidate parents"
                )
        if p.trend is not None and p.focus is None:
            raise PersonaError(f"{source}: persona {p.id!r}: field 'trend' needs a 'focus' to move")

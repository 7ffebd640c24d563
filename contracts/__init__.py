"""The world contract's data model and JSON Schema, shared by generator, auditor and rubrics."""

from contracts.errors import ContractError, WorldgenError
from contracts.model import (
    MECHANISM_KINDS,
    MECHANISM_PARAMS,
    SCHEMA_VERSION,
    Contract,
    load_contract,
    longest_path_layers,
    validate_contract,
)

__all__ = [
    "MECHANISM_KINDS",
    "MECHANISM_PARAMS",
    "SCHEMA_VERSION",
    "Contract",
    "ContractError",
    "WorldgenError",
    "load_contract",
    "longest_path_layers",
    "validate_contract",
]

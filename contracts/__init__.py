"""The world contract's data model and JSON Schema, shared by generator, auditor and rubrics."""

from contracts.kernels import pin_numpy_kernels

pin_numpy_kernels()  # before anything imports numpy: a world's bytes must not depend on the CPU (see kernels.py)

from contracts.errors import ContractError, WorldgenError  # noqa: E402
from contracts.model import (  # noqa: E402
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

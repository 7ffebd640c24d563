"""worldgen: a mechanism-first synthetic data-world generator."""

import contracts  # noqa: F401  (first: it pins numpy's kernels before numpy loads; contracts/kernels.py)

__version__ = "0.1.0"

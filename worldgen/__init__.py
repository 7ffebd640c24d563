"""worldgen: a mechanism-first synthetic data-world generator."""

__version__ = "0.1.0"

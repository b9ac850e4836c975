"""aiorma's version, in a module of its own so that modules inside the package can read it
without importing the package (pyproject.toml states it too: keep the two the same)."""

__version__ = "0.1.0"

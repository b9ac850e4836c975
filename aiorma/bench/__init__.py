"""Benchmarks: ``python -m aiorma.bench NAME [options]``; each NAME is a module of this package
with a ``main(argv: list[str]) -> int`` function.  Results are ratios against a baseline measured
in the same run, written as JSON and plotted for docs/benchmarks.md."""

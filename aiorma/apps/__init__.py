"""Application workloads shipped with the package: the transactional update pattern and the
dense LU solver (Zounmevo 2014, §5.8), run by ``examples/`` and by ``python -m aiorma.bench``."""

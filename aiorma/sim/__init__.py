"""Collectives evaluated at scale on a simulated cluster (``python -m aiorma.sim EXPERIMENT``).

The network model and the virtual clock are in :mod:`aiorma.sim.network`; lightweight ranks
for thousand-rank runs in :mod:`aiorma.sim.lite`; one module per experiment.
"""

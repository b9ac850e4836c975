"""The simulation layer: collectives evaluated at scale on a simulated cluster
(``python -m aiorma.sim EXPERIMENT``).

One job per module, imports only downward (sim may import the collectives, the transports and the
runtime; nothing below imports sim):

* :mod:`~aiorma.sim.cost` — the LogGP cost model of a switched cluster (``NetworkParams``,
  ``NetworkModel``);
* :mod:`~aiorma.sim.clock` — virtual time (``VirtualClockLoop``, ``run_virtual``, ``EventQueue``);
* :mod:`~aiorma.sim.network` — ``SimNetwork``, the ``local`` transport with the model's costs;
* :mod:`~aiorma.sim.run` — ``run_simulated``: real aiorma ranks on a ``SimNetwork``;
* :mod:`~aiorma.sim.lite` — lightweight ranks for thousand-rank runs;
* one module per experiment (``barrier``, ``bcast_topology``, ``bcast_multicast``).
"""

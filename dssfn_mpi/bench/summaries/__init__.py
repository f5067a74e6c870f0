"""A sweep's runs reduced to the numbers every figure and table shows.

``summary`` gives one run's numbers from its run log, ``projection`` its projected
dedicated-core time and time to eps (the benchmarks' one door to the replay), ``records``
the sweep summary (the small JSON file a figure or a table of ``results/data`` is drawn
from), and ``tables``, ``table2`` and ``jitter`` the Markdown tables of the sweeps, of the
paper's Table 2 comparison and of the jitter view.
"""

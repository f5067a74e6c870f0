"""The benchmarks' figures (``dssfn-mpi plot``), PNG and PDF, drawn from sweep summaries.

``plot`` draws whatever a file holds (a sweep, its summary, an RMA file or a run log),
``figstyle`` is what every figure shares (each mode's colour and marker, asked of its
algorithm; the saving), ``timeplots`` the measured and projected times at a fixed K,
``ttefigs`` the views at equal accuracy, ``scalefig`` fig. 3 at scale, ``decomposefig``
the decomposition, ``rmaviews`` the mailbox micro-benchmark and ``accuracy`` the time to
accuracy of live and simulated runs (``dssfn-mpi bench accuracy``).
"""

"""Micro-benchmarks: one piece of a run timed alone, each a program of its own
(``python -m dssfn_mpi.bench.micro.NAME``).

``rma`` times the mailbox's one-sided write and read of one Z (run as 2-rank jobs by
``rma_jobs``, ``dssfn-mpi bench rma``), ``activation`` one async activation against its
floor and ``syncstep`` one synchronous iteration against its floor (both use ``mailbox``,
the mailbox with one-neighbour entry points), ``oneshot`` the one-shot baseline's cost
against the width n, and ``simcost`` the simulator's own CPU per simulated activation.
"""

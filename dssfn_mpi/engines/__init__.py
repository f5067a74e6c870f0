"""The live drivers: per-layer solvers over MPI, one module per driver kind.

Every engine is built once per run (collectively, by its driver kind:
:meth:`dssfn_mpi.drivers.Driver.engine`) and then
called once per layer on every rank: ``engine.solve(problem) -> (O_m, SolveStats)``.
An engine runs the arithmetic of its algorithm (:mod:`dssfn_mpi.algorithms`) around its
communication. Engines see only their own rank's statistics and talk to graph
neighbours (or, for the allreduce, to everyone); they never read another rank's data.
The run context, a layer's problem and its stats are in :mod:`.base`.
"""

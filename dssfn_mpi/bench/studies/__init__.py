"""Studies behind the models' constants, run by hand.

``penalty`` is the serial ADMM penalty sweep the ``auto`` penalty's constants were fitted
on (``dssfn-mpi bench penalty``); ``links`` checks the replay's network model against
real rate-capped links between two emulated hosts (``dssfn-mpi bench links``, as root),
which ``netns`` makes from network namespaces.
"""

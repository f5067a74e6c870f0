"""The ``dssfn-mpi bench`` sweeps: what each runs and how.

A sweep is a list of training (or ``simulate``) configurations, each run as its own job
and appended to one HDF5 sweep file: ``presets`` sizes every benchmark (``quick``, ``mid``,
``paper``), ``specs`` turns a preset into the configurations (``decompose`` those of the
decomposition, with its tables), ``jobs`` runs them (``busy`` the CPU hogs of the
contention sweep and the signals that stop them), ``collect`` gathers run logs made
elsewhere (a Slurm array) into a sweep file; ``parser`` declares every ``bench``
subcommand, ``command`` runs a sweep and ``toolargs`` holds the tools' options.
"""

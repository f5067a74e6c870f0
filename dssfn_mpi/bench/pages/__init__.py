"""The committed results and the pages written from them.

``manifest`` reads ``results/data/MANIFEST.json`` and holds the rule for a file's pinned
relaxation; ``resultsdir`` keeps ``results/data`` and its manifest and redraws every
published figure from it (``dssfn-mpi plot --all``; a file at a pinned relaxation names it
in its figures' titles), ``mdtables`` regenerates the marked tables and texts of the pages
(BENCHMARKS.md, README.md, the reference pages), ``answer`` computes the prose of README's
answer and of the results page's summary from the data, ``notes`` the results page's notes
and ``refnotes`` the reference pages' measured numbers.
"""

"""dssfn_mpi: asynchronous decentralized SSFN on MPI.

Reproduces and extends Liang, Javid, Skoglund and Chatterjee, "Asynchronous
Decentralized Learning of a Neural Network", ICASSP 2020.
"""

__version__ = "0.1.0"

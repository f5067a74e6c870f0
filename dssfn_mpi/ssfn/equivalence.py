"""The centralized-equivalence check: how far each node is from the exact layer solution.

The nodes jointly solve ``min sum_m ||T_m - O Y_m||^2, ||O||_F^2 <= eps``. Its
exact solution ``O*`` needs only the summed statistics ``G = sum G_m``,
``B = sum B_m``, so rank 0 reduces them, solves the stacked problem exactly
(:func:`dssfn_mpi.ssfn.solver.exact_solve`) and compares every rank's ``O_m`` with
it. This is an untimed observation: it never feeds back into training.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import RankError
from ..mailbox.waiting import WaitPolicy
from .solver import ExactSolution, exact_solve, objective

__all__ = ["check_fields", "exact_target", "measure_equivalence", "relative_distance"]


def relative_distance(O: np.ndarray, O_star: np.ndarray) -> float:
    """``||O - O*||_F / ||O*||_F`` (the denominator kept above zero).

    The one formula behind ``rel_distance`` in ``/layers`` and ``/trajectory``, so a
    layer's final snapshot has exactly the distance the check reports.
    """
    ref = max(float(np.linalg.norm(O_star)), np.finfo(float).tiny)
    return float(np.linalg.norm(O - O_star)) / ref


def exact_target(comm: Any, G: np.ndarray, B: np.ndarray, eps: float,
                 wait_policy: WaitPolicy | None = None,
                 timeout: float = float("inf")) -> ExactSolution:
    """The layer's exact solution, on every rank (collective): what ``--stop eps`` aims at.

    Rank 0 reduces the statistics, solves the stacked problem and broadcasts
    ``O*`` and its multiplier; the training loop calls it before the solve and
    leaves it out of the layer's timings, and the check after the layer reuses it.

    Parameters
    ----------
    comm, G, B, eps, wait_policy, timeout
        As for :func:`measure_equivalence`.

    Returns
    -------
    ExactSolution
        ``O*`` and ``lam``, the same on every rank.
    """
    from mpi4py import MPI

    root = comm.Get_rank() == 0
    Gs = np.empty_like(G) if root else None
    Bs = np.empty_like(B) if root else None
    policy = wait_policy or WaitPolicy("spin")

    def wait(requests: list, what: str) -> None:
        if not policy.wait(lambda: MPI.Request.Testall(requests), timeout, progress=True).ready:
            raise RankError(comm.Get_rank(), f"{what}: the other ranks did not answer within "
                            f"{timeout:g} s (a rank died or hangs; see --timeout)")

    wait([comm.Ireduce(G, Gs, op=MPI.SUM, root=0), comm.Ireduce(B, Bs, op=MPI.SUM, root=0)],
         "the exact solution for --stop eps")
    # O* and lam in one broadcast buffer.
    packed = np.empty(B.size + 1)
    if root:
        sol = exact_solve(Gs, Bs, eps)
        packed[:-1], packed[-1] = sol.O.ravel(), sol.lam
    wait([comm.Ibcast(packed, root=0)], "the exact solution for --stop eps")
    return ExactSolution(O=packed[:-1].reshape(B.shape), lam=float(packed[-1]))


def check_fields(G: np.ndarray, B: np.ndarray, tt: float, Os: np.ndarray,
                 sol: ExactSolution) -> dict[str, np.ndarray]:
    """The ``check`` fields of :mod:`dssfn_mpi.runlog.schema` from the stacked statistics.

    Parameters
    ----------
    G, B : ndarray
        ``sum_m G_m`` and ``sum_m B_m``.
    tt : float
        ``sum_m ||T_m||_F^2``.
    Os : ndarray, shape (M, Q, d)
        Every node's solution.
    sol : ExactSolution
        The exact solution of the stacked problem.

    Returns
    -------
    dict
        ``rel_distance``, ``objective_gap`` (one value per node) and the
        per-layer ``consensus_spread`` and ``lambda_star``, repeated M times.
    """
    fstar = objective(sol.O, G, B, tt)
    mean = Os.mean(axis=0)
    spread = max(np.linalg.norm(Om - mean) for Om in Os) / max(
        float(np.linalg.norm(mean)), np.finfo(float).tiny
    )
    return {
        "rel_distance": np.array([relative_distance(Om, sol.O) for Om in Os]),
        "objective_gap": np.array([(objective(Om, G, B, tt) - fstar) / abs(fstar)
                                   for Om in Os]),
        "consensus_spread": np.full(len(Os), spread),
        "lambda_star": np.full(len(Os), sol.lam),
    }


def measure_equivalence(comm: Any, G: np.ndarray, B: np.ndarray, tt: float, O: np.ndarray,
                        eps: float, wait_policy: WaitPolicy | None = None,
                        timeout: float = float("inf"), solution: ExactSolution | None = None
                        ) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Distances of every rank's ``O_m`` to the exact solution of the stacked problem.

    Collective over ``comm``: every rank passes its own statistics and solution.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        One rank per graph node.
    G, B : ndarray
        This rank's ``Y_m Y_m^T`` and ``T_m Y_m^T``.
    tt : float
        This rank's ``||T_m||_F^2``.
    O : ndarray
        This rank's solution of the layer.
    eps : float
        The squared Frobenius bound.
    wait_policy : WaitPolicy, optional
        How to wait for the reductions (default: spin, as blocking MPI does).
    timeout : float
        Seconds to wait for them before raising
        :class:`~dssfn_mpi.errors.RankError`.
    solution : ExactSolution, optional
        The stacked problem's exact solution when already known (``--stop eps``
        computes it before the layer: :func:`exact_target`); else rank 0 solves it.

    Returns
    -------
    (dict, ndarray) or None
        On rank 0, the ``check`` fields of :mod:`dssfn_mpi.runlog.schema`, each an
        array of length M (``rel_distance``, ``objective_gap``, and the
        per-layer ``consensus_spread`` and ``lambda_star`` repeated), and the
        exact solution ``O*`` (the trajectories' reference); ``None`` on the
        other ranks.
    """
    from mpi4py import MPI

    root = comm.Get_rank() == 0
    Gs = np.empty_like(G) if root else None
    Bs = np.empty_like(B) if root else None
    tt_in, tt_sum = np.array([tt], dtype=float), np.zeros(1)
    Os = np.empty((comm.Get_size(),) + O.shape) if root else None
    O = np.ascontiguousarray(O)
    requests = [comm.Ireduce(G, Gs, op=MPI.SUM, root=0), comm.Ireduce(B, Bs, op=MPI.SUM, root=0),
                comm.Ireduce(tt_in, tt_sum, op=MPI.SUM, root=0), comm.Igather(O, Os, root=0)]
    policy = wait_policy or WaitPolicy("spin")
    if not policy.wait(lambda: MPI.Request.Testall(requests), timeout, progress=True).ready:
        raise RankError(comm.Get_rank(), "the equivalence check: the other ranks did not "
                        f"answer within {timeout:g} s (a rank died or hangs; see --timeout)")
    if not root:
        return None
    sol = solution if solution is not None else exact_solve(Gs, Bs, eps)
    return check_fields(Gs, Bs, float(tt_sum[0]), Os, sol), sol.O

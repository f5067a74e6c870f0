"""Every simulated node's test accuracy, with the test set's features shared where they agree.

Each node's test features of layer l follow its own solutions (:func:`dssfn_mpi.ssfn.model.
next_features`): ``Y_l = relu([O Y; -O Y; colnorm(R_l Y)])`` from ``Y_{l-1}``. Held as
blocks of rows, ``Y_l`` is ``[relu(P); relu(-P); Rest]`` with ``P = O_{l-1} Y_{l-1}`` (Q rows,
the node's own) and ``Rest = relu(colnorm(R_l Y_{l-1}))``; products with ``Y`` are sums over
the blocks, and a block that several nodes hold (the test set itself, and layer 1's random
part, which every node computes from the same test set) is multiplied once per layer. Nodes
whose solutions agree bit for bit so far (every node under sync and oneshot) share all their
features. The products are the same sums split by blocks: scores agree with the unsplit
ones to rounding.

The features of the last layer are not kept (each node's are dropped once scored). From
layer 2 on the random part is each node's own: ``n x`` (test samples) values per node with
distinct solutions, kept until the next layer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from ..ssfn.model import hidden_rows, random_matrix

__all__ = ["TestSet"]


@dataclass(frozen=True)
class _Features:
    """A node's test features as row blocks: ``[relu(P); relu(-P); rest]`` (``P`` None: rest
    alone, the test set itself); ``shared``: ``rest`` is the same array for every node."""

    P: np.ndarray | None
    rest: np.ndarray
    shared: bool = True


class TestSet:
    """The nodes' test features, layer by layer, and their test accuracies.

    Parameters
    ----------
    Xt : ndarray, shape (P, N)
        The test set's inputs.
    yt : ndarray, shape (N,)
        Its labels.
    nodes : int
        M.
    seed, hidden : int
        The run's seed and hidden width (the random blocks ``R_l``).
    """

    def __init__(self, Xt: np.ndarray, yt: np.ndarray, nodes: int, seed: int,
                 hidden: int) -> None:
        self.yt, self.seed, self.hidden = yt, seed, hidden
        self._feats: dict[bytes, _Features] = {b"": _Features(None, Xt)}
        self._key = [b""] * nodes  # each node's history of solutions, as a key

    def accuracies(self, layer: int, Os: list[np.ndarray], prev: list[np.ndarray] | None,
                   keep: bool) -> list[float]:
        """Each node's test accuracy at ``layer`` (solutions ``Os``; ``prev`` those of
        ``layer - 1``); ``keep``: the features are kept for the next layer (else each node's
        are dropped once scored)."""
        if self.yt.shape[0] == 0:
            return [float("nan")] * len(Os)
        feats: dict[bytes, _Features] = {} if layer > 0 else self._feats
        scored: dict[bytes, float] = {}
        cache: dict[int, np.ndarray] = {}
        R, keys, accs = None, [], []
        for m, O in enumerate(Os):
            key = _digest(self._key[m], prev[m]) if layer > 0 else self._key[m]
            keys.append(key)
            done = _digest(key, O)
            if done not in scored:
                Y = feats.get(key)
                if Y is None:
                    if R is None:
                        Q, d = prev[m].shape
                        R = random_matrix(self.seed, layer, hidden_rows(self.hidden, Q), d)
                    Y = _next(prev[m], self._feats[self._key[m]], R, cache)
                    if keep:
                        feats[key] = Y
                scored[done] = float(np.mean(np.argmax(_times(O, Y), axis=0) == self.yt))
            accs.append(scored[done])
        self._feats, self._key = (feats if keep else {}), keys
        return accs


def _digest(key: bytes, O: np.ndarray) -> bytes:
    """The key of a history of solutions ``key`` followed by ``O``."""
    return hashlib.sha256(key + O.tobytes()).digest()


def _times(A: np.ndarray, Y: _Features, cache: dict[int, np.ndarray] | None = None
           ) -> np.ndarray:
    """``A @ Y`` by blocks; the product with a shared ``rest`` from ``cache`` when given
    (keyed by the block)."""
    cache = cache if Y.shared else None
    if Y.P is None:
        return _rest_product(A, Y.rest, cache)
    Q = Y.P.shape[0]
    out = A[:, :Q] @ np.maximum(Y.P, 0.0)
    out += A[:, Q:2 * Q] @ np.maximum(-Y.P, 0.0)
    out += _rest_product(A[:, 2 * Q:], Y.rest, cache)
    return out


def _rest_product(A: np.ndarray, rest: np.ndarray, cache: dict[int, np.ndarray] | None
                  ) -> np.ndarray:
    if cache is None:
        return A @ rest
    if id(rest) not in cache:
        cache[id(rest)] = A @ rest
    return cache[id(rest)].copy()


def _next(O: np.ndarray, Y: _Features, R: np.ndarray, cache: dict[int, np.ndarray]
          ) -> _Features:
    """The next layer's features from ``Y`` and the node's solution ``O``: as
    :func:`~dssfn_mpi.ssfn.model.next_features`, by blocks (the random part of a shared block
    computed once)."""
    rest = cache.get(-id(Y.rest))
    if Y.P is not None or rest is None:
        rest = _times(R, Y, cache)
        norms = np.linalg.norm(rest, axis=0)
        norms[norms == 0.0] = 1.0
        rest /= norms
        np.maximum(rest, 0.0, out=rest)
        if Y.P is None:  # the same for every node that holds this block
            cache[-id(Y.rest)] = rest
    return _Features(_times(O, Y), rest, shared=Y.P is None)

"""SSFN forward pass: the shared random matrices and the layer-to-layer map.

``Y_{l+1} = relu([O_l Y_l; -O_l Y_l; colnorm(R_{l+1} Y_l)])``, i.e.
``W_{l+1} = [V_Q O_l; R_{l+1}]`` with ``V_Q = [I_Q; -I_Q]`` (docs/ALGORITHMS.md
section 1). ``R_{l+1}`` is drawn from a generator seeded by ``(seed, l+1)``,
so every node builds the same matrix with no communication.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accuracy",
    "default_eps",
    "default_width",
    "forward",
    "hidden_rows",
    "layer_features",
    "next_features",
    "one_hot",
    "predict",
    "random_matrix",
]


def default_width(n_classes: int) -> int:
    """The paper's layer width ``n = 2Q + 1000`` for ``Q = n_classes`` (``--hidden``'s default)."""
    return 2 * n_classes + 1000


def default_eps(n_classes: int) -> float:
    """The paper's norm bound ``eps = 2Q`` on ``||O_l||_F^2`` for ``Q = n_classes`` (the
    default)."""
    return 2.0 * n_classes


def random_matrix(seed: int, layer: int, rows: int, cols: int) -> np.ndarray:
    """The shared random block ``R_layer``, uniform in [-1, 1].

    Parameters
    ----------
    seed : int
        Run seed shared by every node.
    layer : int
        Index of the weight matrix it belongs to (1 for ``W_1``).
    rows, cols : int
        ``n - 2Q`` and the row count of the previous layer's features.

    Returns
    -------
    ndarray, shape (rows, cols)
    """
    rng = np.random.default_rng([int(seed), int(layer), 0x55F4])
    return rng.uniform(-1.0, 1.0, size=(rows, cols))


def hidden_rows(hidden: int, n_classes: int) -> int:
    """Rows of the random block: ``n - 2Q``."""
    return hidden - 2 * n_classes


def next_features(Y: np.ndarray, O: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Features of the next layer from this layer's features and solution.

    Parameters
    ----------
    Y : ndarray, shape (d, J)
        This layer's features.
    O : ndarray, shape (Q, d)
        This layer's output matrix.
    R : ndarray, shape (n - 2Q, d)
        The shared random block of the next weight matrix.

    Returns
    -------
    ndarray, shape (n, J)
        ``relu([O Y; -O Y; colnorm(R Y)])``; each sample's random part is
        scaled to unit 2-norm (as in the SSFN authors' code) so the features
        stay bounded however deep the network is.
    """
    Q = O.shape[0]
    J = Y.shape[1]
    out = np.empty((2 * Q + R.shape[0], J))
    OY = O @ Y
    out[:Q] = OY
    np.negative(OY, out=out[Q : 2 * Q])
    RY = out[2 * Q :]
    np.matmul(R, Y, out=RY)
    norms = np.linalg.norm(RY, axis=0)
    norms[norms == 0.0] = 1.0
    RY /= norms
    np.maximum(out, 0.0, out=out)
    return out


def layer_features(
    O_prev: np.ndarray, seed: int, layer: int, hidden: int, *Ys: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Features of ``layer`` (>= 1) for each of ``Ys`` (features of ``layer - 1``).

    The one place where the network's next layer is built: ``R_layer`` is drawn
    once from ``(seed, layer)`` and applied to every feature matrix given (for
    instance a training shard and the test set).

    Parameters
    ----------
    O_prev : ndarray, shape (Q, d)
        Solution of layer ``layer - 1``.
    seed : int
        Run seed shared by every node.
    layer : int
        Index of the layer whose features are built (>= 1).
    hidden : int
        Hidden width n (> 2Q).
    *Ys : ndarray, shape (d, J)
        Features of layer ``layer - 1``.

    Returns
    -------
    tuple of ndarray, shape (n, J)
        One feature matrix per input, in order.
    """
    Q, d = O_prev.shape
    R = random_matrix(seed, layer, hidden_rows(hidden, Q), d)
    return tuple(next_features(Y, O_prev, R) for Y in Ys)


def forward(X: np.ndarray, Os: list[np.ndarray], seed: int, hidden: int):
    """Yield the features ``Y_0 = X, Y_1, ..., Y_{len(Os)-1}`` of a trained network.

    ``Y_l`` is the input of layer ``l``, whose solution is ``Os[l]``; the last
    solution is not applied (its output is the prediction ``Os[-1] @ Y``).
    """
    Y = X
    for layer in range(len(Os)):
        if layer > 0:
            (Y,) = layer_features(Os[layer - 1], seed, layer, hidden, Y)
        yield Y


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Targets ``T`` (Q x J) with a single 1 per column."""
    T = np.zeros((n_classes, y.shape[0]))
    T[y, np.arange(y.shape[0])] = 1.0
    return T


def predict(O: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Class index of each column of ``O Y``."""
    return np.argmax(O @ Y, axis=0)


def accuracy(O: np.ndarray, Y: np.ndarray, y: np.ndarray) -> float:
    """Fraction of columns of ``Y`` whose predicted class equals ``y``."""
    if y.shape[0] == 0:
        return float("nan")
    return float(np.mean(predict(O, Y) == y))

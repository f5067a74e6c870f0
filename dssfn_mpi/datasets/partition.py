"""Split the training columns over the M processing nodes.

The paper divides the training set uniformly at random between the nodes
(``uniform``). Two more schemes exist for experiments beyond it:
``stratified`` (every node sees every class in the same proportion, as far as
integer counts allow) and ``dirichlet:ALPHA`` (label skew: each class is
spread over the nodes with proportions drawn from a symmetric Dirichlet with
concentration ALPHA; small ALPHA gives nodes that hold only a few classes).

Every scheme returns, for each node, a sorted int64 array of column indices
into the training set. The arrays are disjoint, together cover every index
exactly once, and depend only on ``(y, n_nodes, scheme, seed)``, so each rank
can compute the whole partition itself and take its own shard.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UserError, require

SCHEMES = ("uniform", "stratified", "dirichlet:ALPHA")

# Keeps the partition stream apart from other users of the same seed.
_PARTITION_TAG = 0x50415254


def parse_scheme(scheme: str) -> tuple[str, float | None]:
    """Split a scheme string into its name and parameter.

    Parameters
    ----------
    scheme : str
        ``"uniform"``, ``"stratified"`` or ``"dirichlet:ALPHA"`` with ALPHA a
        positive finite number, e.g. ``"dirichlet:0.5"``. Case and surrounding
        spaces are ignored.

    Returns
    -------
    (str, float or None)
        The scheme name and ALPHA (None for the schemes without a parameter).

    Raises
    ------
    UserError
        Unknown scheme, a parameter where none is taken, or a missing,
        non-numeric, non-finite or non-positive ALPHA.
    """
    text = str(scheme).strip()
    name, sep, arg = text.partition(":")
    name = name.strip().lower()
    arg = arg.strip()
    if name in ("uniform", "stratified"):
        require(
            not sep,
            f"partition scheme {name!r} takes no parameter, got {text!r}; use {name!r}",
        )
        return name, None
    if name == "dirichlet":
        require(
            bool(arg),
            f"partition scheme {text!r} needs a concentration ALPHA > 0, e.g. 'dirichlet:0.5'",
        )
        try:
            alpha = float(arg)
        except ValueError:
            raise UserError(
                f"dirichlet concentration {arg!r} is not a number; use e.g. 'dirichlet:0.5'"
            ) from None
        require(
            math.isfinite(alpha) and alpha > 0,
            f"dirichlet concentration must be a finite number > 0, got {arg!r}; "
            "use e.g. 'dirichlet:0.5'",
        )
        return name, alpha
    raise UserError(f"unknown partition scheme {text!r}: choose one of {', '.join(SCHEMES)}")


def partition(
    y: np.ndarray, n_nodes: int, scheme: str = "uniform", seed: int = 0
) -> list[np.ndarray]:
    """Split the J training samples over ``n_nodes`` nodes.

    Parameters
    ----------
    y : numpy.ndarray
        Training labels, shape ``(J,)`` (one per column of ``X_train``). Any
        hashable label values; ``uniform`` only uses ``len(y)``.
    n_nodes : int
        Number of nodes M, at least 1 and at most J.
    scheme : str
        One of :data:`SCHEMES` (see :func:`parse_scheme`):

        ``uniform``
            The paper's split: a seeded random permutation cut into M shards
            whose sizes differ by at most one.
        ``stratified``
            Guarantees both that, for every class, the per-node counts of that
            class differ by at most one, and that the shard sizes differ by at
            most one. (Samples are grouped by class, shuffled within each class,
            and dealt round-robin over a shuffled node order.)
        ``dirichlet:ALPHA``
            For each class, node proportions ``p ~ Dirichlet(ALPHA, ..., ALPHA)``
            and counts ``~ Multinomial(n_class, p)``. Shard sizes are not
            balanced. Every node is guaranteed at least one sample: while a node
            is empty, a random sample moves to it from the largest shard.
    seed : int
        Non-negative seed; the same seed gives the same partition everywhere.

    Returns
    -------
    list of numpy.ndarray
        M sorted int64 arrays of column indices, disjoint and covering
        ``0 .. J-1`` exactly once.

    Raises
    ------
    UserError
        ``n_nodes < 1``, ``J < n_nodes``, a bad scheme or seed.
    """
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise ValueError(f"labels must be a 1-D array, got shape {labels.shape}")
    require(
        isinstance(n_nodes, (int, np.integer)) and not isinstance(n_nodes, (bool, np.bool_)),
        f"number of nodes must be an integer, got {n_nodes!r}",
    )
    m = int(n_nodes)
    require(m >= 1, f"need at least 1 node to partition over, got {m}; run with at least one rank")
    name, alpha = parse_scheme(scheme)
    require(
        isinstance(seed, (int, np.integer))
        and not isinstance(seed, (bool, np.bool_))
        and seed >= 0,
        f"partition seed must be a non-negative integer, got {seed!r}",
    )
    j = labels.shape[0]
    require(j >= m, f"cannot split {j} samples over {m} nodes: use fewer ranks")
    rng = np.random.default_rng([int(seed), _PARTITION_TAG])

    if name == "uniform":
        shards = np.array_split(rng.permutation(j), m)
    elif name == "stratified":
        shards = _stratified(labels, m, rng)
    else:
        assert alpha is not None
        shards = _dirichlet(labels, m, alpha, rng)
    return [np.sort(s).astype(np.int64, copy=False) for s in shards]


def _class_members(labels: np.ndarray) -> list[np.ndarray]:
    """Indices of each class, classes in sorted label order."""
    _, inverse = np.unique(labels, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    return np.split(order, bounds)


def _stratified(labels: np.ndarray, m: int, rng: np.random.Generator) -> list[np.ndarray]:
    # Laying the classes end to end and dealing position k to node k mod M makes
    # each contiguous class block, and the whole sequence, spread within one.
    classes = _class_members(labels)
    sequence = np.concatenate([rng.permutation(classes[c]) for c in rng.permutation(len(classes))])
    # A random node order decides which nodes receive the leftover samples.
    node_of_slot = rng.permutation(m)
    owner = node_of_slot[np.arange(sequence.size) % m]
    return [sequence[owner == node] for node in range(m)]


def _dirichlet_proportions(alpha: float, m: int, rng: np.random.Generator) -> np.ndarray:
    # Gamma draws normalised: with a tiny alpha they can all underflow to 0, and
    # the limit of Dirichlet(alpha -> 0) is all mass on one uniformly chosen node.
    g = rng.standard_gamma(alpha, size=m)
    total = g.sum()
    if not np.isfinite(total) or total <= 0.0:
        p = np.zeros(m)
        p[rng.integers(m)] = 1.0
        return p
    return g / total


def _dirichlet(
    labels: np.ndarray, m: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    owner = np.empty(labels.shape[0], dtype=np.int64)
    for members in _class_members(labels):
        counts = rng.multinomial(members.size, _dirichlet_proportions(alpha, m, rng))
        owner[rng.permutation(members)] = np.repeat(np.arange(m), counts)
    sizes = np.bincount(owner, minlength=m)
    # Repair empty nodes. J >= M means the largest shard holds >= 2 samples
    # whenever some node is empty, so a move never empties its donor.
    for node in np.flatnonzero(sizes == 0):
        donor = int(np.argmax(sizes))
        pick = rng.choice(np.flatnonzero(owner == donor))
        owner[pick] = node
        sizes[donor] -= 1
        sizes[node] += 1
    return [np.flatnonzero(owner == node) for node in range(m)]

"""``caltech101``: LC-KSVD's spatial-pyramid features in a MATLAB ``.mat`` file (v4-v7
through scipy, v7.3 through h5py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .normalize import check_finite, make_dataset, random_split, standardize
from .records import Dataset

__all__ = ["CALTECH_MAT", "load_caltech101"]

CALTECH_MAT = "spatialpyramidfeatures4caltech101.mat"


def _h5_matrix(f: Any, key: str, path: Path) -> np.ndarray:
    """A MATLAB v7.3 variable as MATLAB sees it (HDF5 stores it transposed)."""
    import h5py

    node = f[key]
    if isinstance(node, h5py.Group):  # MATLAB sparse: its own CSC arrays (m = attr)
        from scipy.sparse import csc_matrix

        if not {"data", "ir", "jc"} <= set(node.keys()):
            raise UserError(f"{path}: variable {key} has an unsupported HDF5 layout")
        n_rows = int(node.attrs.get("MATLAB_sparse", 0))
        jc = np.asarray(node["jc"], dtype=np.int64)
        mat = csc_matrix(
            (np.asarray(node["data"]), np.asarray(node["ir"], dtype=np.int64), jc),
            shape=(n_rows, jc.size - 1),
        )
        return mat.toarray()
    return np.asarray(node).T


def _read_mat(path: Path, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Read MATLAB variables from a v4-v7 (scipy) or v7.3 (HDF5) .mat file."""
    import inspect

    import scipy.io
    import scipy.sparse
    from scipy.io.matlab import MatReadError

    # scipy >= 1.15 can return sparse variables as sparse arrays (spmatrix=False);
    # from 1.18 loadmat warns (DeprecationWarning: the default is changing to False
    # in 1.20) whenever a sparse variable is read without the argument. Either kind is
    # turned into a dense array below, so ask for the future default where it exists.
    takes_spmatrix = "spmatrix" in inspect.signature(scipy.io.loadmat).parameters
    sparse_kw = {"spmatrix": False} if takes_spmatrix else {}
    try:
        mat = scipy.io.loadmat(path, variable_names=list(keys), **sparse_kw)
    except (NotImplementedError, MatReadError, ValueError, OSError) as exc:
        mat, load_error = None, exc  # maybe a v7.3 (HDF5) file; tried below
    if mat is None:
        import h5py

        if not h5py.is_hdf5(path):
            raise UserError(f"{path}: not a readable MATLAB .mat file ({load_error})")
        with h5py.File(path, "r") as f:
            missing = [k for k in keys if k not in f]
            if missing:
                raise UserError(f"{path}: missing variable(s) {missing}")
            return {k: _h5_matrix(f, k, path) for k in keys}
    missing = [k for k in keys if k not in mat]
    if missing:
        raise UserError(f"{path}: missing variable(s) {missing}")
    return {
        k: mat[k].toarray() if scipy.sparse.issparse(mat[k]) else np.asarray(mat[k]) for k in keys
    }


def load_caltech101(
    paths: Mapping[str, Path], seed: int, options: Mapping[str, object]
) -> Dataset:
    """LC-KSVD Caltech101 features; 6000/3000 random split.

    The published file has 9144 samples (P=3000, Q=102); the paper draws
    6000 train and 3000 test samples at random (the other 144 are unused).
    A file with fewer than 9000 samples is split 2/3 train, 1/3 test instead.
    """
    path = paths[CALTECH_MAT]
    mat = _read_mat(path, ("featureMat", "labelMat"))
    feats = np.asarray(mat["featureMat"], dtype=np.float64)
    onehot = np.asarray(mat["labelMat"], dtype=np.float64)
    if feats.ndim != 2 or onehot.ndim != 2 or feats.shape[1] != onehot.shape[1]:
        raise UserError(
            f"{path}: featureMat {feats.shape} and labelMat {onehot.shape} must both be "
            "(rows x samples) with the same number of samples"
        )
    if not (np.all((onehot == 0) | (onehot == 1)) and np.all(onehot.sum(axis=0) == 1)):
        raise UserError(f"{path}: labelMat must be one-hot (one 1 per column)")
    if onehot.shape[0] < 2:
        raise UserError(f"{path}: labelMat needs at least 2 classes (rows)")
    A = feats.T
    check_finite(A, path)
    y = np.argmax(onehot, axis=0).astype(np.int64)
    n = A.shape[0]
    n_train, n_test = (6000, 3000) if n >= 9000 else ((2 * n) // 3, n - (2 * n) // 3)
    tr, te = random_split(n, n_train, seed, n_test)
    A_tr, A_te = standardize(A[tr], A[te])
    return make_dataset("caltech101", A_tr, y[tr], A_te, y[te], onehot.shape[0])

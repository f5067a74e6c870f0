"""The records a dataset is defined by (:class:`SourceFile`, :class:`DatasetSpec`) and
the one form every reader returns (:class:`Dataset`: samples as columns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Dataset", "DatasetSpec", "Loader", "SourceFile"]


@dataclass(frozen=True)
class SourceFile:
    """One published file a dataset is read from.

    Attributes
    ----------
    name : str
        The file the loader reads (its key in the loader's ``paths``).
    sha256 : str or None
        Published sha256 of the file as downloaded; None when no value is
        published (the file is then used unverified).
    urls : tuple of str
        Where to download it, official first. Mirrors are safe to try because
        every download must match ``sha256`` before it is kept. A URL ending
        in ``.zip`` is an archive holding the file.
    gzipped : bool
        Published as ``name + ".gz"`` (what is downloaded and verified); an
        unpacked ``name`` is accepted too, unverified.
    """

    name: str
    sha256: str | None
    urls: tuple[str, ...] = ()
    gzipped: bool = False

    @property
    def variants(self) -> tuple[str, ...]:
        """Names the file may have on disk, the downloaded (verifiable) one first."""
        return (self.name + ".gz", self.name) if self.gzipped else (self.name,)


#: Signature of a loader: ``(paths, seed, options) -> Dataset``, where ``paths``
#: maps each :attr:`SourceFile.name` of the dataset to the file found on disk.
Loader = Callable[[Mapping[str, Path], int, Mapping[str, object]], "Dataset"]


@dataclass(frozen=True, eq=False)
class DatasetSpec:
    """Everything known about one dataset: the one record it is defined by.

    Attributes
    ----------
    name : str
        Name accepted by :func:`load_dataset`, :func:`fetch` and ``--dataset``.
    description : str
        One line: what the data are, the split, ``P`` and ``Q``.
    loader : Loader
        Reads, checks and normalises the files into a :class:`Dataset`.
    files : tuple of SourceFile
        The files the loader needs (none for bundled or generated data).
    folders : tuple of str
        Sub-folders of the data directory searched (then the directory
        itself); :func:`fetch` writes to the first. The others are the
        folders the original archives unpack to.
    options : mapping of str to int
        Extra keyword options of :func:`load_dataset` and their defaults.
    documentation : tuple of SourceFile
        Published files that only document the data: checksummed, never
        loaded or fetched.
    """

    name: str
    description: str
    loader: Loader
    files: tuple[SourceFile, ...] = ()
    folders: tuple[str, ...] = ()
    options: Mapping[str, int] = dataclasses.field(default_factory=dict)
    documentation: tuple[SourceFile, ...] = ()


@dataclass(frozen=True, eq=False)
class Dataset:
    """A classification dataset with samples as columns.

    Attributes
    ----------
    name : str
        Dataset name (one of :data:`DATASETS`).
    X_train : numpy.ndarray
        ``float64``, shape ``(P, J_train)``; one training sample per column
        (Fortran-ordered, so each sample is contiguous).
    y_train : numpy.ndarray
        ``int64``, shape ``(J_train,)``, labels in ``0..Q-1``.
    X_test : numpy.ndarray
        ``float64``, shape ``(P, J_test)``.
    y_test : numpy.ndarray
        ``int64``, shape ``(J_test,)``.
    n_classes : int
        Number of classes ``Q``.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_classes: int

    def __post_init__(self) -> None:
        # A malformed Dataset is a bug in a loader, not a user error.
        P = self.X_train.shape[0]
        checks = [
            (self.X_train.ndim == 2 and self.X_test.ndim == 2, "X_train/X_test must be 2-D"),
            (self.X_test.shape[0] == P, "X_train and X_test differ in feature count"),
            (self.y_train.shape == (self.X_train.shape[1],), "y_train does not match X_train"),
            (self.y_test.shape == (self.X_test.shape[1],), "y_test does not match X_test"),
            (
                self.X_train.dtype == np.float64 and self.X_test.dtype == np.float64,
                "features must be float64",
            ),
            (
                self.y_train.dtype == np.int64 and self.y_test.dtype == np.int64,
                "labels must be int64",
            ),
            (self.n_classes >= 2, "n_classes must be >= 2"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(f"Dataset {self.name!r}: {msg}")
        for y in (self.y_train, self.y_test):
            if y.size and (y.min() < 0 or y.max() >= self.n_classes):
                raise ValueError(f"Dataset {self.name!r}: labels outside 0..{self.n_classes - 1}")

    @property
    def n_features(self) -> int:
        """Number of features ``P`` (rows of ``X_train``)."""
        return int(self.X_train.shape[0])

    @property
    def n_train(self) -> int:
        """Number of training samples ``J_train``."""
        return int(self.X_train.shape[1])

    @property
    def n_test(self) -> int:
        """Number of test samples ``J_test``."""
        return int(self.X_test.shape[1])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, P={self.n_features}, Q={self.n_classes}, "
            f"n_train={self.n_train}, n_test={self.n_test})"
        )

"""Loading a dataset: find its files, verify them, read them with its reader."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import UserError
from .locate import find_data_dir, locate
from .records import Dataset
from .registry import get_spec
from .verify import verify_file

__all__ = ["load_dataset"]


def load_dataset(
    name: str,
    data_dir: str | os.PathLike | None = None,
    seed: int = 0,
    **options: object,
) -> Dataset:
    """Load, check and normalise one dataset.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    data_dir : str or path-like, optional
        Where the files are (see :func:`find_data_dir`); unused by
        ``digits`` and ``synthetic``.
    seed : int, default 0
        Non-negative seed of the random split (``digits``, ``letter``,
        ``caltech101``) or of the generator (``synthetic``); ignored by the
        datasets with a fixed split.
    **options
        ``verify`` (bool, default True): check each file's sha256 against
        :data:`CHECKSUMS`; ``verify=False`` is the only way to skip it.
        The dataset's own options (:attr:`DatasetSpec.options`): ``synthetic``
        takes ``n_features`` (20), ``n_classes`` (5), ``n_train`` (2000) and
        ``n_test`` (500).

    Returns
    -------
    Dataset
        Samples as columns, normalised as described in the module docstring.

    Raises
    ------
    UserError
        Unknown name or option, missing file, checksum mismatch, or a file
        that is truncated, malformed or holds NaN/inf.
    """
    spec = get_spec(name)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    allowed = {"verify", *spec.options}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise UserError(
            f"{spec.name}: unknown option(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(allowed))}"
        )
    verify = options.pop("verify", True)
    if not isinstance(verify, (bool, np.bool_)):
        raise UserError(f"verify must be True or False, got {verify!r}")

    paths: dict[str, Path] = {}
    if spec.files:
        root = find_data_dir(data_dir)
        # Locate every file first, so all missing-file errors come before any parsing.
        paths = {f.name: locate(spec, f, root) for f in spec.files}
        if verify:
            for path in paths.values():
                verify_file(spec.name, path)
    return spec.loader(paths, int(seed), {**spec.options, **options})

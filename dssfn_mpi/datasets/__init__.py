"""Public datasets in their original formats, checksummed and normalised.

Every loader returns a :class:`Dataset` whose matrices follow the paper:
samples are **columns**, so ``X_train`` is ``P x J_train``. Labels are
``int64`` in ``0..Q-1``.

Normalisation (done here, so every engine sees the same numbers)
---------------------------------------------------------------
* Pixel data -- ``digits`` (/16), ``mnist`` (/255), ``norb`` (/255 after a
  3x3 block average) -- is scaled to ``[0, 1]``.
* Every other dataset is z-scored per feature with the **training** mean and
  (population) standard deviation; the test set uses the same statistics, so
  its mean is close to, but not exactly, 0. A feature that is constant on the
  training set is divided by 1, not 0.

Splits
------
* Fixed published splits: ``vowel`` 528/462, ``satimage`` 4435/2000,
  ``mnist`` 60000/10000, ``norb`` 24300/24300.
* Random splits drawn with ``numpy.random.default_rng(seed).permutation(n)``
  (the first ``n_train`` indices train, the rest test, each kept in file
  order): ``digits`` 1200/597, ``letter`` 13333/6667, ``caltech101``
  6000/3000. The same ``seed`` gives the same split everywhere.

Files
-----
Files live in ``<data_dir>/<dataset>/`` (where ``dssfn-mpi data fetch`` puts them) or directly
in ``<data_dir>``; :func:`find_data_dir` says where ``data_dir`` comes from.
Each dataset is one :class:`DatasetSpec` record in :data:`REGISTRY` (its
files, their published sha256 and download addresses, its loader and
options); :data:`DATASETS`, :data:`CHECKSUMS` and :data:`URLS` are derived
from it. Each file with a published sha256 is verified before it is parsed,
unless ``verify=False`` is passed explicitly.

The package, by job: :mod:`.records` (the records: :class:`SourceFile`,
:class:`DatasetSpec`, :class:`Dataset`), one reader per format (:mod:`.bundled`,
:mod:`.synthetic`, :mod:`.text`, :mod:`.idx`, :mod:`.norb`, :mod:`.matlab`, sharing
:mod:`.normalize`), :mod:`.registry` (one record per dataset), :mod:`.locate` (the
data folder and the files in it), :mod:`.verify` (checksums), :mod:`.download`
(:func:`fetch`), :mod:`.load` (:func:`load_dataset`) and :mod:`.command` (what
``dssfn-mpi data`` prints).
"""

from __future__ import annotations

from .download import Progress, fetch
from .load import load_dataset
from .locate import default_data_dir, find_data_dir
from .records import Dataset, DatasetSpec, SourceFile
from .registry import CHECKSUMS, DATASETS, REGISTRY, URLS
from .verify import FileCheck, check_files

__all__ = [
    "CHECKSUMS",
    "DATASETS",
    "REGISTRY",
    "URLS",
    "Dataset",
    "DatasetSpec",
    "FileCheck",
    "Progress",
    "SourceFile",
    "check_files",
    "fetch",
    "find_data_dir",
    "load_dataset",
    "default_data_dir",
]

"""The registry: one :class:`~.records.DatasetSpec` per dataset (its files, their
published sha256 and download addresses, its reader and options), and the indexes
by file name derived from it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..errors import UserError
from .bundled import load_digits
from .idx import load_mnist
from .matlab import CALTECH_MAT, load_caltech101
from .norb import TEST_CAT, TEST_DAT, TRAIN_CAT, TRAIN_DAT, load_norb
from .records import DatasetSpec, SourceFile
from .synthetic import load_synthetic
from .text import load_letter, load_satimage, load_vowel

__all__ = ["CHECKSUMS", "DATASETS", "REGISTRY", "URLS", "get_spec"]

_ESL = "https://web.stanford.edu/~hastie/ElemStatLearn/datasets/"
_ESL_NEW = "https://hastie.su.domains/ElemStatLearn/datasets/"  # same site, new domain
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases/"
_LECUN = "http://yann.lecun.com/exdb/mnist/"
_MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"  # torchvision's mirror
_NORB = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"
_LCKSVD = "http://www.umiacs.umd.edu/~zhuolin/LCKSVD/features/"


def _mnist_file(name: str, sha256: str) -> SourceFile:
    return SourceFile(name, sha256, (_LECUN + name, _MNIST_MIRROR + name))


def _norb_file(name: str, sha256_gz: str) -> SourceFile:
    # The sha256 values of the .mat.gz files are the ones TensorFlow Datasets
    # publishes for the NYU URLs (tensorflow_datasets/url_checksums/smallnorb.txt).
    return SourceFile(name, sha256_gz, (_NORB + name + ".gz",), gzipped=True)


_SPECS = (
    DatasetSpec(
        "digits",
        "scikit-learn's bundled 8x8 digits; 1200/597 random split, P=64, Q=10",
        load_digits,
    ),
    DatasetSpec(
        "synthetic",
        "seeded Gaussian-mixture classes with a nonlinear warp; sizes are options",
        load_synthetic,
        options={"n_features": 20, "n_classes": 5, "n_train": 2000, "n_test": 500},
    ),
    DatasetSpec(
        "vowel",
        "Deterding vowel data, ESL version; 528/462 fixed split, P=10, Q=11",
        load_vowel,
        files=tuple(
            SourceFile(name, sha256, (_ESL + name, _ESL_NEW + name))
            for name, sha256 in (
                ("vowel.train", "6285d72a3ec5af71286e6e0a778b836c229e3c41d6e0c2076294ee671e3ed9fb"),
                ("vowel.test", "94720047d8e1d1f485b882347ad20b9b62fd04b080c855e23a10a4804e886f1b"),
            )
        ),
        folders=("vowel",),
    ),
    DatasetSpec(
        "satimage",
        "UCI Statlog (Landsat Satellite); 4435/2000 fixed split, P=36, Q=6",
        load_satimage,
        files=(
            SourceFile(
                "sat.trn",
                "e896dc88a960fa2404160fc4c3cb3dc53fcf4afd80ba920bf2d261bd42d12613",
                (_UCI + "statlog/satimage/sat.trn",),
            ),
            SourceFile(
                "sat.tst",
                "4b9167b8a92baafafed7c8809aef86d0683a5e685c19d98d119fa6974f0f2479",
                (_UCI + "statlog/satimage/sat.tst",),
            ),
        ),
        folders=("satimage",),
    ),
    DatasetSpec(
        "letter",
        "UCI Letter Recognition; 13333/6667 random split, P=16, Q=26",
        load_letter,
        files=(
            SourceFile(
                "letter-recognition.data",
                "2b89f3602cf768d3c8355267d2f13f2417809e101fc2b5ceee10db19a60de6e2",
                (_UCI + "letter-recognition/letter-recognition.data",),
            ),
        ),
        folders=("letter",),
        # Its value is that of the team's copy, not a published one.
        documentation=(
            SourceFile(
                "letter-recognition.names",
                "128b85adc32bd58a93ed6e1df136b1d7c636f85f290ba3db655ccaa19c86d324",
            ),
        ),
    ),
    DatasetSpec(
        "mnist",
        "MNIST handwritten digits (the four official IDX files); 60000/10000 fixed split, "
        "P=784, Q=10",
        load_mnist,
        files=(
            _mnist_file(
                "train-images-idx3-ubyte.gz",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            _mnist_file(
                "train-labels-idx1-ubyte.gz",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            ),
            _mnist_file(
                "t10k-images-idx3-ubyte.gz",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            ),
            _mnist_file(
                "t10k-labels-idx1-ubyte.gz",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
        ),
        folders=("mnist",),
    ),
    DatasetSpec(
        "norb",
        "small NORB, stereo pairs 2x96x96 averaged to 2x32x32; 24300/24300 fixed split, "
        "P=2048, Q=5",
        load_norb,
        files=(
            _norb_file(
                TRAIN_DAT, "5ffd6272a07d32695ee1082a26a41a93a37aab8c28da047f8c34ed348d214873"
            ),
            _norb_file(
                TRAIN_CAT, "2784e542c1922060691090952b6cd6278879a216c90f81476f0f00256d42cdaa"
            ),
            _norb_file(
                TEST_DAT, "cf7104eed3e51174d2f65b66d1e5878b9da233b886f161b0d88f4510ba2c7474"
            ),
            _norb_file(
                TEST_CAT, "ecaf6d5bb8c3bc5eab9cf0258f6d2198dd474e016e374836fc097f2e5ff509ff"
            ),
        ),
        folders=("norb", "smallnorb"),
    ),
    DatasetSpec(
        "caltech101",
        "Caltech101 spatial-pyramid features of LC-KSVD (Jiang et al., CVPR 2011); "
        "6000/3000 random split, P=3000, Q=102",
        load_caltech101,
        # No published checksum was found: the file is used unverified. The URL
        # is a zip holding spatialpyramidfeatures4caltech101/<the .mat>.
        files=(
            SourceFile(
                CALTECH_MAT, None, (_LCKSVD + "spatialpyramidfeatures4caltech101.zip",)
            ),
        ),
        folders=("caltech101", "spatialpyramidfeatures4caltech101"),
    ),
)

#: Every dataset, by name, in the order they are listed to users.
REGISTRY: Mapping[str, DatasetSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})

#: The dataset names.
DATASETS: tuple[str, ...] = tuple(REGISTRY)


def _checksum_index() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for spec in REGISTRY.values():
        for file in (*spec.files, *spec.documentation):
            out[file.variants[0]] = file.sha256
            for unpacked in file.variants[1:]:
                out[unpacked] = None  # no value is published for an unpacked copy
    return out


# Indexes by file name, derived from REGISTRY. Verification and downloads look
# files up here, so a test (or a site with a local mirror) can patch one entry.

#: sha256 of every known file name on disk; None = none published, not verified.
CHECKSUMS: dict[str, str | None] = _checksum_index()

#: Download URLs of every file :func:`fetch` downloads, official first.
URLS: dict[str, tuple[str, ...]] = {
    f.variants[0]: f.urls for spec in REGISTRY.values() for f in spec.files
}


def get_spec(name: str) -> DatasetSpec:
    """The record of dataset ``name`` (any case, spaces around ignored); UserError if unknown."""
    key = str(name).strip().lower()
    if key not in REGISTRY:
        raise UserError(f"unknown dataset {name!r}; valid names: {', '.join(DATASETS)}")
    return REGISTRY[key]

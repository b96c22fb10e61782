"""The examples' data: the 1797 8x8 images of handwritten digits that scikit-learn bundles
(``examples/data/digits.csv.gz``, its file as it ships; see examples/data/README.md), read
with NumPy alone: scikit-learn is no longer needed, and Keras, which imports it wherever it
is installed, starts about 2 s of a core sooner in every worker."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Tuple

import numpy as np

#: 64 pixels (0..16) and the digit, comma-separated, one image a line
DATA = Path(__file__).resolve().parent / "data" / "digits.csv.gz"
TEST_SHARE = 0.2


def load_digits() -> Tuple[np.ndarray, np.ndarray]:
    """Returns (pixels, digits): 1797 rows of 64 pixels scaled to [0, 1] as float32, and the
    digits 0-9 as int32. Raises OSError where the file is missing."""
    table = np.loadtxt(DATA, delimiter=",", dtype=np.int32)
    return (table[:, :-1] / 16.0).astype(np.float32), table[:, -1]


def stratified_split(y: np.ndarray, test_share: float, seed: int
                     ) -> Tuple[np.ndarray, np.ndarray]:
    """Returns (train, test): indices of ``y``, shuffled by ``seed``; the test set has
    ceil(test_share x rows) rows and each digit in its share of them (the largest
    remainders rounded up)."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    n_test = math.ceil(test_share * len(y))
    exact = counts * n_test / len(y)
    take = np.floor(exact).astype(int)
    take[np.argsort(take - exact, kind="stable")[:n_test - int(take.sum())]] += 1
    test = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:k]
                           for c, k in zip(classes, take, strict=True)])
    train = np.setdiff1d(np.arange(len(y)), test)
    return rng.permutation(train), rng.permutation(test)


def load_data(seed: int):
    """Returns (x_train, y_train, x_test, y_test): the digits, a 20 % test split.

    The split is the same on every worker (a fixed seed), so the shards of the training set
    partition one training set and the test set is held out on all of them.
    """
    x, y = load_digits()
    train, test = stratified_split(y, TEST_SHARE, seed)
    return x[train], y[train], x[test], y[test]

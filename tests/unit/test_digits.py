"""examples/digits.py: the examples' data read without scikit-learn (the file it ships, read
with NumPy), and the stratified split every worker makes alike."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.unit

_spec = importlib.util.spec_from_file_location(
    "digits", Path(__file__).resolve().parents[2] / "examples" / "digits.py")
digits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digits)

#: how many images of each digit the data set has (scikit-learn's description)
PER_DIGIT = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def test_the_data_set_as_scikit_learn_gives_it():
    x, y = digits.load_digits()
    assert x.shape == (1797, 64) and x.dtype == np.float32 and y.dtype == np.int32
    assert x.min() == 0.0 and x.max() == 1.0
    assert np.bincount(y).tolist() == PER_DIGIT
    assert (x * 16 == np.round(x * 16)).all(), "pixels are 0..16, scaled by 16"
    assert np.allclose(x[0, :8] * 16, [0, 0, 5, 13, 9, 1, 0, 0]) and y[0] == 0 and y[-1] == 8


@pytest.mark.parametrize("y, share, test_counts", [
    pytest.param([0] * 3 + [1] * 3 + [2] * 4, 0.25, [1, 1, 1],
                 id="ceil(2.5) = 3 rows: the largest remainders (0.9, 0.9) rounded up"),
    pytest.param([0] * 3 + [1] * 1, 0.5, [2, 0],
                 id="a tie of remainders goes to the first digit"),
    pytest.param([0] * 5 + [1] * 5, 0.2, [1, 1], id="whole shares: no rounding"),
    pytest.param([0] * 5 + [1] * 5, 0.21, [2, 1], id="ceil(2.1) = 3: one more"),
    pytest.param([0] * 4, 0.0, [0], id="no test set"),
])
def test_the_test_set_takes_each_digit_s_share(y, share, test_counts):
    y = np.array(y)
    train, test = digits.stratified_split(y, share, seed=7)
    assert np.bincount(y[test], minlength=len(test_counts)).tolist() == test_counts
    assert sorted([*train, *test]) == list(range(len(y))), "disjoint, and every row"


def test_the_split_is_20_percent_seeded_and_shuffled():
    x_train, y_train, x_test, y_test = digits.load_data(1234)
    assert (len(x_train), len(x_test)) == (1437, 360) and len(y_train) == 1437
    assert np.bincount(y_test).tolist() == [36, 37, 35, 37, 36, 36, 36, 36, 35, 36]
    again = digits.load_data(1234)
    first = (x_train, y_train, x_test, y_test)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    other = digits.load_data(1235)
    assert not np.array_equal(y_test, other[3]), "another seed, another split"
    assert not (np.diff(y_train) >= 0).all(), "shuffled, not in the file's order"
    rows = {r.tobytes() for r in digits.load_digits()[0]}
    assert {r.tobytes() for r in x_train} | {r.tobytes() for r in x_test} <= rows

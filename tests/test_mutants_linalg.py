"""Tests written to kill surviving mutants (issue #21) of ``functions/linalg.py``, ``loss.py``,
``reduction.py`` and ``shape.py``: behaviour the rest of the suite did not pin down.

Each test asserts real behaviour with expected values computed independently (numpy written
out by hand, finite differences in float64, worked examples); none copies its expected value
from the code under test. Which mutant each test kills is listed in ``tests/README.md``
("Mutation testing").
"""
from __future__ import annotations

import numpy as np
import pytest

import microtorch as mt
import microtorch.functions as F


def T(a, requires_grad=False):
    return mt.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# -- shape.py -----------------------------------------------------------------------------------
def test_broadcast_to_names_itself_in_a_size_error():
    x = T([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^broadcast_to\(\): argument 'size' must be tuple of ints"):
        F.broadcast_to(x, (2, 2.5))

"""microtorch.node: saved tensors and the node's life cycle, pinned where mutation testing
(`make mutate`, tests/README.md) found behaviour no other test fixed."""
import numpy as np
import pytest

import microtorch as mt

# PyTorch's message, word for word (torch/csrc/autograd/saved_variable.cpp)
FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
         "after they have already been freed). Saved intermediate values of the graph are freed "
         "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
         "backward through the graph a second time or if you need to access saved tensors after "
         "calling backward.")


def leaf(values):
    return mt.tensor(values, dtype=mt.float64, requires_grad=True)


def test_saved_tensors_read_after_backward_raise_pytorchs_message():
    x = leaf([1.0, 2.0])
    y = (x * x).exp()
    y.sum().backward()
    with pytest.raises(RuntimeError) as e:
        y.grad_fn.saved_tensors
    assert str(e.value) == FREED
    with pytest.raises(RuntimeError) as e:
        y.grad_fn.saved_arrays()
    assert str(e.value) == FREED

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


def _releases_of_this_traces_nodes(tr):
    """Release events of the nodes this trace's ops made (not of older graphs that the cycle
    collector happens to free while it records)."""
    mine = {e["node"] for e in tr.events if e["kind"] == "op" and e.get("node") is not None}
    return [e for e in tr.events if e["kind"] == "release" and e["node"] in mine]


def test_release_events_tell_backward_from_a_dropped_graph(no_cycle_collector):
    x = leaf([1.0, 2.0])
    with mt.trace() as tr:
        loss = (x.exp() * x).sum()
        loss.backward()  # every node runs, then lets go of its saved tensors
    ran = _releases_of_this_traces_nodes(tr)
    assert ran and all(e["dropped"] is False for e in ran)
    assert {e["node"] for e in ran} == {e["node"] for e in tr.events if e["kind"] == "node_run"}
    with mt.trace() as tr:
        loss = (x.exp() * x).sum()
        del loss  # never run: the graph is dropped
    dropped = _releases_of_this_traces_nodes(tr)
    assert len(dropped) == 3 and all(e["dropped"] is True for e in dropped)


def test_results_without_a_graph_say_requires_grad_false_as_a_bool():
    x = leaf([1.0, 2.0])
    for out in (mt.ones(2) * 2, mt.ones(2).exp(), x.detach() + 1):
        assert out.requires_grad is False and out.grad_fn is None
    with mt.no_grad():
        out = x * 2
    assert out.requires_grad is False and out.grad_fn is None
    assert (x * 2).requires_grad is True


@pytest.mark.parametrize("key", [(slice(None), slice(1, 1)), slice(1, 1), (0, slice(3, 3))])
def test_an_empty_view_still_shares_its_base_storage(key):
    x = mt.arange(6.0).reshape(2, 3)
    v = x[key]
    assert v.numel() == 0 and v.storage is x.storage  # a view like any other (PyTorch: v._base is x)
    y = leaf(np.ones((2, 3)))
    e = y[key]
    assert e.storage is y.storage and e.requires_grad

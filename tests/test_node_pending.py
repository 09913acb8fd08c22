"""Point 4 of issue 14: the graph is the node objects (``node.next``, ``node.pending``); a
node's record in the node arena is a mirror written once when the node is made."""
from __future__ import annotations

import numpy as np

import microtorch as mt
from microtorch.autograd import _dependencies, _roots
from microtorch.memory.node_arena import LEAF, NO_GRAD, OPS, RECORD


def test_pending_counts_every_edge_of_a_node_with_more_than_four_inputs():
    x = mt.randn(2, requires_grad=True, dtype=mt.float64)
    h = x.exp()
    parts = [h, h * 2, h, mt.ones(2, dtype=mt.float64), h, h]  # h enters cat four times, plus Mul
    y = mt.cat(parts).sum()
    cat = y.grad_fn.next[0]
    assert len(cat.next) == 6 and cat.next[3] is None
    _dependencies(_roots(y, None))
    assert h.grad_fn.pending == 5  # four edges from Cat, one from Mul: beyond the record's four inputs
    assert cat.pending == 1 and y.grad_fn.pending == 0
    y.backward()
    assert np.allclose(x.grad.numpy(), 6 * np.exp(x.detach().numpy()))  # 1 + 2 + 1 + 1 + 1 per element


def test_the_record_mirrors_the_node_it_was_made_for():
    assert "pending" not in RECORD.names  # one source of truth: the count lives on the node
    x = mt.randn(3, requires_grad=True)
    c = mt.randn(3)
    h = x * c
    y = mt.cat([h, h, x, c, h]).sum()
    cat = y.grad_fn.next[0]
    r = cat.record
    assert OPS[r["op"]] == "Cat" and r["n_inputs"] == 5 and r["slot"] == cat.slot
    assert list(r["inputs"]) == [h.grad_fn.slot, h.grad_fn.slot, LEAF, NO_GRAD]  # the first four
    assert r["n_saved"] == len(cat.saved)
    y.backward()
    assert cat.record is None and cat.slot is None  # released with its node

"""Fifth mutation run: tests for mutants the fourth run left open (tests/mutation-run-5/open-four.md)."""
from microtorch.memory.aliasing import Layout, alias

K = 30_000  # a view with strides (K+1, K, 1) and one element at E = n + K*(n+2): the solver
# walks the first index up from 1; the remainder is reachable by (K, 1) only once the first
# index is n - 1, so deciding takes exactly n - 1 candidates (worked by hand: residues mod K).


def _pair(n):
    size = 10 ** 12  # Layouts only: no memory is allocated
    return (Layout(0, 0, (n + 2, n + 3, 2), (K + 1, K, 1), 1, size),
            Layout(0, n + K * (n + 2), (1,), (1,), 1, size))


def test_alias_default_work_budget_is_20000_candidates():
    # the docstring's "max_work candidate values, default 20,000": 20,000 candidates are
    # allowed, the 20,001st gives up (enumeration here is past max_enumerate: "may")
    for n, work in ((20_000, 19_999), (20_001, 20_000), (20_002, 20_001)):
        r = alias(*_pair(n), max_work=10 ** 6)
        assert (r.answer, r.method, r.work) == ("must", "solver", work)
        a, b = _pair(n)
        assert a.offset + sum(i * s for i, s in zip(r.witness[0], a.strides)) == b.offset
    ok = alias(*_pair(20_001))
    assert (ok.answer, ok.method, ok.work) == ("must", "solver", 20_000)
    over = alias(*_pair(20_002))
    assert (over.answer, over.method, over.work) == ("may", "budget", 20_000)
    assert "max_work=20000" in over.reason


def test_a_full_sum_backward_expands_the_0d_gradient_without_a_reshape():
    import numpy as np
    import microtorch as mt
    x = mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    loss = x.sum()
    with mt.trace() as tr:
        loss.backward(create_graph=True)
    ops = [e["op"] for e in tr.filter("op")]
    assert "Reshape" not in ops
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 3)))

"""The sparse pictures, tested on their data (headless)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

import microtorch as mt
from microtorch.viz import sparse as vs


def _matrix():
    # (2, 3) stored twice: uncoalesced; row 3 empty
    return mt.sparse_coo_tensor([[0, 2, 1, 2, 0], [1, 3, 0, 3, 4]], [3., 4., 5., 1., 2.], (4, 5))


def test_layout_facts_match_the_tensor_and_torch_free_reference():
    f = vs.layout_facts(_matrix())
    want = np.zeros((4, 5))
    want[0, 1], want[2, 3], want[1, 0], want[0, 4] = 3, 5, 5, 2
    np.testing.assert_array_equal(f.dense, want)
    assert f.counts[2, 3] == 2 and f.counts.sum() == 5 and not f.coalesced
    assert f.crow.tolist() == [0, 2, 3, 4, 4] and f.csr_cols.tolist() == [1, 4, 0, 3]
    assert f.row_spans == [(0, 0, 2), (1, 2, 3), (2, 3, 4)]  # row 3 is empty: no bracket


def test_layout_picture_draws_every_cell_array_and_bracket():
    fig = vs.render_layout(_matrix())
    dense_ax, coo_ax, csr_ax = fig.axes
    stored = [p for p in dense_ax.patches if p.get_hatch() or p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert len(dense_ax.patches) == 20 and len(stored) == 4
    assert any(p.get_hatch() == "////" for p in dense_ax.patches), "the duplicated position is hatched"
    assert len(coo_ax.patches) == 3 * 5 and len(csr_ax.patches) == 5 + 2 * 4
    brackets = [ln for ln in csr_ax.lines if (ln.get_gid() or "").startswith("row-bracket")]
    assert [b.get_gid() for b in brackets] == ["row-bracket-0", "row-bracket-1", "row-bracket-2"]
    x = brackets[0].get_xdata()
    assert x[0] == pytest.approx(0.06) and x[-1] == pytest.approx(1.94)
    assert "uncoalesced" in fig.description and "crow_indices = [0, 2, 3, 4, 4]" in fig.description
    assert fig.axes[0].get_title() and fig.axes[0].get_xlabel() == "column"
    assert "<svg" in fig.svg()


def test_layout_of_csr_and_refusals():
    f = vs.layout_facts(_matrix().to_sparse_csr())
    assert f.coalesced and f.counts.max() == 1
    with pytest.raises(TypeError, match="2-d sparse"):
        vs.layout_facts(mt.ones(2, 2))
    emb = mt.nn.Embedding(5, 2, sparse=True)
    emb(mt.tensor([1])).sum().backward()
    with pytest.raises(TypeError, match="render_rows"):
        vs.layout_facts(emb.weight.grad)


def _log():
    emb = mt.nn.Embedding(50, 2, sparse=True)
    emb.weight.name = "table"
    batches = [[1, 2, 2], [3], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], [0]]
    with mt.sparse.gradient_options(densify_threshold=0.2, coalesce_limit=1000), mt.sparse.record() as log:
        for b in batches:
            emb(mt.tensor(b)).sum().backward()
    return log, batches


def test_rows_picture_marks_exactly_the_rows_each_call_touched():
    log, batches = _log()
    fig = vs.render_rows(log)
    offsets = fig.axes[0].collections[0].get_offsets()
    want = [(k, r) for k, b in enumerate(batches) for r in sorted(set(b))]
    assert sorted(map(tuple, offsets.tolist())) == sorted(want)
    assert fig.facts.rows[0] == [1, 2] and fig.facts.num_rows == 50
    assert "18 distinct row(s) were touched (36.0%)" in fig.description
    assert fig.axes[0].get_xlabel() == "backward call"


def test_density_picture_follows_accumulation_and_draws_the_threshold():
    log, _ = _log()
    fig = vs.render_density(log)
    f = fig.facts
    assert f.actions == ["new", "merge", "densify", "into dense"]
    np.testing.assert_allclose(f.density, [2 / 50, 3 / 50, 17 / 50, 18 / 50])
    ax = fig.axes[0]
    line = next(ln for ln in ax.lines if ln.get_gid() == "density")
    np.testing.assert_allclose(line.get_ydata(), f.density)
    threshold = next(ln for ln in ax.lines if ln.get_gid() == "threshold")
    assert threshold.get_ydata()[0] == pytest.approx(0.2)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "densify" in labels and "threshold 20%" in labels
    assert "became dense at call 2" in fig.description


def test_empty_log_is_explained():
    with mt.sparse.record() as log:
        pass
    with pytest.raises(ValueError, match="empty"):
        vs.render_rows(log)


def test_the_pool_picture_shows_sparse_gradient_buffers_reused_across_steps():
    emb = mt.nn.Embedding(2000, 8, sparse=True)
    opt = mt.optim.SGD(emb.parameters(), lr=0.1)
    ids = mt.tensor(np.arange(100) * 13 % 2000)

    def step():
        opt.zero_grad()
        emb(ids).sum().backward()
        opt.step()

    step()
    with mt.trace() as tr:
        step()
        step()
    facts = mt.viz.pool.pool_facts(tr, None, pools=["sparse grad pool"])
    (pool,) = facts.pools
    by_size = {row.size: row for row in pool.rows}
    values_class = mt.sparse.gradient_pool().classes[mt.sparse.gradient_pool().size_class(100 * 8 * 4)]
    assert by_size[values_class].in_use >= 1  # this step's values buffer, in the class freed last step
    reused = [e for e in tr.filter("alloc_block") if e["allocator"] == "sparse grad pool"]
    assert len(reused) == 4 and all(e["reused"] for e in reused)  # indices + values, two steps
    text = mt.viz.pool.describe(tr, None, pools=["sparse grad pool"])
    assert "sparse grad pool" in text

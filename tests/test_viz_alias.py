"""The alias picture, checked element by element against numpy: a cell is highlighted
exactly when that element's bytes are also bytes of the other view (np.shares_memory on
the one-element view), and the title carries mt.memory.alias's verdict."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("matplotlib")

import microtorch as mt  # noqa: E402
from microtorch.viz import alias as alias_panel  # noqa: E402


def truth(a_np: np.ndarray, b_np: np.ndarray) -> np.ndarray:
    """For each element of ``a_np``: does its byte range intersect any element of ``b_np``?"""
    out = np.zeros(a_np.shape, dtype=bool)
    for idx in np.ndindex(*a_np.shape):
        one = a_np[tuple(slice(i, i + 1) for i in idx)]  # a one-element *view* (not a copy)
        out[idx] = np.shares_memory(one, b_np, max_work=None)
    return out


def highlighted_cells(fig, row: int) -> set[int]:
    """Element addresses drawn highlighted in view ``row``'s row (1-D form) or grid."""
    coll = next(c for ax in fig.axes for c in ax.collections if c.get_gid() == f"alias-shared-{row}")
    f = fig.facts
    out = set()
    for path in coll.get_paths():
        x0, y0 = path.vertices.min(axis=0)
        out.add(int(round(x0)) if f.grid is None else int(round(y0)) * f.grid[1] + int(round(x0)))
    return out


def check(a, b, a_np, b_np, **kw):
    fig = alias_panel.render(a, b, **kw)
    f = fig.facts
    for row, (v, x_np, y_np) in enumerate(((f.views[0], a_np, b_np), (f.views[1], b_np, a_np))):
        want = truth(x_np, y_np)
        assert (v.shared == want).all(), (v.name, v.shared, want)
        # the picture: the highlighted cells are the addresses of exactly those elements
        assert highlighted_cells(fig, row) == {int(v.addresses[idx]) for idx in zip(*np.nonzero(want))}
    report = mt.memory.alias(a, b, exact=kw.get("exact", True))
    assert f.verdict == report.answer
    assert report.answer.upper() in fig._suptitle.get_text()
    return fig


BASE = np.arange(24, dtype=np.float32).reshape(4, 6)

CASES = {
    "even and odd columns": (lambda x: x[:, ::2], lambda x: x[:, 1::2]),
    "columns and rows": (lambda x: x[:, ::2], lambda x: x[1:3]),
    "a matrix and its transpose": (lambda x: x, lambda x: x.T),
    "reversed rows": (lambda x: x[:, ::-1], lambda x: x[2:, :3]),
    "overlapping slices": (lambda x: x[0:2], lambda x: x[1:4, 2:]),
    "disjoint slices": (lambda x: x[0:2], lambda x: x[2:4]),
    "one element": (lambda x: x[1:2, 3:4], lambda x: x[:, 3]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_highlighted_cells_equal_numpys_truth(name):
    fa, fb = CASES[name]
    x = mt.tensor(BASE)
    a, b = fa(x), fb(x)
    a_np, b_np = fa(BASE), fb(BASE)
    assert a.stride() == tuple(s // 4 for s in a_np.strides)  # the same layouts in both
    check(a, b, a_np, b_np)
    check(a, b, a_np, b_np, grid=None)  # the 1-D form too


def test_windows_from_as_strided():
    y = mt.arange(16.)
    y_np = np.arange(16, dtype=np.float32)
    a = mt.as_strided(y, (3, 4), (3, 1), 1)  # overlapping windows
    b = y[10:]
    from numpy.lib.stride_tricks import as_strided
    a_np = as_strided(y_np[1:], (3, 4), (12, 4))
    fig = check(a, b, a_np, y_np[10:])
    assert fig.facts.grid is None  # windows of a vector: the 1-D form


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_random_strided_views_match_numpy(data):
    """View descriptions (storage, offset, shape, strides) work as well as tensors."""
    size = 30
    base = np.arange(size, dtype=np.float32)

    def view():
        ndim = data.draw(st.integers(1, 2))
        shape = tuple(data.draw(st.integers(1, 4)) for _ in range(ndim))
        strides = tuple(data.draw(st.integers(-5, 5)) for _ in range(ndim))
        lo = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        offset = data.draw(st.integers(-lo, size - 1 - hi)) if -lo <= size - 1 - hi else None
        if offset is None:
            return None
        desc = {"storage": 1, "offset": offset, "shape": shape, "strides": strides, "itemsize": 4,
                "storage_size": size}
        arr = np.lib.stride_tricks.as_strided(base[offset:], shape, [s * 4 for s in strides]) \
            if all(s >= 0 for s in strides) else None
        if arr is None:  # negative strides: start from the lowest address and flip
            start = np.lib.stride_tricks.as_strided(base[offset + lo:], shape, [abs(s) * 4 for s in strides])
            arr = start[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in strides)]
        return desc, arr

    va, vb = view(), view()
    if va is None or vb is None:
        return
    (da, a_np), (db, b_np) = va, vb
    fig = alias_panel.render(da, db, grid=None)
    f = fig.facts
    assert (f.views[0].shared == truth(a_np, b_np)).all()
    assert (f.views[1].shared == truth(b_np, a_np)).all()
    assert highlighted_cells(fig, 0) == f.views[0].highlighted
    assert f.verdict == ("must" if np.shares_memory(a_np, b_np, max_work=None) else "no")


def test_may_verdict_with_exact_false_and_the_truth_below_it():
    x = mt.tensor(BASE)
    fig = check(x[:, ::2], x[:, 1::2], BASE[:, ::2], BASE[:, 1::2], exact=False)
    assert fig.facts.verdict == "may" and not fig.facts.shared
    assert "exact=False" in fig.description and "exact=True would say no" in fig.description


def test_extents_brackets_text_grid_and_three_views():
    y = mt.arange(16.)
    a, b, c = y[::3], y[2:10], y[9:]
    a.name, b.name, c.name = "every third", "middle", "tail"
    fig = alias_panel.render(a, b, c)
    f = fig.facts
    assert [v.name for v in f.views] == ["every third", "middle", "tail"]
    assert len(f.pairs) == 3 and f.verdict == "must"
    assert f.views[1].extent == (2, 9) and f.views[1].layout.byte_extent() == (8, 40)
    assert "extent: bytes [8, 40)" in [t.get_text().splitlines()[-1] for t in fig.axes[0].get_yticklabels()]
    text = alias_panel.describe(a, b, c)
    assert text == fig.description and "every third vs middle: must" in text
    assert sorted(f.shared) == [3, 6, 9, 12, 15]
    x = mt.tensor(BASE)
    g = alias_panel.render(x[:, ::2], x[1:3]).facts
    assert g.grid == (4, 6)
    assert alias_panel.render(x[:, ::2], x[1:3], grid=None).facts.grid is None
    assert alias_panel.render(x[:, ::2], x[1:3], grid=(2, 12)).facts.grid == (2, 12)
    with pytest.raises(ValueError):
        alias_panel.render(x[:, ::2], x[1:3], grid=(2, 2))


def test_different_storages_never_alias():
    a, b = mt.zeros(4), mt.zeros(4)
    f = alias_panel.render(a, b).facts
    assert f.verdict == "no" and not f.shared and "different storages" in alias_panel.describe(a, b)


# -- the alias player: sliders for the offset and strides ------------------------------------------
def _verdict_of(label_html: str) -> str:
    return "out" if "out of bounds" in label_html else label_html.split("<b>")[-1].split(" alias")[0].lower()


def test_alias_player_verdicts_follow_the_engine_at_every_position():
    pytest.importorskip("ipywidgets")
    import numpy as np
    from microtorch.viz import alias_sliders

    x = mt.arange(24.0).reshape(4, 6)
    odd = x[:, 1::2]
    p = alias_sliders.AliasPlayer(x, x[:, ::2], against=[odd], names=["moved", "x[:, 1::2]"])
    assert [s.description for s in p.strides] == ["stride 0", "stride 1"]
    assert _verdict_of(p.label.value) == "no" and "<svg" in p.picture.value
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(60):
        offset, strides = int(rng.integers(0, 24)), tuple(int(v) for v in rng.integers(-7, 8, size=2))
        p.set(offset=offset, strides=strides)
        assert (p.layout().offset, p.layout().strides) == (offset, strides)
        lo = offset + sum(min(0, (n - 1) * s) for n, s in zip((4, 3), strides))
        hi = offset + sum(max(0, (n - 1) * s) for n, s in zip((4, 3), strides))
        got = _verdict_of(p.label.value)
        seen.add(got)
        if lo < 0 or hi > 23:  # the engine refuses that layout, and the player says so
            assert got == "out"
            with pytest.raises(Exception):
                x.as_strided((4, 3), strides, offset)
            assert "as_strided refuses" in p.picture.value and "<svg" not in p.picture.value
            continue
        view = x.as_strided((4, 3), strides, offset)
        assert got == mt.memory.alias(view, odd).answer, (offset, strides)
        assert (got == "must") == np.shares_memory(view.numpy(), odd.numpy())
        assert f"elements {lo} … {hi}" in p.label.value and "Text description" in p.picture.value
    assert {"no", "must", "out"} <= seen


def test_alias_player_keeps_each_position_drawn(monkeypatch):
    pytest.importorskip("ipywidgets")
    from microtorch.viz import alias_sliders

    x = mt.arange(24.0).reshape(4, 6)
    p = alias_sliders.AliasPlayer(x, x[:, ::2], against=[x[:, 1::2]])
    calls = []
    real = alias_sliders.alias_picture.render
    monkeypatch.setattr(alias_sliders.alias_picture, "render", lambda *a, **k: calls.append(a) or real(*a, **k))
    first = p.picture.value
    p.set(offset=1)
    moved = p.picture.value
    assert moved != first and len(calls) == 1
    p.set(offset=0)
    assert p.picture.value == first and len(calls) == 1  # drawn before: not drawn again
    assert p.box.player is p


def test_alias_player_pictures_lay_out_cleanly():
    from microtorch.viz import figure

    x = mt.arange(24.0).reshape(4, 6)
    odd = x[:, 1::2]
    for offset, strides in ((0, (6, 2)), (1, (6, 2)), (3, (5, 1)), (23, (-6, -2)), (0, (0, 7))):
        la = mt.memory.aliasing.layout(x.as_strided((4, 3), strides, offset))
        fig = alias_panel.render(la, mt.memory.aliasing.layout(odd), names=["moved", "x[:, 1::2]"], grid=(4, 6))
        assert figure.layout_problems(fig) == [], (offset, strides)


def test_alias_player_refuses_a_view_of_another_storage():
    pytest.importorskip("ipywidgets")
    from microtorch.viz import alias_sliders

    with pytest.raises(ValueError, match="view of base's storage"):
        alias_sliders.AliasPlayer(mt.arange(6.0), mt.arange(6.0)[::2])

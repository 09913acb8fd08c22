"""A pytest plugin loaded only by mutmut (``-p tests.mutmut_gc`` in pyproject's [tool.mutmut]).

While mutmut collects which tests cover which function, every mutated function is wrapped in
a trampoline that sets a ``contextvars.ContextVar``. microtorch frees storages from
finalizers; when the cyclic collector runs those inside a ``ContextVar.set`` (an allocation
there can start a collection), the nested set crashes CPython 3.11 (a segfault). Automatic
collection is therefore off for mutation runs; explicit ``gc.collect()`` calls, which the
tests use where they need one, still work.
"""
import gc


def pytest_configure(config):
    gc.disable()

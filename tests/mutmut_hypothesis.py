"""A pytest plugin loaded only by mutmut (``-p tests.mutmut_hypothesis`` in pyproject's [tool.mutmut]).

Hypothesis keeps each failing example in ``.hypothesis/`` and replays it first the next time the
test runs. Under mutmut every mutant's run shares ``mutants/.hypothesis/``: in the eighth run
(tests/README.md) a random view chain drew a real bug of the unmutated code, and from then on the
saved example failed for every later mutant, which mutmut reported killed whatever it did. So
mutation runs use no example database (nothing carries over from one mutant to the next) and
derandomized examples (every mutant meets the same ones, so a verdict can be re-checked by hand
with this plugin loaded).
"""
from hypothesis import settings

settings.register_profile("mutmut", database=None, derandomize=True)


def pytest_configure(config):
    settings.load_profile("mutmut")

"""Fixtures shared by several test modules."""
import gc

import pytest


@pytest.fixture
def no_cycle_collector():
    """The cyclic garbage collector off for one test: refcounts and frees must then be right
    by reference counting alone, with no cycle left for a collector to find."""
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()

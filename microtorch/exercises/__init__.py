"""Checkers for the notebook exercises: run the learner's function against the engine.

Each ``check_...(fn)`` calls ``fn`` on several cases, compares with what microtorch itself
does, and either prints one line saying all cases agree, or raises ``AssertionError``
whose message says, in plain words, which case went wrong, what was expected, and the
most likely reason. The reference is always the engine's own behaviour (its strides, its
bytes, its ``unbroadcast``), never a second copy of the answer.

One module per notebook; every checker is importable from here.
"""
from .backprop import check_dependency_counts, check_numerical_grad, check_topo_order
from .tensors import check_element_offset, check_strides, check_unbroadcast

__all__ = ["check_dependency_counts", "check_element_offset", "check_numerical_grad", "check_strides",
           "check_topo_order", "check_unbroadcast"]

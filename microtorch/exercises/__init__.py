"""Checkers for the notebook exercises: run the learner's function against the engine.

Each ``check_...(fn)`` calls ``fn`` on several cases, compares with what microtorch itself
does, and either prints one line saying all cases agree, or raises ``AssertionError``
whose message says, in plain words, which case went wrong, what was expected, and the
most likely reason. The reference is always the engine's own behaviour (its strides, its
bytes, its ``unbroadcast``), never a second copy of the answer.

One module per notebook; every checker is importable from here.
"""
from .arena import check_align_up, check_bump_offsets, check_chunk_plan
from .backprop import check_dependency_counts, check_numerical_grad, check_topo_order
from .inplace import check_derivative_from_output, check_inplace_safe
from .pool import check_size_class_of, check_size_classes
from .refcounts import check_leaked_storages, check_refcounts
from .tensors import check_element_offset, check_strides, check_unbroadcast
from .training import check_clip_grad_norm, check_momentum_update
from .views import check_alias_by_strides, check_extent, check_windows
from . import systems

__all__ = ["check_align_up", "check_bump_offsets", "check_chunk_plan", "check_leaked_storages",
           "check_refcounts", "check_size_class_of", "check_size_classes",
           "check_alias_by_strides", "check_extent", "check_windows",
           "check_clip_grad_norm", "check_dependency_counts", "check_derivative_from_output",
           "check_element_offset", "check_inplace_safe", "check_momentum_update",
           "check_numerical_grad", "check_strides", "check_topo_order", "check_unbroadcast"]

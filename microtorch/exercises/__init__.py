"""Checkers for the notebook exercises, and the hooks that run the engine on the learner's code.

Each ``check_...(fn)`` calls ``fn`` on fixed and random cases (``hidden=True``: a second,
larger random set, for autograding) and either prints one line saying all cases pass, or
raises ``AssertionError`` whose message says, in plain words, which case went wrong, what
was expected, what ``fn`` returned and the most likely reason. While ``fn`` runs, the engine
code the exercise asks for is switched off ("this exercise asks you to write X yourself"),
and the expected answers come from independent references (numpy, the rules written out,
values stored in the engine's bytes), never from that engine code.

``with use(unbroadcast=fn): ...`` (:mod:`.plugins`) runs the real engine on the learner's
function; the checkers of those exercises also run a subset of the engine's own tests with
it plugged in (:mod:`.suites` runs them; :mod:`.engine_suites`, imported here so that every
suite is registered, defines them). ``course`` makes student versions and grades them (nbgrader).

One module per exercise topic, named after its notebook (``backprop_walks`` and
``backprop_gradients`` for notebook 02); every checker is importable from here.
"""
from . import engine_suites, fallbacks  # engine_suites: registers every plug point's suite
from .arena import check_align_up, check_bump_arena, check_bump_offsets, check_chunk_plan
from .backprop_gradients import check_logsumexp, check_numerical_grad
from .backprop_walks import check_dependency_counts, check_topo_order
from .capstone import check_activation_peak, check_choose_configuration
from .checkpoint import check_optimal_chain, check_sqrt_segments
from .inplace_derivatives import check_derivative_from_output
from .inplace_safety import check_inplace_safe
from .planning import check_block_liveness, check_first_fit, check_greedy_vs_first_fit
from .pool import check_free_list_pool, check_size_class_of, check_size_classes
from .refcounts import check_leaked_storages, check_peak_extra_bytes, check_refcounts
from .sparse import check_coalesce, check_coo_to_csr, check_spmm_backward
from .systems import check_best_fit, check_numa_layout, check_thread_cache
from .tensors import check_element_offset, check_slice_layout, check_strides, check_unbroadcast
from .training import check_adam_step, check_clip_grad_norm, check_momentum_update
from .checking import has_passed, yours_or_engine
from .plugins import PLUG_POINTS, use, use_if_passed
from .suites import run_suite
from .view_strides import check_view_strides
from .views import check_alias_by_strides, check_extent, check_windows

__all__ = ["PLUG_POINTS", "fallbacks", "has_passed", "run_suite", "use", "use_if_passed", "yours_or_engine",
           "check_align_up", "check_bump_arena", "check_bump_offsets", "check_chunk_plan", "check_leaked_storages", "check_peak_extra_bytes",
           "check_free_list_pool", "check_refcounts", "check_size_class_of", "check_size_classes",
           "check_alias_by_strides", "check_extent", "check_view_strides", "check_windows",
           "check_adam_step", "check_clip_grad_norm", "check_dependency_counts", "check_logsumexp", "check_derivative_from_output",
           "check_element_offset", "check_inplace_safe", "check_slice_layout", "check_momentum_update",
           "check_numerical_grad", "check_strides", "check_topo_order", "check_unbroadcast",
           "check_block_liveness", "check_first_fit", "check_greedy_vs_first_fit",
           "check_optimal_chain", "check_sqrt_segments",
           "check_coalesce", "check_coo_to_csr", "check_spmm_backward",
           "check_best_fit", "check_numa_layout", "check_thread_cache",
           "check_activation_peak", "check_choose_configuration"]

"""The per-phase breakdown of the training step (benchmarks/phases.py) measures the real step:
the phased steps compute the same losses as the timed ones, the phases add up to the step,
and the rows carry the numbers the README's model reads (timings are reported, never asserted)."""
import math

import numpy as np

from benchmarks import phases
from benchmarks.training import _data, microtorch_step, numpy_step


def test_phased_steps_compute_the_same_losses_and_mark_every_phase():
    data = _data(batch=8, sizes=(12, 6, 3))
    for build in (lambda m: microtorch_step("sgd", data, m), lambda m: numpy_step(0.0, data, m)):
        marks = []
        plain, phased = build(None), build(marks)
        a = [plain() for _ in range(4)]
        b = [phased() for _ in range(4)]
        np.testing.assert_allclose(a, b, rtol=1e-6)
        assert len(marks) == 4 * 5 and marks == sorted(marks)


def test_phases_add_up_to_the_step_and_rows_name_the_model():
    engines = phases.measure(quick=True)
    assert set(engines) == {"microtorch", "numpy", "microtorch tiny", "numpy tiny"}
    for e in engines.values():
        assert len(e.total) == 5
        for i, total in enumerate(e.total):
            assert math.isclose(sum(e.samples[p][i] for p in phases.PHASES), total, rel_tol=1e-9)
            assert all(e.samples[p][i] >= 0 for p in phases.PHASES)
    mt = engines["microtorch"]
    assert min(mt.allocations) >= 5 and min(mt.alloc) > 0  # the pool's blocks of one step
    assert engines["numpy"].alloc == []  # numpy's allocations are not counted separately
    rows = phases.run(quick=True)
    names = [r.benchmark for r in rows]
    assert any(n.endswith("whole step") for n in names) and any("fixed cost" in n for n in names)
    assert all(any(n.endswith(f"phase: {p}") for n in names) for p in phases.PHASES)
    notes = " ".join(n for r in rows for n in r.notes)
    assert "predicted" in notes and "measured" in notes and "per phase" in notes

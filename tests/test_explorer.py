"""`make demo`'s memory explorer (demo/explorer.py): every model under every configuration
records a real step; the planned arena runs at its plan's offsets. The page itself is driven in
tests/test_browser.py."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import microtorch as mt

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("explorer", ROOT / "demo" / "explorer.py")
explorer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(explorer)


@pytest.mark.parametrize("model", list(explorer.MODELS))
@pytest.mark.parametrize("config", explorer.CONFIGS)
def test_every_model_records_under_every_configuration(model, config):
    tr, plan = explorer.record(model, config)
    assert tr.filter("node_run"), "the step ran no backward"
    assert (plan is not None) == (config == "planned arena")
    if plan is not None:
        placed = {e["planned"]: e["offset"] for e in tr.filter("alloc_block") if "planned" in e}
        assert placed and all(plan.offsets[k] == v for k, v in placed.items())


def test_checkpointing_recomputes_the_forward():
    plain, _ = explorer.record("MLP", "plain pool")
    ckpt, _ = explorer.record("MLP", "checkpointed")
    assert len(ckpt.filter("op")) > len(plain.filter("op"))


def test_unknown_choices_say_what_exists():
    with pytest.raises(ValueError, match="choose one of"):
        explorer.record("GPT", "plain pool")
    with pytest.raises(ValueError, match="choose one of"):
        explorer.record("MLP", "swap to disk")

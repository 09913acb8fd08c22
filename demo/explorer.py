"""The memory explorer behind `make demo` (demo/explorer.ipynb, served code-free by Voilà).

One training step of a small model is recorded under one memory configuration; the page
shows the player over that trace (graph, arena, refcounts, liveness) and, for the planned
arena, the planner's packing. MODELS and CONFIGS are plain dicts: a new model is one entry
`name -> builder()`, where the builder returns (model, step) with step() running one
forward + backward + optimizer step on a fixed batch.
"""
from __future__ import annotations

import contextlib

import microtorch as mt
from microtorch.planning import Program, plan, planned
from microtorch.utils.checkpoint import checkpoint


def _learner(forward, params, x, y, lr=0.05):
    opt = mt.optim.SGD(params, lr=lr, momentum=0.9)

    def step(ckpt=False):
        out = checkpoint(forward, x, use_reentrant=False) if ckpt else forward(x)
        loss = mt.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def mlp():
    """A two-hidden-layer perceptron: 32 examples of 64 features, 10 classes."""
    mt.manual_seed(0)
    model = mt.nn.MLP(64, [96, 96], 10)
    return _learner(model, model.parameters(), mt.randn(32, 64), mt.randint(0, 10, (32,)))


def residual():
    """A residual block h + W2·relu(W1·h) between an input and an output layer."""
    mt.manual_seed(0)
    inp, w1, w2, out = (mt.nn.Linear(64, 64), mt.nn.Linear(64, 128), mt.nn.Linear(128, 64),
                        mt.nn.Linear(64, 10))
    params = [p for m in (inp, w1, w2, out) for p in m.parameters()]

    def forward(x):
        h = inp(x).relu()
        return out(h + w2(w1(h).relu()))
    return _learner(forward, params, mt.randn(32, 64), mt.randint(0, 10, (32,)))


def attention():
    """One self-attention block: softmax(Q Kᵀ/√d) V over 8 positions, then a classifier."""
    mt.manual_seed(0)
    d, n = 16, 8
    q, k, v, out = (mt.nn.Linear(d, d), mt.nn.Linear(d, d), mt.nn.Linear(d, d),
                    mt.nn.Linear(d, 10))
    params = [p for m in (q, k, v, out) for p in m.parameters()]

    def forward(x):                                   # x: (n, d), one sequence
        scores = (q(x) @ k(x).transpose(0, 1)) * (1.0 / d ** 0.5)
        return out(mt.softmax(scores, dim=-1) @ v(x) + x)
    return _learner(forward, params, mt.randn(n, d), mt.randint(0, 10, (n,)))


MODELS = {"MLP": mlp, "residual block": residual, "attention block": attention}
CONFIGS = ("plain pool", "step arena", "planned arena", "checkpointed")


def record(model_name: str, config: str):
    """Record one training step of MODELS[model_name] under `config`; returns
    (trace, plan or None). The planned arena plans a first recorded step, then runs and
    records a second one at the planned offsets."""
    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose one of {sorted(MODELS)}")
    if config not in CONFIGS:
        raise ValueError(f"unknown configuration {config!r}; choose one of {list(CONFIGS)}")
    step = MODELS[model_name]()
    with mt.memory.step_arena():
        step()                              # a first step: optimizer state and .grad homes exist
    the_plan = None
    if config == "planned arena":
        with mt.trace() as first, mt.memory.step_arena():
            step()
        the_plan = plan(Program.from_trace(first), "greedy_by_size")
        context = planned(the_plan)
    elif config == "step arena":
        context = mt.memory.step_arena()
    else:
        context = contextlib.nullcontext()
    with mt.trace() as tr, context:
        step(ckpt=config == "checkpointed")
    return tr, the_plan


PANELS = ["graph", ["arena", "refcounts", "liveness"]]

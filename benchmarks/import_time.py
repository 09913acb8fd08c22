"""Import time of ``microtorch`` against ``torch`` (and ``numpy``, microtorch's floor).

Each measurement is a fresh interpreter (the same one running the benchmarks) doing
``t0 = perf_counter(); import NAME; perf_counter() - t0``: interpreter start-up is not
counted, everything the import pulls in (numpy for microtorch) is. One discarded run
first (it writes ``.pyc`` files), then ``k`` runs taking turns between the modules; median
and IQR.

The same subprocess reports which of the picture libraries (matplotlib, graphviz,
ipywidgets) ended up in ``sys.modules``: DESIGN.md says engine code imports none of them.
A ``python -X importtime`` run lists the modules that take longest to import (self time).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .harness import Row, Stats, summarize
from .peers import SKIP_TORCH

GROUP = "import_time"
ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("matplotlib", "graphviz", "ipywidgets")
TARGET_S = 0.25

_PROBE = """\
import sys, time, json
t0 = time.perf_counter()
import {name}
dt = time.perf_counter() - t0
print(json.dumps({{"seconds": dt, "modules": len(sys.modules),
                  "forbidden": sorted(m for m in sys.modules if m.split(".")[0] in {forbidden!r})}}))
"""


def _probe(name: str) -> dict:
    code = _PROBE.format(name=name, forbidden=FORBIDDEN)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def import_stats(names: list[str], repeats: int) -> dict[str, tuple[Stats, dict]]:
    """``{name: (stats, last probe)}``. The probes take turns (microtorch, torch, numpy,
    microtorch, ...) so a burst of load on the machine hits every module alike."""
    for name in names:
        _probe(name)  # discarded: the first import after an edit compiles .pyc files
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            runs[name].append(_probe(name))
    return {name: (summarize([r["seconds"] * 1e6 for r in rs]), rs[-1]) for name, rs in runs.items()}


def slowest_imports(name: str, top: int = 8) -> list[str]:
    """The ``top`` modules with the largest self time under ``python -X importtime``."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {name}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    entries = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, mod = (p.strip() for p in line[len("import time:"):].split("|"))
        entries.append((int(self_us), int(cum_us), mod.strip()))
    total = max((c for _, c, m in entries if m == name), default=0)
    entries.sort(reverse=True)
    return [f"{mod}: self {s / 1000:.1f} ms (cumulative {c / 1000:.1f} ms)"
            for s, c, mod in entries[:top]] + [f"total (cumulative of {name}): {total / 1000:.1f} ms"]


def _installed(name: str) -> bool:
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def run(quick: bool) -> list[Row]:
    repeats = 3 if quick else 9
    rows = []
    names = ["microtorch", "numpy"] + (["torch"] if _installed("torch") else [])
    try:
        results = import_stats(names, repeats)
    except Exception as e:
        err = f"{type(e).__name__}: {e}"
        return [Row(GROUP, "import microtorch", error=err, peer=p) for p in ("torch", "numpy")]
    mine, info = results["microtorch"]

    target = f"<= {TARGET_S * 1e6:,.0f} µs"
    met = mine.median_us <= TARGET_S * 1e6
    notes = [f"median {mine.median_us / 1e6:.3f} s, {info['modules']} modules in sys.modules"]
    if not quick:
        notes.append("slowest imports (python -X importtime, self time): "
                     + "; ".join(slowest_imports("microtorch")))

    if "torch" in results:
        theirs, tinfo = results["torch"]
        rows.append(Row(GROUP, "import microtorch", stats=mine, peer="torch", peer_stats=theirs,
                        target=target, met=met,
                        notes=notes + [f"torch: {tinfo['modules']} modules in sys.modules"]))
    else:
        rows.append(Row(GROUP, "import microtorch", stats=mine, peer="torch", skipped=SKIP_TORCH,
                        target=target, met=met, notes=notes))

    rows.append(Row(GROUP, "import microtorch", stats=mine, peer="numpy", peer_stats=results["numpy"][0],
                    notes=["numpy is microtorch's only dependency: the floor for its import time"]))

    loaded = info["forbidden"]
    rows.append(Row(GROUP, "no viz libs after import", value="none" if not loaded else ", ".join(loaded),
                    target="none of " + "/".join(FORBIDDEN), met=not loaded,
                    notes=[f"sys.modules after `import microtorch` holds: {loaded or 'none of them'}"]))
    return rows

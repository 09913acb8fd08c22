"""microtorch benchmarks: side-by-side ratios against peers measured in the same run.

    python benchmarks/run.py                 # everything; saves benchmarks/results/<stamp>.json + latest.json
    python benchmarks/run.py --quick         # smoke run (< 30 s); saves nothing unless --json/--save
    python benchmarks/run.py --only small_graphs,import_time
    python benchmarks/run.py --profile       # cProfile of microtorch's small graphs, top 15 by tottime

Exit status 0 unless microtorch itself errored or its results disagreed with a peer's;
targets are reported, never asserted.

Adding a benchmark group: write ``benchmarks/<name>.py`` with ``run(quick: bool) -> list[Row]``
(:class:`benchmarks.harness.Row`, timed with :func:`benchmarks.harness.measure`) and add
its module name to ``GROUPS`` below. Peers are optional: use ``benchmarks.peers`` to get a
"skipped: ..." row instead of a crash when one is not installed.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script: import the benchmarks package from the repo root
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path[0] = str(ROOT)
    else:
        sys.path.insert(0, str(ROOT))

from benchmarks.harness import Row, format_table, print_profile  # noqa: E402
from benchmarks.peers import TORCH_THREADS, versions  # noqa: E402

#: name -> module in benchmarks/, run in this order
GROUPS = {
    "small_graphs": "benchmarks.small_graphs",
    "import_time": "benchmarks.import_time",
    "allocators": "benchmarks.allocators",
    "player": "benchmarks.player",
    "training": "benchmarks.training",
    "phases": "benchmarks.phases",
    "planner": "benchmarks.planner",
    "checkpoint": "benchmarks.checkpoint",
    "sparse": "benchmarks.sparse",
    "systems": "benchmarks.systems",
}
RESULTS = ROOT / "benchmarks" / "results"
SCHEMA = "microtorch-bench/1"


def machine_info() -> dict:
    import numpy as np

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    peers = versions()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "numpy": np.__version__,
        "torch": peers["torch"],
        "micrograd": peers["micrograd"],
        "microtorch_commit": _git("rev-parse", "--short", "HEAD"),
        "microtorch_dirty": bool(_git("status", "--porcelain", "--", "microtorch")),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "torch_threads": TORCH_THREADS,
        "load_average": _load_average(),  # at the start; a shared machine's other work shows here
    }


def _load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the system does not say)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _git(*args) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


METHOD = {
    "timing": "per iteration; each engine warmed up (>= 3 calls, 0.2 s; quick 0.05 s) and given n calls "
              "per repeat (a repeat lasts ~0.05 s; quick 0.01 s); then k rounds in which microtorch, "
              "torch and numpy take turns (micrograd timed alone); median and IQR over the k repeats",
    "repeats": {"full": 21, "quick": 5},
    "gc": "garbage collector off inside a repeat, collected between repeats (as timeit); "
          "full runs also time microtorch and micrograd with it on (see notes)",
    "iteration": "leaf grads set to None, forward, backward (like zero_grad(set_to_none=True))",
    "torch_threads": f"torch.set_num_threads({TORCH_THREADS}): at these sizes no op is split "
                     "across threads; OPENBLAS_* / OMP_* left as found",
    "import_time": "fresh subprocess per sample, perf_counter around `import NAME` (interpreter "
                   "start-up excluded), 1 discarded + k runs (9; quick 3), median and IQR",
    "ratio": "microtorch median / peer median (lower is better for microtorch)",
    "allocators": "small graphs: pool / use_heap() / a fresh mt.trace() per repeat / torch take turns; "
                  "recorder off: the engine vs a copy with every trace.active read replaced by None; "
                  "large step: each configuration in a fresh subprocess (rounds take turns), time per "
                  "step, peak RSS (VmHWM reset before the steps), minor faults and system CPU per step",
}


def print_header(info: dict, quick: bool) -> None:
    print(f"microtorch benchmarks ({'quick' if quick else 'full'} run)  "
          f"{_dt.datetime.now().isoformat(timespec='seconds')}")
    print(f"  python {info['python']} ({info['implementation']}), numpy {info['numpy']}, "
          f"torch {info['torch'] or 'not installed'}, micrograd {info['micrograd'] or 'not installed'}")
    dirty = " + uncommitted changes in microtorch/" if info["microtorch_dirty"] else ""
    print(f"  microtorch @ {info['microtorch_commit'] or '?'}{dirty}")
    print(f"  {info['cpu']}, {info['cpu_count']} CPUs ({info['cpus_usable']} usable), {info['platform']}")
    if info["load_average"] is not None:
        print(f"  load average {' / '.join(map(str, info['load_average']))} (1 / 5 / 15 min)"
              + (": the machine is busy, times are inflated" if info["load_average"][0] > (info["cpu_count"] or 1)
                 else ""))
    print(f"  method: {METHOD['timing']}; k = {METHOD['repeats']['quick' if quick else 'full']}")
    print("  times in µs per iteration: median ±IQR/2")
    print(f"  {METHOD['gc']}")
    print(f"  {METHOD['torch_threads']}")
    print()


def print_notes(rows: list[Row]) -> None:
    seen = set()
    lines = []
    for r in rows:
        for n in r.notes:
            key = (r.benchmark, n)
            if key not in seen:
                seen.add(key)
                lines.append(f"  {r.benchmark}: {n}" if not n.startswith("slowest") else
                             f"  {r.benchmark}: " + n.replace("; ", "\n      "))
    if lines:
        print("\nnotes:")
        print("\n".join(lines))


def profile(top: int = 15, iterations: int = 3000) -> None:
    """cProfile of microtorch's small-graph iterations, top ``top`` functions by tottime."""
    from benchmarks.small_graphs import microtorch_steps

    for name, step in microtorch_steps().items():
        n = iterations if "chain" in name else iterations // 3
        print_profile(step, n, f"microtorch {name} (fwd+bwd)", warmup=50, top=top)


def _show(path: Path) -> str:
    """``path`` relative to the working directory when it is inside it, else absolute."""
    path = path.resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fast smoke run (< 30 s), fewer repeats")
    p.add_argument("--only", metavar="NAME[,NAME]", action="append",
                   help=f"run only these groups: {', '.join(GROUPS)}")
    p.add_argument("--json", metavar="PATH", help="also write the results to PATH")
    save = p.add_mutually_exclusive_group()
    save.add_argument("--save", action="store_true", default=None,
                      help="save to benchmarks/results/ even for --quick or --only runs")
    save.add_argument("--no-save", dest="save", action="store_false",
                      help="do not write to benchmarks/results/")
    p.add_argument("--profile", action="store_true",
                   help="print a cProfile of microtorch's small graphs instead of benchmarking")
    args = p.parse_args(argv)

    if args.profile:
        profile()
        return 0

    names = list(GROUPS)
    if args.only:
        names = [n.strip() for arg in args.only for n in arg.split(",") if n.strip()]
        unknown = [n for n in names if n not in GROUPS]
        if unknown:
            p.error(f"unknown group(s) {', '.join(unknown)}; choose from {', '.join(GROUPS)}")

    info = machine_info()
    print_header(info, args.quick)
    started = time.perf_counter()
    rows: list[Row] = []
    for name in names:
        module = importlib.import_module(GROUPS[name])
        t0 = time.perf_counter()
        try:
            rows.extend(module.run(args.quick))
        except Exception as e:  # one broken group must not hide the others
            rows.append(Row(name, f"{name} (group)", error=f"{type(e).__name__}: {e}"))
        print(f"  ran {name} in {time.perf_counter() - t0:.1f} s", flush=True)
    elapsed = time.perf_counter() - started
    info["load_average_end"] = _load_average()

    print()
    print(format_table(rows))
    print_notes(rows)
    targets = [r for r in rows if r.met is not None]
    print(f"\ntargets met: {sum(r.met for r in targets)}/{len(targets)}   ({elapsed:.1f} s)")

    stamp = _dt.datetime.now(_dt.timezone.utc)
    doc = {"schema": SCHEMA, "timestamp": stamp.isoformat(timespec="seconds"), "quick": args.quick,
           "groups": names, "elapsed_s": round(elapsed, 2), "machine": info, "method": METHOD,
           "rows": [r.to_json() for r in rows]}
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    save_results = args.save if args.save is not None else not (args.quick or args.only)
    written = []
    if save_results:
        RESULTS.mkdir(parents=True, exist_ok=True)
        for path in (RESULTS / f"{stamp.strftime('%Y-%m-%dT%H%M%SZ')}.json", RESULTS / "latest.json"):
            path.write_text(text, encoding="utf-8")
            written.append(path)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text, encoding="utf-8")
        written.append(Path(args.json))
    if written:
        print("saved: " + ", ".join(_show(w) for w in written))
    else:
        print("not saved (quick/--only run; pass --save or --json PATH to keep it)")
    failed = [r for r in rows if r.failed]
    if failed:  # targets are reported, not asserted; a broken or wrong engine is an error
        print(f"FAILED: microtorch errored or disagreed with a peer in {len(failed)} row(s): "
              + "; ".join(sorted({r.benchmark for r in failed})), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

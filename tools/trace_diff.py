"""Are two checkouts' traces of the notebooks' programs the same, event for event?

A refactoring of the recorder (typed events, a new package) must not change what the
notebooks record. This tool runs the code cells of each ``notebooks/NN_*.ipynb`` of a
checkout — in a fresh Python process per notebook, with that checkout first on
``PYTHONPATH``, in an IPython shell (matplotlib on Agg), from the notebooks' folder — catches
every :class:`Trace` the program makes, and writes each trace's events as the plain dicts a
trace file holds. ``compare`` then matches two such dumps trace by trace, event by event.

Two things differ from run to run of the same checkout and are pinned down: the cyclic
garbage collector runs whenever the allocation count says, which moves the frees of
tensors caught in reference cycles (and which allocators a ``baseline`` still sees), so
the programs run with it off and collected just before each ``mt.trace()`` starts; and
thread ids (``thread`` fields), renamed by first appearance (``thread 1``, ``thread 2``...)
before comparing. Nothing else is changed, unless ``--renumber`` is given: storage, block
and tensor ids are process-wide counters, so a checkout that allocates (or makes tensors) a
different number of times *before* a trace starts, in untraced cells, shifts every such id
inside it; ``--renumber`` renames them by first appearance within each trace, to see whether
anything else differs::

    python tools/trace_diff.py run --base ../pristine --head . [--only 03_refcounts] [--renumber]
    python tools/trace_diff.py dump --repo . --out head.json       # one side
    python tools/trace_diff.py compare base.json head.json

``run`` exits 1 and prints the first differing events when the dumps differ.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CATCHER = r'''
import gc, json, os, sys
import microtorch as mt

caught = []
_init, _enter = mt.Trace.__init__, mt.Trace.__enter__


def _catch(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    caught.append(self)


def _enter_collected(self):
    gc.collect()  # reference cycles freed here, not whenever the allocation count says
    return _enter(self)


mt.Trace.__init__, mt.Trace.__enter__ = _catch, _enter_collected
gc.disable()

from IPython.core.interactiveshell import InteractiveShell

nb = json.load(open(sys.argv[1], encoding="utf-8"))
shell = InteractiveShell.instance()
failed = None
for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] != "code":
        continue
    result = shell.run_cell("".join(cell["source"]), silent=True)
    if not result.success:
        failed = f"cell {i}: {result.error_in_exec or result.error_before_exec!r}"
        break


def plain(e):
    return e.to_dict() if hasattr(e, "to_dict") else dict(e)


json.dump({"failed": failed, "traces": [[plain(e) for e in tr.events] for tr in caught]},
          open(sys.argv[2], "w"), default=repr)
'''


def dump(repo: Path, out: Path, only: list[str] | None = None, python: str = sys.executable) -> dict:
    """Run every notebook of ``repo`` and write ``{notebook: {"failed", "traces"}}`` to ``out``."""
    repo = repo.resolve()
    notebooks = sorted((repo / "notebooks").glob("[0-9]*.ipynb"))
    if only:
        notebooks = [p for p in notebooks if any(o in p.name for o in only)]
    env = {**os.environ, "PYTHONPATH": str(repo), "MPLBACKEND": "Agg", "TQDM_DISABLE": "1"}
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "catch.py"
        script.write_text(_CATCHER)
        for nb in notebooks:
            target = Path(tmp) / (nb.stem + ".json")
            proc = subprocess.run([python, str(script), str(nb), str(target)], cwd=nb.parent, env=env,
                                  capture_output=True, text=True)
            if proc.returncode != 0 or not target.exists():
                result[nb.name] = {"failed": f"exit {proc.returncode}: {proc.stderr[-2000:]}", "traces": []}
            else:
                result[nb.name] = json.loads(target.read_text())
            n = sum(len(t) for t in result[nb.name]["traces"])
            print(f"  {repo.name}/{nb.name}: {len(result[nb.name]['traces'])} traces, {n} events"
                  + (f" (stopped: {result[nb.name]['failed']})" if result[nb.name]["failed"] else ""),
                  file=sys.stderr)
    out.write_text(json.dumps(result))
    return result


def _threads_renamed(events: list[dict]) -> list[dict]:
    names: dict = {}
    out = []
    for e in events:
        if "thread" in e:
            e = {**e, "thread": names.setdefault(e["thread"], f"thread {len(names) + 1}")}
        out.append(e)
    return out


_ID_FIELDS = {"storage": "storage", "output_storage": "storage", "grad_storage": "storage",
              "input_storages": "storage", "saved": "storage", "source": "storage", "block": "block",
              "tensor": "tensor", "inputs": "tensor", "output": "tensor", "leaf": "tensor", "roots": "tensor"}


def _ids_renumbered(events: list[dict]) -> list[dict]:
    """Storage, block and tensor ids renamed 1, 2, ... by first appearance in the trace (also
    inside a baseline's nested lists, and a ``holder`` such as "tensor 12")."""
    names: dict = {"storage": {}, "block": {}, "tensor": {}}

    def rename(space, v):
        if isinstance(v, list):
            return [rename(space, x) for x in v]
        if isinstance(v, int) and not isinstance(v, bool) and v:  # (0: "no storage")
            return names[space].setdefault(v, len(names[space]) + 1)
        return v

    def walk(o):
        if isinstance(o, dict):
            o = {k: rename(_ID_FIELDS[k], v) if k in _ID_FIELDS else walk(v) for k, v in o.items()}
            holder = o.get("holder")
            if isinstance(holder, str) and holder.startswith("tensor ") and holder[7:].isdigit():
                o["holder"] = f"tensor {rename('tensor', int(holder[7:]))}"
            return o
        if isinstance(o, list):
            return [walk(x) for x in o]
        return o

    return [walk(e) for e in events]


def compare(base: dict, head: dict, renumber: bool = False) -> tuple[bool, list[str]]:
    """``(equal, report lines)``: every notebook's traces, event for event (storage and block
    ids renamed by first appearance if ``renumber``)."""
    lines, equal = [], True
    total_traces = total_events = 0
    for name in sorted(set(base) | set(head)):
        a, b = base.get(name), head.get(name)
        if a is None or b is None:
            lines.append(f"{name}: only in {'head' if a is None else 'base'}")
            equal = False
            continue
        if a["failed"] != b["failed"]:
            lines.append(f"{name}: base stopped at {a['failed']!r}, head at {b['failed']!r}")
            equal = False
        if len(a["traces"]) != len(b["traces"]):
            lines.append(f"{name}: {len(a['traces'])} traces in base, {len(b['traces'])} in head")
            equal = False
        same = True
        for k, (ta, tb) in enumerate(zip(a["traces"], b["traces"])):
            ta, tb = _threads_renamed(ta), _threads_renamed(tb)
            if renumber:
                ta, tb = _ids_renumbered(ta), _ids_renumbered(tb)
            if len(ta) != len(tb):
                lines.append(f"{name}: trace {k}: {len(ta)} events in base, {len(tb)} in head")
                same = False
            for i, (ea, eb) in enumerate(zip(ta, tb)):
                if ea != eb:
                    diff = {f: (ea.get(f, "<absent>"), eb.get(f, "<absent>"))
                            for f in sorted(set(ea) | set(eb)) if ea.get(f, "<absent>") != eb.get(f, "<absent>")}
                    lines.append(f"{name}: trace {k}, event {i} ({ea.get('kind')}): {diff}")
                    same = False
                    break
        equal &= same
        n = sum(len(t) for t in a["traces"])
        total_traces, total_events = total_traces + len(a["traces"]), total_events + n
        lines.append(f"{name}: {len(a['traces'])} traces, {n} events: {'equal' if same else 'DIFFERENT'}")
    lines.append(f"compared {total_traces} traces, {total_events} events over {len(base)} notebooks: "
                 + ("all equal" if equal else "differences above"))
    return equal, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="run one checkout's notebooks and dump their traces")
    d.add_argument("--repo", type=Path, default=Path("."))
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--only", nargs="*")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("base", type=Path)
    c.add_argument("head", type=Path)
    c.add_argument("--renumber", action="store_true", help="rename storage, block and tensor ids by first appearance per trace")
    r = sub.add_parser("run", help="dump both checkouts and compare")
    r.add_argument("--base", type=Path, required=True)
    r.add_argument("--head", type=Path, default=Path("."))
    r.add_argument("--only", nargs="*")
    r.add_argument("--keep", type=Path, help="a folder to keep the two dumps in")
    r.add_argument("--renumber", action="store_true", help="rename storage, block and tensor ids by first appearance per trace")
    args = ap.parse_args(argv)
    if args.command == "dump":
        dump(args.repo, args.out, args.only)
        return 0
    if args.command == "compare":
        base, head = (json.loads(p.read_text()) for p in (args.base, args.head))
    else:
        keep = args.keep or Path(tempfile.mkdtemp())
        keep.mkdir(parents=True, exist_ok=True)
        base = dump(args.base, keep / "base.json", args.only)
        head = dump(args.head, keep / "head.json", args.only)
    equal, lines = compare(base, head, args.renumber)
    print("\n".join(lines))
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())

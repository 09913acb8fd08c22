"""NUMA placement — a cost model (a *simulation*; this machine's real topology is read, not changed).

On a two-socket server each socket has its own memory; a core reads its own socket's
memory (*local*) faster than the other's (*remote*, over the interconnect: UPI, Infinity
Fabric). Where a tensor's pages live is decided when they are first written (*first
touch*, Linux's default), by spreading them over the sockets page by page (*interleave*),
or by binding them to one socket (``numactl --membind``). This module models that:

* :class:`Topology` — sockets with their memory, and local/remote latency and bandwidth.
  :func:`machine_topology` reads the real one from ``/sys/devices/system/node`` (nodes,
  their CPUs, memory and the distance table) so a notebook can show it beside the model;
  on a one-node machine like a 2-core VM there is nothing to place, which is why the rest
  is a model.
* :func:`simulate` — replays a recorded trace's ops with a *thread affinity* (which socket
  runs each op; by default the thread each op was recorded from, one thread per socket) and a
  *placement policy* (first touch, interleave, bind), and charges each
  op for the bytes it reads and writes: ``time = Σ bytes / bandwidth(local or remote) +
  accesses × latency``, per storage, with an interleaved storage split half and half.
* :func:`affinity_score` — the article's Affinity(T, N) = Σ over ops using T of access
  frequency × [op runs on N], and :func:`place_by_affinity` putting each tensor on its
  highest-scoring node.

No number here is measured; the default latencies (local 90 ns, remote 1.5× as in the
article's exercise) and bandwidths (local 40 GB/s, remote 20 GB/s per socket) are typical
published figures for a two-socket x86 server, stated so they can be changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from .workload import storage_sizes

PAGE = 4096


@dataclass(frozen=True)
class Topology:
    """A NUMA machine as the model sees it."""
    nodes: int = 2
    memory_bytes: int = 32 << 30  # per node
    local_latency_ns: float = 90.0
    remote_latency_ns: float = 135.0
    local_gbps: float = 40.0  # GB/s a socket reads from its own memory
    remote_gbps: float = 20.0  # GB/s it reads from the other socket's memory
    cpus: tuple = ()  # per node, when read from a machine
    distances: tuple = ()  # the firmware's distance table (10 = local), when read

    def latency_ns(self, cpu_node: int, mem_node: int) -> float:
        return self.local_latency_ns if cpu_node == mem_node else self.remote_latency_ns

    def gbps(self, cpu_node: int, mem_node: int) -> float:
        return self.local_gbps if cpu_node == mem_node else self.remote_gbps

    def access_ns(self, cpu_node: int, mem_node: int, nbytes: int, accesses: int = 1) -> float:
        """Time for ``cpu_node`` to stream ``nbytes`` from ``mem_node``: latency per access plus
        bytes over bandwidth (1 GB/s = 1 byte/ns)."""
        return accesses * self.latency_ns(cpu_node, mem_node) + nbytes / self.gbps(cpu_node, mem_node)


def _cpulist(text: str) -> tuple[int, ...]:
    cpus = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(cpus)


def machine_topology(root: str | Path = "/sys/devices/system/node") -> Topology | None:
    """This machine's NUMA nodes as the kernel reports them (None where there is no such
    directory). Latencies and bandwidths are not reported by the kernel: they keep the
    model's defaults, scaled by the distance table (remote = distance / 10 × local)."""
    root = Path(root)
    nodes = sorted((p for p in root.glob("node[0-9]*") if p.is_dir()), key=lambda p: int(p.name[4:]))
    if not nodes:
        return None
    cpus, memory, distances = [], [], []
    for p in nodes:
        cpus.append(_cpulist((p / "cpulist").read_text()) if (p / "cpulist").exists() else ())
        mem = 0
        if (p / "meminfo").exists():
            for line in (p / "meminfo").read_text().splitlines():
                if "MemTotal:" in line:
                    mem = int(line.split()[-2]) * 1024
        memory.append(mem)
        if (p / "distance").exists():
            distances.append(tuple(int(d) for d in (p / "distance").read_text().split()))
    remote = Topology.local_latency_ns * max((d for row in distances for d in row), default=10) / 10
    return Topology(nodes=len(nodes), memory_bytes=min(memory) if memory else 0,
                    remote_latency_ns=remote, cpus=tuple(cpus), distances=tuple(distances))


# -- placement policies -------------------------------------------------------------------------
def first_touch(storage: int, writer_node: int, topology: Topology) -> dict[int, float]:
    """Pages go to the node of the thread that first writes them (Linux's default)."""
    return {writer_node: 1.0}


def interleave(storage: int, writer_node: int, topology: Topology) -> dict[int, float]:
    """Pages spread round-robin over every node (``numactl --interleave=all``)."""
    return {n: 1.0 / topology.nodes for n in range(topology.nodes)}


def bind(node: int):
    """Every page on ``node`` (``numactl --membind=node``)."""
    def policy(storage: int, writer_node: int, topology: Topology) -> dict[int, float]:
        return {node: 1.0}
    policy.__name__ = f"bind({node})"
    return policy


POLICIES = {"first_touch": first_touch, "interleave": interleave}


@dataclass
class NumaReport:
    """What the model charged: per op and per storage, local and remote bytes, time."""
    policy: str
    placement: dict = field(default_factory=dict)  # storage -> {node: fraction of its pages}
    op_ns: list = field(default_factory=list)  # (step, op, node, ns)
    local_bytes: int = 0
    remote_bytes: int = 0

    @property
    def total_ns(self) -> float:
        return sum(ns for *_, ns in self.op_ns)

    @property
    def remote_fraction(self) -> float:
        total = self.local_bytes + self.remote_bytes
        return self.remote_bytes / total if total else 0.0


def by_thread(trace, topology: Topology | None = None):
    """The affinity of a trace recorded with several threads: the thread that recorded runs on
    node 0, each other thread (its ``thread`` field, in order of appearance) on the next node,
    round-robin — as threads pinned one per socket would."""
    topology = topology or Topology()
    order = [None] + list(dict.fromkeys(e["thread"] for e in trace.events if "thread" in e))
    node = {t: i % topology.nodes for i, t in enumerate(order)}
    return lambda i, e: node[e.get("thread")]


def simulate(trace, affinity="thread", policy="first_touch", topology: Topology | None = None,
             initial: dict | None = None) -> NumaReport:
    """Charge every op of ``trace`` on a modelled NUMA machine.

    ``affinity(i, event) -> node``: which socket runs the i-th op (a thread pinned there);
    ``"thread"`` (the default): by the thread that ran it, as recorded (:func:`by_thread`);
    ``policy``: ``"first_touch"``, ``"interleave"``, ``bind(n)`` or a function
    ``(storage, writer_node, topology) -> {node: fraction}``; ``initial``: placements of
    storages that existed before the trace (e.g. parameters), ``{storage: {node: fraction}}``
    (default: first touch by the first op that uses them). Each op reads its input storages
    and writes its output storage once; an interleaved storage is read half locally, half
    remotely.
    """
    topology = topology or Topology()
    if affinity == "thread":
        affinity = by_thread(trace, topology)
    place = placement_policy(policy)
    sizes = storage_sizes(trace)
    report = NumaReport(getattr(place, "__name__", str(policy)), dict(initial or {}))
    ops = [e for e in trace.events if e["kind"] == "op"]
    for i, e in enumerate(ops):
        charge(report, i, e, affinity(i, e), place, topology, sizes)
    return report


def placement_policy(policy):
    """``policy`` as a function ``(storage, writer_node, topology) -> {node: fraction}``."""
    place = POLICIES.get(policy, policy) if isinstance(policy, str) else policy
    if not callable(place):
        raise ValueError(f"unknown NUMA policy {policy!r}; use one of {sorted(POLICIES)}, bind(n) or a function")
    return place


def charge(report: NumaReport, i: int, e, node: int, place, topology: Topology, sizes: dict) -> None:
    """Charge the ``i``-th op ``e``, run on ``node``, to ``report``: a storage it touches for the
    first time is placed by ``place``; then each of its input storages is read and its output
    storage written once, locally or remotely by where their pages live."""
    if not 0 <= node < topology.nodes:
        raise ValueError(f"affinity put op {i} ({e['op']}) on node {node}; the topology has "
                         f"{topology.nodes} node(s)")
    ns = 0.0
    touched = [(s, False) for s in e.get("input_storages") or [] if s is not None]
    if e.get("output_storage") is not None:
        touched.append((e["output_storage"], True))
    for s, write in touched:
        if s not in report.placement:  # first touch of a storage decides where its pages go
            report.placement[s] = place(s, node, topology)
        nbytes = sizes.get(s, 0)
        pages = max(1, math.ceil(nbytes / PAGE))
        for mem, frac in report.placement[s].items():
            part = int(nbytes * frac)
            ns += topology.access_ns(node, mem, part, accesses=max(1, round(pages * frac)))
            if mem == node:
                report.local_bytes += part
            else:
                report.remote_bytes += part
    report.op_ns.append((e["step"], e["op"], node, ns))


def affinity_score(trace, affinity, storage: int, node: int, frequency=None) -> float:
    """Affinity(T, N) = Σ_{op ∈ Ops(T)} AccessFreq(op) × Located(op, N): how much of the use of
    storage ``storage`` happens on ``node`` (``frequency(i, event)``: default 1 per op)."""
    total = 0.0
    ops = [e for e in trace.events if e["kind"] == "op"]
    for i, e in enumerate(ops):
        uses = list(e.get("input_storages") or []) + [e.get("output_storage")]
        if storage in uses and affinity(i, e) == node:
            total += frequency(i, e) if frequency else 1.0
    return total


def place_by_affinity(trace, affinity, topology: Topology | None = None) -> dict[int, dict[int, float]]:
    """Every storage of the trace on its highest-affinity node (ties: the lower node)."""
    topology = topology or Topology()
    storages = {s for e in trace.events if e["kind"] == "op"
                for s in list(e.get("input_storages") or []) + [e.get("output_storage")] if s is not None}
    return {s: {max(range(topology.nodes), key=lambda n: (affinity_score(trace, affinity, s, n), -n)): 1.0}
            for s in sorted(storages)}


# -- the article's exercise: C = A × B on two sockets -------------------------------------------
def matmul_cost(m: int, k: int, n: int, layout: dict, topology: Topology | None = None,
                itemsize: int = 4, tile_rows: int = 1000) -> dict:
    """Modelled time of C[m,n] = A[m,k] × B[k,n] with the rows of C split evenly over the
    sockets (each socket computes its half). ``layout`` says where each operand lives:
    ``{"A": "split" | "interleave" | node, "B": "replicate" | "interleave" | node,
    "C": "split" | "interleave" | node}`` — ``split``: each socket holds the rows it works
    on; ``replicate``: a copy on every socket (costs the copy once and memory twice).
    Each socket streams its rows of A once and writes its rows of C once; it works through its
    rows in tiles of ``tile_rows`` and reads all of B once per tile (a blocked GEMM), so B is
    read ⌈m / sockets / tile_rows⌉ times — which is what makes replicating it pay off."""
    t = topology or Topology()

    allowed = {"A": "split", "B": "replicate", "C": "split"}

    def where(name, spec, worker):  # {node: fraction} of the bytes this worker touches
        if spec in ("split", "replicate"):
            if spec != allowed[name]:
                raise ValueError(f"{name} cannot be {spec!r}: A and C can be 'split' by rows, B can be "
                                 f"'replicate'd (every socket needs all of B)")
            return {worker: 1.0}
        if spec == "interleave":
            return {nd: 1 / t.nodes for nd in range(t.nodes)}
        if isinstance(spec, int) and 0 <= spec < t.nodes:
            return {spec: 1.0}
        raise ValueError(f"unknown layout {spec!r}: use 'split', 'replicate', 'interleave' or a node number")

    a, b, c = m * k * itemsize, k * n * itemsize, m * n * itemsize
    b_reads = math.ceil(m / t.nodes / tile_rows)
    per_worker, remote = [], 0
    for w in range(t.nodes):
        ns = 0.0
        for name, nbytes in (("A", a / t.nodes), ("B", b * b_reads), ("C", c / t.nodes)):
            for node, frac in where(name, layout[name], w).items():
                ns += t.access_ns(w, node, nbytes * frac, accesses=max(1, round(nbytes * frac / PAGE)))
                remote += nbytes * frac if node != w else 0
        per_worker.append(ns)
    copy_ns = b / t.remote_gbps if layout.get("B") == "replicate" else 0.0
    memory = a + c + b * (t.nodes if layout.get("B") == "replicate" else 1)
    return {"ns": max(per_worker) + copy_ns, "per_socket_ns": per_worker, "copy_ns": copy_ns,
            "b_reads": b_reads, "remote_bytes": int(remote),
            "memory_bytes": memory, "fits": memory <= t.nodes * t.memory_bytes}

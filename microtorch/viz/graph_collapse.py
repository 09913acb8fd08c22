"""Big graphs: which op nodes the graph picture collapses into one group node.

Beyond ``max_nodes`` nodes, chains of ops (each the only consumer of the one before) are
collapsed into one labelled group node ("… 37 more ops"), longest first; if that is not
enough, the middle of the graph (in recording order) is. The node the current step is about
and the ready nodes always stay visible.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .graph_state import GraphState

MAX_NODES = 40


@dataclass
class Group:
    """Op nodes drawn as one node (a collapsed chain or span), with the leaves only they use."""

    gid: int
    nodes: list[int]
    leaves: list[int] = field(default_factory=list)



def _protected(s: GraphState) -> set[int]:
    """Nodes that must stay visible: the current step's node and the ready set."""
    keep = set(s.backward["ready"]) if s.backward else set()
    cur = s.current or {}
    if cur.get("kind") in ("op", "node_run", "release") and cur.get("node") is not None:
        keep.add(int(cur["node"]))
    for tid in s.outputs:
        keep.add(s.producer[tid])
    return keep


def collapse(s: GraphState, max_nodes: int | None = MAX_NODES) -> list[Group]:
    """Groups of op nodes to draw as one node each, so that at most ``max_nodes`` show."""
    if max_nodes is None or s.n_nodes <= max_nodes:
        return []
    keep = _protected(s)
    preds = {n: {p for p in s.sources[n] if p is not None} for n in s.ops}
    succs: dict[int, set[int]] = {n: set() for n in s.ops}
    for n, ps in preds.items():
        for p in ps:
            succs[p].add(n)

    # chains: maximal runs n1 -> n2 -> ... where each is the only consumer of the one before
    def links_back(n: int) -> bool:
        return len(preds[n]) == 1 and len(succs[next(iter(preds[n]))]) == 1
    chains = []
    for n in s.ops:  # recording order, so a chain is found from its first node
        if links_back(n):  # continues a chain that started at an earlier node
            continue
        chain = [n]
        while len(succs[chain[-1]]) == 1:
            nxt = next(iter(succs[chain[-1]]))
            if not links_back(nxt):
                break
            chain.append(nxt)
        # interior runs without protected nodes (keep each chain's first and last node)
        run: list[int] = []
        for m in chain[1:-1] + [None]:
            if m is None or m in keep:
                if len(run) >= 2:
                    chains.append(run)
                run = []
            else:
                run.append(m)

    groups: list[Group] = []
    count = s.n_nodes
    for run in sorted(chains, key=len, reverse=True):
        if count <= max_nodes:
            break
        g = _make_group(s, len(groups) + 1, run)
        groups.append(g)
        count -= len(run) + len(g.leaves) - 1
    if count > max_nodes:  # still too big (a wide graph): collapse the middle, in recording order
        grouped = {n for g in groups for n in g.nodes}
        free = [n for n in s.ops if n not in grouped]
        mid = len(free) // 2
        outward = [free[mid + (k + 1) // 2 * (1 if k % 2 else -1)] for k in range(len(free))
                   if 0 <= mid + (k + 1) // 2 * (1 if k % 2 else -1) < len(free)]
        outside = {tid: len(s.consumers.get(tid, ())) for tid in s.leaves}  # uses not yet in the span
        span: list[int] = []
        for n in outward:
            if n in keep:
                continue
            span.append(n)
            count -= 1 if len(span) > 1 else 0  # the first node becomes the group node
            for tid in s.ops[n]["inputs"]:
                if tid in outside:
                    outside[tid] -= 1
                    count -= outside[tid] == 0
            if len(span) >= 2 and count <= max_nodes:
                break
        if len(span) >= 2:
            order = {n: i for i, n in enumerate(s.ops)}
            groups.append(_make_group(s, len(groups) + 1, sorted(span, key=order.get)))
    return groups


def _make_group(s: GraphState, gid: int, nodes: list[int]) -> Group:
    inside = set(nodes)
    leaves = [tid for tid in s.leaves if s.consumers.get(tid) and set(s.consumers[tid]) <= inside]
    return Group(gid, list(nodes), leaves)

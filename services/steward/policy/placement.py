"""Placement (DESIGN.md "Placement"): gangs are all-or-nothing, a gang larger than one node takes
whole nodes, and a gang goes into the smallest topology domain that fits (best fit), or the first
that fits for the `first_fit` baselines.

`CapacityIndex` is the tentative plan of one cycle: free GPUs per node, aggregated per topology
domain, so that a placement costs O(node size + log n) for one-node jobs and O(domains at a level)
for multi-node gangs, never a scan of every node per job. It lives only inside `schedule()`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress

from steward.domain.nodes import takes_new_work
from steward.domain.policy_settings import PlacementMode
from steward.policy.model import Node


@dataclass(frozen=True, slots=True)
class Fit:
    """Where a gang would go: node indices with the GPUs it takes on each, the domain it lies in."""

    nodes: tuple[tuple[int, int], ...]
    domain_depth: int
    domain: tuple[str, ...]


class NodeLayout:
    """The part of a `CapacityIndex` that depends on the nodes only (their topology order, domains,
    capacities), built once per `nodes` sequence and shared read-only by the indices built on it
    (the simulator and the scheduler hand every cycle the same nodes while the cluster is
    unchanged)."""

    __slots__ = (
        "cap",
        "depth",
        "dom_key",
        "dom_of",
        "dom_range",
        "ids",
        "largest_domain_by_depth",
        "maxcap",
        "maxcap_all",
        "nodes",
        "pos",
        "ready",
        "seg_size",
        "source",
    )

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.source = nodes
        ordered = sorted(nodes, key=lambda n: (n.path, n.id))
        self.nodes: list[Node] = ordered
        self.ids: list[str] = [n.id for n in ordered]
        self.pos: dict[str, int] = {n.id: i for i, n in enumerate(ordered)}
        self.cap: list[int] = [n.gpus for n in ordered]
        self.ready: tuple[bool, ...] = tuple(takes_new_work(n.state) for n in ordered)
        n = len(ordered)
        self.maxcap = max((c for c, o in zip(self.cap, self.ready, strict=True) if o), default=0)
        self.maxcap_all = max(self.cap, default=0)
        self.depth = max((len(node.path) for node in ordered), default=0)
        # Domains: depth 0 is the whole cluster; depth d groups nodes by path[:d].
        self.dom_of: list[list[int]] = []
        self.dom_key: list[list[tuple[str, ...]]] = []
        self.dom_range: list[list[tuple[int, int]]] = []
        for d in range(self.depth + 1):
            of = [-1] * n
            keys: list[tuple[str, ...]] = []
            ranges: list[tuple[int, int]] = []
            prev: tuple[str, ...] | None = None
            for i, node in enumerate(ordered):
                if len(node.path) < d:
                    prev = None
                    continue
                key = node.path[:d]
                if key != prev:
                    keys.append(key)
                    ranges.append((i, i + 1))
                    prev = key
                else:
                    ranges[-1] = (ranges[-1][0], i + 1)
                of[i] = len(keys) - 1
            self.dom_of.append(of)
            self.dom_key.append(keys)
            self.dom_range.append(ranges)
        self.seg_size = 1
        while self.seg_size < max(n, 1):
            self.seg_size *= 2
        # schedulable GPUs in the largest domain at each depth (for explanations)
        self.largest_domain_by_depth: tuple[int, ...] = tuple(
            max(
                (sum(self.cap[i] for i in range(lo, hi) if self.ready[i]) for lo, hi in self.dom_range[d]),
                default=0,
            )
            for d in range(self.depth + 1)
        )


_last_layout: list[NodeLayout] = []


def node_layout(nodes: Sequence[Node]) -> NodeLayout:
    """The layout of `nodes`, reused while the caller passes the very same (immutable) tuple of
    nodes: a memo of a pure function, so results do not depend on it."""
    if _last_layout and _last_layout[0].source is nodes and isinstance(nodes, tuple):
        return _last_layout[0]
    layout = NodeLayout(nodes)
    _last_layout[:] = [layout]
    return layout


class CapacityIndex:
    """Free GPUs per node (nodes sorted by topology path, so every domain is a contiguous range),
    with per-domain totals of free GPUs and of GPUs on wholly free nodes, buckets of nodes by free
    count (best fit) and a max-segment tree (first fit). Nodes can be masked (reserved, claimed by
    a preemption, draining): a masked node is invisible to searches but keeps its free count."""

    def __init__(self, nodes: Sequence[Node], used: Mapping[str, int], mode: PlacementMode) -> None:
        layout = node_layout(nodes)
        self.mode: PlacementMode = mode
        # the static part, shared by every index built on the same nodes (never mutated)
        self.nodes: list[Node] = layout.nodes
        self.ids: list[str] = layout.ids
        self.pos: dict[str, int] = layout.pos
        self.cap: list[int] = layout.cap
        self.maxcap = layout.maxcap
        self.depth = layout.depth
        self.dom_of: list[list[int]] = layout.dom_of
        self.dom_key: list[list[tuple[str, ...]]] = layout.dom_key
        self.dom_range: list[list[tuple[int, int]]] = layout.dom_range
        self.layout_ready: tuple[bool, ...] = layout.ready
        self.largest_domain_by_depth: tuple[int, ...] = layout.largest_domain_by_depth
        # the plan of this cycle
        cap = layout.cap
        if used:
            self.free: list[int] = [max(0, c - used.get(nid, 0)) for nid, c in zip(layout.ids, cap, strict=True)]
        else:
            self.free = list(cap)
        free = self.free
        self.ok: list[bool] = list(layout.ready)
        ok = self.ok
        n = len(cap)
        # per-domain totals over visible nodes (what `_add` keeps), summed range by range: every
        # domain is one contiguous range of the topology order
        ok_free = [f if o else 0 for f, o in zip(free, ok, strict=True)]
        ok_whole = [c if o and f == c and f > 0 else 0 for f, c, o in zip(free, cap, ok, strict=True)]
        self.dom_free: list[list[int]] = [[sum(ok_free[lo:hi]) for lo, hi in r] for r in layout.dom_range]
        self.dom_whole: list[list[int]] = [[sum(ok_whole[lo:hi]) for lo, hi in r] for r in layout.dom_range]
        self.count: list[int] = [0] * (layout.maxcap_all + 1)
        self.heaps: list[list[int]] = [[] for _ in self.count]
        count, heaps = self.count, self.heaps
        for i in range(n):  # in index order: each bucket list is sorted, hence already a heap
            if ok[i]:
                f = free[i]
                count[f] += 1
                if f > 0:
                    heaps[f].append(i)
        self.seg_size = layout.seg_size
        self.seg: list[int] = []
        if mode == "first_fit":
            self.seg = [0] * (2 * self.seg_size)
            for i in range(n):
                self.seg[self.seg_size + i] = free[i] if ok[i] else 0
            for j in range(self.seg_size - 1, 0, -1):
                self.seg[j] = max(self.seg[2 * j], self.seg[2 * j + 1])

    # --- bookkeeping ------------------------------------------------------------------------------

    def _add(self, i: int) -> None:
        f = self.free[i]
        self.count[f] += 1
        whole = self.cap[i] if f == self.cap[i] and f > 0 else 0
        for d in range(self.depth + 1):
            dom = self.dom_of[d][i]
            if dom >= 0:
                self.dom_free[d][dom] += f
                self.dom_whole[d][dom] += whole

    def _remove(self, i: int) -> None:
        f = self.free[i]
        self.count[f] -= 1
        whole = self.cap[i] if f == self.cap[i] and f > 0 else 0
        for d in range(self.depth + 1):
            dom = self.dom_of[d][i]
            if dom >= 0:
                self.dom_free[d][dom] -= f
                self.dom_whole[d][dom] -= whole

    def _seg_set(self, i: int) -> None:
        if not self.seg:
            return
        j = self.seg_size + i
        self.seg[j] = self.free[i] if self.ok[i] else 0
        j //= 2
        seg = self.seg
        while j:
            seg[j] = max(seg[2 * j], seg[2 * j + 1])
            j //= 2

    def take(self, i: int, gpus: int) -> None:
        """Commit `gpus` GPUs of node `i` to the plan."""
        if self.ok[i]:
            self._remove(i)
            self.free[i] -= gpus
            self._add(i)
            if self.free[i] > 0:
                heapq.heappush(self.heaps[self.free[i]], i)
            self._seg_set(i)
        else:
            self.free[i] -= gpus
        assert self.free[i] >= 0, "capacity exceeded"

    def mask(self, i: int) -> None:
        """Hide node `i` from searches (reserved, claimed, not schedulable)."""
        if self.ok[i]:
            self._remove(i)
            self.ok[i] = False
            self._seg_set(i)

    def unmask(self, i: int) -> None:
        if not self.ok[i] and takes_new_work(self.nodes[i].state):
            self.ok[i] = True
            self._add(i)
            if self.free[i] > 0:
                heapq.heappush(self.heaps[self.free[i]], i)
            self._seg_set(i)

    # --- queries ----------------------------------------------------------------------------------

    @property
    def total_free(self) -> int:
        """Free GPUs on visible nodes."""
        return self.dom_free[0][0] if self.dom_free and self.dom_free[0] else 0

    @property
    def whole_free(self) -> int:
        """GPUs on visible, wholly free nodes."""
        return self.dom_whole[0][0] if self.dom_whole and self.dom_whole[0] else 0

    def max_free(self) -> int:
        """Largest free count on one visible node."""
        for f in range(len(self.count) - 1, 0, -1):
            if self.count[f]:
                return f
        return 0

    def nodes_fitting(self, gpus: int) -> int:
        """How many visible nodes could hold a one-node job of `gpus` (whole free nodes for a gang)."""
        if gpus > self.maxcap:
            return self.count[-1] if self.count else 0
        return sum(self.count[gpus:])

    def best_single(self, gpus: int) -> int:
        """DESIGN.md "Placement ... best fit": the visible node with the fewest free GPUs that still
        holds the job (ties: topology order, which packs domains one after another). -1 if none."""
        count, heaps, free, ok = self.count, self.heaps, self.free, self.ok
        for f in range(gpus, len(count)):
            if not count[f]:
                continue
            h = heaps[f]
            while h:
                i = h[0]
                if ok[i] and free[i] == f:
                    return i
                heapq.heappop(h)
        return -1

    def first_single(self, gpus: int) -> int:
        """First fit (the `ai2`, `fair-tree`, `fifo-priority` baselines): the first visible node in
        topology order with enough free GPUs. -1 if none."""
        seg = self.seg
        if not seg or seg[1] < gpus:
            return -1
        j = 1
        while j < self.seg_size:
            j = 2 * j if seg[2 * j] >= gpus else 2 * j + 1
        return j - self.seg_size

    def most_free(self, gpus: int) -> int:
        """DESIGN.md "Interactive sessions": the node with the most free capacity (for a restore
        whose previous node has no room). -1 if none holds `gpus`."""
        for f in range(len(self.count) - 1, gpus - 1, -1):
            if not self.count[f]:
                continue
            h = self.heaps[f]
            while h:
                i = h[0]
                if self.ok[i] and self.free[i] == f:
                    return i
                heapq.heappop(h)
        return -1

    def find_single(self, gpus: int) -> int:
        return self.best_single(gpus) if self.mode == "best_fit" else self.first_single(gpus)

    def find_gang(self, gpus: int, min_depth: int = 0) -> Fit | None:
        """DESIGN.md "Gang jobs are all-or-nothing; place into the smallest topology domain that
        fits (best fit)": a gang larger than one node takes wholly free nodes, all inside one domain;
        the deepest level with a domain that fits wins, and at that level the domain with the fewest
        whole-free GPUs that still hold it (first such domain for `first_fit`). `min_depth` is a hard
        topology constraint (the gang must stay inside one domain at that depth)."""
        if self.whole_free < gpus:
            return None
        for d in range(self.depth, min_depth - 1, -1):
            whole = self.dom_whole[d]
            best = -1
            best_whole = 0
            for dom, w in enumerate(whole):
                if w >= gpus and (best < 0 or (self.mode == "best_fit" and w < best_whole)):
                    best, best_whole = dom, w
                    if self.mode == "first_fit":
                        break
            if best >= 0:
                return Fit(self._pick_whole(d, best, gpus), d, self.dom_key[d][best])
        return None

    def _pick_whole(self, d: int, dom: int, gpus: int) -> tuple[tuple[int, int], ...]:
        """Wholly free nodes inside domain (d, dom): first from the sub-domains with the most whole
        free GPUs (to keep the gang's span small), then in topology order."""
        lo, hi = self.dom_range[d][dom]
        candidates = [i for i in range(lo, hi) if self.ok[i] and self.free[i] == self.cap[i] > 0]
        if d < self.depth:
            sub = self.dom_of[d + 1]
            sub_whole = self.dom_whole[d + 1]
            candidates.sort(key=lambda i: (-sub_whole[sub[i]] if sub[i] >= 0 else 0, i))
        out: list[tuple[int, int]] = []
        left = gpus
        for i in candidates:
            take = min(self.cap[i], left)
            out.append((i, take))
            left -= take
            if left == 0:
                break
        assert left == 0
        return tuple(out)

    def find(self, gpus: int, topology_depth: int | None) -> Fit | None:
        """Where a job of `gpus` GPUs goes now, or None."""
        if gpus <= self.maxcap:
            i = self.find_single(gpus)
            if i < 0:
                return None
            return Fit(((i, gpus),), len(self.nodes[i].path) + 1, (*self.nodes[i].path, self.ids[i]))
        return self.find_gang(gpus, min(topology_depth or 0, self.depth))

    def commit(self, fit: Fit) -> tuple[tuple[str, int], ...]:
        for i, g in fit.nodes:
            self.take(i, g)
        return tuple((self.ids[i], g) for i, g in fit.nodes)

    def max_whole_at(self, depth: int) -> int:
        """Most whole-free GPUs in one visible domain at `depth`."""
        d = min(max(depth, 0), self.depth)
        return max(self.dom_whole[d], default=0)

    def physical_free(self) -> list[tuple[int, int]]:
        """(node index, free GPUs) of every schedulable node, masked or not."""
        return [(i, f) for i, (f, ready) in enumerate(zip(self.free, self.layout_ready, strict=True)) if ready]

    def physical_free_total(self) -> int:
        """Free GPUs on schedulable nodes, masked or not."""
        return sum(compress(self.free, self.layout_ready))


def level_name(levels: Sequence[str], depth: int) -> str:
    """Plain name of a topology level for explanations ("block", "spine", or "cluster")."""
    if depth <= 0:
        return "cluster"
    if depth - 1 < len(levels):
        return levels[depth - 1]
    return f"level-{depth}"


def fragmentation(index: CapacityIndex, largest_gang: int, topology_depth: int | None = None) -> float:
    """DESIGN.md "Fragmentation is a measured figure (free GPUs that the largest waiting gang cannot
    use)", ÷ capacity (`unusable_gpus`)."""
    capacity = sum(compress(index.cap, index.layout_ready))
    if capacity == 0 or largest_gang <= 0:
        return 0.0
    return unusable_gpus(index, largest_gang, topology_depth) / capacity


def unusable_gpus(index: CapacityIndex, largest_gang: int, topology_depth: int | None = None) -> int:
    """DESIGN.md "Fragmentation is a measured figure": the free GPUs (on nodes that take new work) that a gang of
    `largest_gang` GPUs cannot use. A one-node gang cannot use free GPUs on nodes with fewer free than it needs;
    a multi-node gang cannot use GPUs on partly busy nodes, nor any when no domain it may use holds enough whole
    free nodes. No waiting gang: none. The one home of the rule: the cycle's figure (lab-wide, `fragmentation`) and
    each cluster's (`unusable_by_cluster`: the API's and the scheduler's metric, ADR 0091) read it."""
    if largest_gang <= 0:
        return 0
    if largest_gang <= index.maxcap:
        return sum(f for f in compress(index.free, index.layout_ready) if f < largest_gang)
    frees = index.physical_free()
    total = sum(f for _, f in frees)
    whole_by_dom: dict[tuple[str, ...], int] = {}
    depth = min(topology_depth or 0, index.depth)
    for i, f in frees:
        if f == index.cap[i] and f > 0:
            key = index.nodes[i].path[:depth]
            whole_by_dom[key] = whole_by_dom.get(key, 0) + f
    usable = sum(w for w in whole_by_dom.values() if w >= largest_gang)
    return total - usable


def unusable_by_cluster(nodes: Sequence[Node], used: Mapping[str, int], largest: Mapping[str, int]) -> dict[str, int]:
    """ADR 0091, fragmentation per cluster: for each cluster of `nodes`, its free GPUs that its largest waiting gang
    (`largest`: `policy.routing.largest_waiting_by_cluster`; 0 or absent: none waits) cannot use, by `unusable_gpus` on
    an index of that cluster's nodes alone (gangs never span clusters); `used`: the GPUs Steward's jobs hold per node.
    The one home of the per-cluster figure: the API's `ClusterOccupancy.fragmentedGpus` and the scheduler's
    `steward_fragmented_gpus{cluster}` both read it."""
    members: dict[str, list[Node]] = {}
    for n in nodes:
        members.setdefault(n.cluster, []).append(n)
    out: dict[str, int] = {}
    for cluster, group in members.items():
        gang = largest.get(cluster, 0)
        out[cluster] = 0 if gang <= 0 else unusable_gpus(
            CapacityIndex(group, {n.id: used[n.id] for n in group if n.id in used}, "best_fit"), gang)
    return out

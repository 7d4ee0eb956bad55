"""Gang-aware packing of one-node work (DESIGN.md "Placement": "plan protection expiries so that
large gangs and host drains get whole domains"; "Fragmentation is a measured figure"; ADR 0013).

A waiting whole-node gang can take a node *at once* when nothing firm holds it: every GPU on it is
free, or held by unfunded work (preemptible at once) or by work already leaving. Call such a node
*gang-ready*. Best fit alone breaks gang-ready nodes whenever they have the fewest free GPUs that
hold a small job, and a funded small job placed there makes the node firm for its protection. So a
funded one-node job goes, best fit, to a node that already holds firm (funded, not leaving) work;
only when none has room does it go to a wholly free node, and last to a node of unfunded work.
Unfunded work does the opposite: it keeps beside other unfunded work, then takes room on a firm
node, and breaks a wholly free node last. So firm and unfunded work do not mix,
and a node of unfunded work can be cleared for a gang at once. Whether a job fits at all is
unchanged: only the choice among fitting nodes.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Set

from steward.policy.model import RunningJob
from steward.policy.placement import CapacityIndex


class FirmLoad:
    """GPUs held on each node (index order of a `CapacityIndex`) by firm work: funded jobs not
    leaving, this cycle's funded placements included. A node with none is gang-ready.

    It also keeps the nodes that packing chooses among, so that a choice costs a few heap looks
    instead of a walk over every node (ADR 0013, "Speed"): for each side (firm or gang-ready) and
    free count, a heap of the nodes with room that are not wholly free, and for each capacity a heap
    of the wholly free nodes, both in topology order. Entries are checked when they reach the top of
    a heap and dropped when the node changed since; every change of a node's free count or side goes
    through `add`, which pushes the node again (a cycle never unmasks a node)."""

    __slots__ = ("cap", "firm", "free", "ok", "partial", "whole")

    def __init__(self, index: CapacityIndex, running: Iterable[RunningJob], leaving: Set[str]) -> None:
        self.firm: list[int] = [0] * len(index.ids)
        pos = index.pos
        for job in running:
            if not job.funded or job.preemption_requested_at is not None or job.id in leaving:
                continue
            for nid, g in job.placement:
                i = pos.get(nid)
                if i is not None:
                    self.firm[i] += g
        self.free, self.ok, self.cap = index.free, index.ok, index.cap
        top = max(self.cap, default=0) + 1
        self.partial: list[list[list[int]]] = [[[] for _ in range(top)], [[] for _ in range(top)]]
        """partial[side][f]: nodes with `f` free GPUs, some in use, on `side` (1: firm, 0: ready)."""
        self.whole: list[list[int]] = [[] for _ in range(top)]
        """whole[c]: wholly free nodes of capacity `c`."""
        for i in range(len(self.free)):  # in index order: each list is sorted, hence already a heap
            self._file(i, False)

    def ready(self, i: int) -> bool:
        """ADR 0013: a node a waiting gang could take at once (nothing firm on it)."""
        return self.firm[i] == 0

    def add(self, nodes: Iterable[tuple[int, int]], funded: bool) -> None:
        """Record a placement of this cycle (its GPUs already taken from the index): funded work
        makes its nodes firm."""
        for i, g in nodes:
            if funded:
                self.firm[i] += g
            self._file(i, True)

    def _file(self, i: int, push: bool) -> None:
        if not self.ok[i]:
            return
        f, c = self.free[i], self.cap[i]
        if f == c:
            if f > 0:
                (heapq.heappush(self.whole[c], i) if push else self.whole[c].append(i))
        elif f > 0:
            side = self.partial[1 if self.firm[i] > 0 else 0][f]
            (heapq.heappush(side, i) if push else side.append(i))

    def best_partial(self, gpus: int, firm: bool) -> int:
        """The visible node on one side with the fewest free GPUs that still holds `gpus` and is not
        wholly free (ties: topology order). -1 if none."""
        heaps = self.partial[1 if firm else 0]
        free, ok, cap, load = self.free, self.ok, self.cap, self.firm
        for f in range(gpus, len(heaps)):
            h = heaps[f]
            while h:
                i = h[0]
                if ok[i] and free[i] == f and f < cap[i] and (load[i] > 0) == firm:
                    return i
                heapq.heappop(h)
        return -1

    def first_whole(self, gpus: int) -> int:
        """The first visible, wholly free node (topology order) that holds `gpus`. -1 if none."""
        best = -1
        free, ok = self.free, self.ok
        for c in range(gpus, len(self.whole)):
            h = self.whole[c]
            while h:
                i = h[0]
                if ok[i] and free[i] == c:
                    if best < 0 or i < best:
                        best = i
                    break
                heapq.heappop(h)
        return best


def pack_single(index: CapacityIndex, gpus: int, load: FirmLoad, funded: bool = True) -> int:
    """ADR 0013 (DESIGN.md "Placement ... best fit"): the node for a one-node job of `gpus` GPUs.
    Funded work: best fit among visible nodes holding firm work; if none holds it, a wholly free
    node (it becomes firm, and the next funded work packs beside it), and only then a node of
    unfunded work.
    Unfunded work keeps beside other unfunded work (best fit), then takes room on a firm node, and
    breaks a wholly free node last, so that a node of unfunded work can be cleared at once and whole
    nodes stay whole. -1 when no visible node holds
    it (exactly when `index.best_single` finds none)."""
    i = index.best_single(gpus)
    if i < 0:
        return i
    free, cap = index.free, index.cap
    if (load.firm[i] > 0) == funded and free[i] < cap[i]:
        return i  # the best fit is on its own side already
    own = load.best_partial(gpus, funded)
    if own >= 0:
        return own
    if funded:
        # no firm node has room: a wholly free node before one of unfunded work (which would then
        # hold unfunded work no gang can clear while the firm job is protected)
        whole = load.first_whole(gpus)
        return whole if whole >= 0 else i
    # unfunded work with no room beside other unfunded work: room on a firm node before breaking a
    # wholly free one (no ready node has room, so the best partial node is a firm one)
    if free[i] < cap[i]:
        return i
    mixed = load.best_partial(gpus, True)
    return mixed if mixed >= 0 else i

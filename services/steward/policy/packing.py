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

from collections.abc import Iterable, Set

from steward.policy.model import RunningJob
from steward.policy.placement import CapacityIndex


class FirmLoad:
    """GPUs held on each node (index order of a `CapacityIndex`) by firm work: funded jobs not
    leaving, this cycle's funded placements included. A node with none is gang-ready."""

    __slots__ = ("firm", "miss", "ready_miss")

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
        self.miss = 1 << 30
        """Smallest size with no firm node holding it (firm room only shrinks, until a funded job
        lands on a gang-ready node and makes it firm)."""
        self.ready_miss = 1 << 30
        """Smallest size with no gang-ready node holding it (their room only shrinks in a cycle)."""

    def ready(self, i: int) -> bool:
        """ADR 0013: a node a waiting gang could take at once (nothing firm on it)."""
        return self.firm[i] == 0

    def add(self, nodes: Iterable[tuple[int, int]], funded: bool) -> None:
        """Record a placement of this cycle: funded work makes its nodes firm."""
        if not funded:
            return
        for i, g in nodes:
            if self.firm[i] == 0:
                self.miss = 1 << 30  # a new firm node: it may have room
            self.firm[i] += g


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
    free, ok, firm, cap = index.free, index.ok, load.firm, index.cap
    if (firm[i] > 0) == funded and free[i] < cap[i]:
        return i  # the best fit is on its own side already
    if gpus < (load.miss if funded else load.ready_miss):
        best, best_free = -1, 1 << 30
        for j in range(len(free)):
            f = free[j]
            if ok[j] and (firm[j] > 0) == funded and gpus <= f < best_free and f < cap[j]:
                best, best_free = j, f
        if best >= 0:
            return best
        if funded:
            load.miss = gpus
        else:
            load.ready_miss = gpus
    if funded:
        # no firm node has room: a wholly free node before one of unfunded work (which would then
        # hold unfunded work no gang can clear while the firm job is protected)
        whole = next((j for j in range(len(free)) if ok[j] and free[j] == cap[j] >= gpus), -1)
        return whole if whole >= 0 else i
    # unfunded work with no room beside other unfunded work: room on a firm node before breaking a
    # wholly free one
    if free[i] < cap[i]:
        return i
    mixed = -1
    for j in range(len(free)):
        if ok[j] and gpus <= free[j] < cap[j] and (mixed < 0 or free[j] < free[mixed]):
            mixed = j
    return mixed if mixed >= 0 else i

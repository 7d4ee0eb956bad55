"""A waiting job moved to another cluster before it starts when that is strictly better (issue 25; ADR 0068;
steward.policy.routing `stays_in_room`), hand-computed.

A waiting job is not pinned to a cluster: every cycle routes it afresh, so it starts on whichever cluster
fits it first. Its one commitment is a room being made for it (victims in their grace, ADR 0028): it takes
that room when it fits there now, and moves only when another cluster takes it now and its room is not free
yet, with the evidence "moved from jupiter to ceres: would wait 0 s there against ..."."""

from __future__ import annotations

from typing import Any

import pytest

from steward.policy.cycle import schedule
from steward.policy.model import Node, RunningJob
from steward.policy.routing import stays_in_room
from tests.unit.policy.builders import NOW, check_routing, pending, placed, running, snapshot


def two(ceres_gpus: int = 4, jupiter_gpus: int = 8) -> tuple[Node, ...]:
    return (Node("c0", ceres_gpus, "H100", ("ceres",), "ready", "ceres"),
            Node("j0", jupiter_gpus, "A100", ("jupiter",), "ready", "jupiter"))


@pytest.mark.parametrize(("room", "fits_now", "chosen", "goes"), [
    (None, ["ceres", "jupiter"], "ceres", "ceres"),  # no room being made: the usual choice
    ("jupiter", ["ceres", "jupiter"], "ceres", "jupiter"),  # its room fits now: it stays (an equal wait)
    ("jupiter", ["ceres"], "ceres", "ceres"),  # its room is not free yet: now elsewhere is strictly better
    ("jupiter", ["jupiter"], "jupiter", "jupiter"),
])
def test_a_job_leaves_the_room_made_for_it_only_for_a_strictly_shorter_wait(
        room: str | None, fits_now: list[str], chosen: str, goes: str) -> None:
    assert stays_in_room(room, fits_now, chosen) == goes


def busy(id: str, node: str, gpus: int, protected_left: float = 2400.0) -> RunningJob:
    return running(id, "b", gpus, on=node, started_at=NOW - 600, protected_for=600 + protected_left)


@pytest.mark.parametrize(("freed", "goes"), [("c0", "c0"), ("j0", "j0")])
def test_a_waiting_job_is_routed_afresh_every_cycle_to_the_cluster_that_frees_first(freed: str, goes: str) -> None:
    """Cycle 1: both clusters full, `p` waits (no preemption: the jobs there are protected). Cycle 2: one of
    them ends; `p` starts there, whichever it is: nothing held it to a first choice."""
    full = [busy("x", "c0", 4), busy("y", "j0", 8)]
    first = schedule(snapshot(two(), running=full, pending=[pending("p", "a", 4)]))
    assert placed(first) == {} and first.preemptions == ()
    left = [r for r in full if r.placement[0][0] != freed]
    snap = snapshot(two(), running=left, pending=[pending("p", "a", 4)], now=NOW + 60)
    second = schedule(snap)
    assert placed(second) == {"p": ((goes, 4),)}
    (routing,) = check_routing(snap, second)
    assert "moved_from" not in routing  # nothing to move from: it was waiting on no cluster


def in_grace(id: str, node: str, gpus: int, requested_s_ago: float = 5.0) -> RunningJob:
    """An unfunded victim in its grace (20 s by default) for `p`."""
    return running(id, "b", gpus, on=node, funded=False, preemption_requested_at=NOW - requested_s_ago,
                   claimed_for="p")


ROOMS: list[tuple[str, list[RunningJob], dict[str, Any], str | None, str | None]] = [
    # (case, running jobs, where p goes (None: its room is held), the routing reason, the evidence key)
    ("its room is not free yet, ceres takes it now: moved",
     [in_grace("v", "j0", 8)], {"p": (("c0", 4),)},
     "moved from jupiter to ceres (H100): would wait 0 s there against an estimated 15 s on jupiter", "room_left"),
    ("its room fits now (4 of jupiter's 8 free) and so does ceres, a tighter fit: it stays",
     [in_grace("v", "j0", 4)], {"p": (("j0", 4),)},
     "placed on jupiter (A100): would wait 0 s there against it would also start now on ceres (a looser fit)",
     "claimed_room"),
    ("its room is not free yet and ceres is busy: the room is held, nothing moves",
     [in_grace("v", "j0", 8), busy("x", "c0", 4)], {}, None, None),
]


@pytest.mark.parametrize(("case", "jobs", "goes", "reason", "key"), ROOMS, ids=[r[0] for r in ROOMS])
def test_a_job_whose_room_is_being_made_moves_only_when_strictly_better(
        case: str, jobs: list[RunningJob], goes: dict[str, Any], reason: str | None, key: str | None) -> None:
    snap = snapshot(two(), running=jobs, pending=[pending("p", "a", 4)])
    result = schedule(snap)
    assert placed(result) == goes, case
    assert result.preemptions == ()  # never a second room for it
    if not goes:
        assert result.evidence["rooms_held"] == ["p"]
        assert result.explanations["p"].evidence["room_held"] is True
        return
    (routing,) = check_routing(snap, result)
    assert routing["reason"] == reason
    evidence = result.placements[0].evidence
    assert evidence[key]["victims_leaving"] == ["v"]
    assert ("moved_from" in routing) == (key == "room_left")
    if key == "room_left":
        assert routing["moved_from"] == evidence[key]["cluster"] == "jupiter"
        assert "claimed_room" not in evidence


def test_moved_at_most_once_it_never_flaps() -> None:
    """Cycles in a row: its room is held on jupiter while ceres is busy; ceres frees and it moves there; the
    next cycle it is running, not waiting, so no cycle routes it again (a placement is final)."""
    victim = in_grace("v", "j0", 8)
    held = schedule(snapshot(two(), running=[victim, busy("x", "c0", 4)], pending=[pending("p", "a", 4)]))
    assert placed(held) == {}
    moved = schedule(snapshot(two(), running=[victim], pending=[pending("p", "a", 4)], now=NOW + 2))
    assert placed(moved) == {"p": (("c0", 4),)}
    after = schedule(snapshot(two(), running=[victim, running("p", "a", 4, on="c0", started_at=NOW + 3)],
                              now=NOW + 4))
    assert placed(after) == {} and after.preemptions == ()


def test_the_wait_elsewhere_counts_a_leaving_jobs_grace_not_its_past_protection() -> None:
    """The estimate on jupiter: its victim's protection ended long ago, but it leaves at its grace's end
    (requested 5 s ago, 20 s of grace: 15 s), not now."""
    result = schedule(snapshot(two(), running=[in_grace("v", "j0", 8)], pending=[pending("p", "a", 4)]))
    routing = result.placements[0].evidence["routing"]
    assert [c["estimated_wait_s"] for c in routing["candidates"]] == [0.0, 15.0]

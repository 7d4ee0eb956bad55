"""Interactive sessions (DESIGN.md "Interactive sessions") and draining (issue 3 "Draining")."""

from __future__ import annotations

import pytest

from steward.domain.policy_settings import PolicySettings
from steward.policy.cycle import schedule
from steward.policy.sessions import session_cap_at, session_warning_times
from tests.unit.policy.builders import HOUR, NOW, node, nodes, pending, placed, preempted, running, snapshot, tree

CAP = 8 * HOUR


def session(id="s", started_at=NOW - 1000, **kw):
    return running(id, "a", 1, started_at=started_at, protected_for=CAP, klass="interactive", **kw)


@pytest.mark.parametrize(
    ("started_at", "at_cap", "stopped"),
    [
        (NOW - CAP + 1, "stop", False),
        (NOW - CAP, "stop", True),
        (NOW - CAP - 10, "preemptible", False),
    ],
)
def test_sessions_stop_at_their_cap(started_at, at_cap, stopped):
    s = PolicySettings(session_at_cap=at_cap)
    result = schedule(snapshot(running=[session(started_at=started_at)], settings=s))
    stops = [(x.job_id, x.reason, x.checkpoint, x.requeue) for x in result.stops]
    assert stops == ([("s", "session_cap", True, False)] if stopped else [])


def test_a_session_past_its_cap_is_preemptible_when_policy_says_so():
    s = PolicySettings(session_at_cap="preemptible")
    old = running("s", "b", 8, started_at=NOW - CAP - 10, protected_for=CAP, klass="interactive")
    result = schedule(snapshot(running=[old], pending=[pending("pa", "a", 8)], usage={"b": 1e8}, settings=s))
    assert preempted(result) == {"s": "pa"}


def test_session_warnings_and_cap():
    job = session(started_at=1000.0)
    assert session_cap_at(job, PolicySettings()) == 1000.0 + CAP
    assert session_warning_times(job, PolicySettings()) == (1000.0 + CAP - 1800, 1000.0 + CAP - 300)


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        ({"n1": 7}, "n1"),  # the previous node has room: back there, though best fit differs
        ({"n1": 8, "n2": 5}, "n0"),  # no room: the node with the most free capacity
    ],
)
def test_restore_goes_to_the_previous_node_else_the_most_free(used, expected):
    ns = nodes(3)
    fill = [running(f"f{k}", "b", g, on=k, funded=False, started_at=NOW) for k, g in used.items()]
    fill.append(running("f0", "b", 4, on="n0", funded=False, started_at=NOW))  # n0: 4 free
    if expected == "n0":
        fill[-1] = running("f0", "b", 1, on="n0", funded=False, started_at=NOW)  # n0: 7 free (most)
    restore = pending("s", "a", 1, klass="interactive", min_runtime_s=0, previous_node="n1")
    result = schedule(snapshot(nodes=ns, running=fill, pending=[restore]))
    assert placed(result)["s"] == ((expected, 1),)
    assert result.placements[0].evidence["rule"] in ("previous_node", "most_free")
    assert result.placements[0].protected_until == NOW + CAP


@pytest.mark.parametrize(("state", "stopped"), [
    ("draining", [("done", "drain", False, True)]),  # emptied for repair once protection ends
    # the executor lost an attempt and has not spoken since: no new work, but nothing stopped (issue 26's
    # bench: one lost pod made every node of its executor unhealthy and the next cycle stopped 298 jobs)
    ("unhealthy", []),
])
def test_drained_nodes_take_no_work_and_empty_after_protection(state, stopped):
    ns = (node("n0", state=state), node("n1"))
    jobs = [
        running("protected", on="n0", started_at=NOW - 10, protected_for=HOUR),
        running("done", on="n0", started_at=NOW - 2 * HOUR, protected_for=HOUR, resumable=False),
        running("elsewhere", on="n1", started_at=NOW - 2 * HOUR),
    ]
    result = schedule(snapshot(nodes=ns, running=jobs, pending=[pending("p", "a", 8)]))
    assert [(s.job_id, s.reason, s.checkpoint, s.requeue) for s in result.stops] == stopped
    assert placed(result) == {}  # n1 has 7 free; n0 takes no new work
    assert result.explanations["p"].blocking_gpus == 1


def test_unfunded_work_on_an_unhealthy_node_is_neither_stopped_nor_preempted_for_nothing():
    """Unfunded work out of protection on every node of a suspected executor, nothing waiting: the
    cycle decides nothing at all (before: a drain stop for every job)."""
    ns = tuple(node(f"n{i}", state="unhealthy") for i in range(4))
    jobs = [running(f"u{i}", on=f"n{i}", started_at=NOW - 60, protected_for=0, funded=False) for i in range(4)]
    result = schedule(snapshot(nodes=ns, running=jobs, pending=[]))
    assert (result.stops, result.preemptions, result.placements) == ((), (), ())


def test_jobs_on_vanished_nodes_are_stopped_after_protection():
    result = schedule(snapshot(running=[running("ghost", on="n9")]))
    assert [s.job_id for s in result.stops] == ["ghost"]


def test_a_cluster_of_draining_nodes_is_explained():
    result = schedule(snapshot(nodes=(node("n0", state="draining"),), pending=[pending("p", gpus=1)], tree=tree(a=1.0)))
    assert result.explanations["p"].reason == "too_large"

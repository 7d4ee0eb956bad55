"""Which events tell whom what (issue 24 "Being told"; steward.domain.notifications, ADR 0050)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain import budget
from steward.domain.commands import (
    PlaceJob,
    ReachSessionCap,
    RecordDeliveryFailed,
    RegisterNode,
    ReportJobExited,
    ReportJobLost,
    RequestPreemption,
    SetAllocations,
    SetNotifications,
    WarnSession,
)
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import DomainError, InvalidCommand, UnknownProject
from steward.domain.notifications import (
    KINDS,
    Notice,
    Subscription,
    apply_notifications_set,
    deliveries,
    delivery_id,
    notices_for,
    target_problem,
)
from steward.domain.state import LedgerState, evolve
from tests.unit.domain.builders import apply, running, small_cluster, submit
from tests.unit.domain.test_sessions_nodes_periods import session


def told(state: LedgerState, command: Any, now: float, kinds: Any = None) -> list[tuple[str, tuple[str, ...]]]:
    """(kind, allocations) of each notice the command's events give."""
    out = []
    for ev in decide(state, command, now):
        after = evolve(state, ev, now)
        out += [(n.kind, n.allocations) for n in notices_for(state, ev, after, kinds)]
        state = after
    return out


def unfunded_placed() -> LedgerState:
    state = apply(small_cluster(), submit("j1", project="b1", gpus=1), now=0.0)
    return apply(state, PlaceJob("j1", {"n0": [0]}, funded=False), now=1.0)


# (case, state, command, now, the notices)
RULES: list[tuple[str, Any, Any, float, list[tuple[str, tuple[str, ...]]]]] = [
    ("a cap warning", lambda: session(), WarnSession("j1", 1, "cap", 30.0), 31.0,
     [("session_warning", ("a1",))]),
    ("an idle warning", lambda: session(), WarnSession("j1", 1, "idle", 300.0), 31.0,
     [("session_warning", ("a1",))]),
    ("the cap reached", lambda: session(), ReachSessionCap("j1", 1, "stop"), 61.0, [("session_cap", ("a1",))]),
    ("a preemption asked after protection", lambda: running(at=0.0), RequestPreemption("j1", "fair_share",
     evidence={"waiting": "j9"}, for_job_id="j9"), 10_000.0, [("preemption", ("a1",))]),
    ("a funded start says nothing", lambda: apply(small_cluster(), submit(), PlaceJob("j1", {"n0": [0]}, True)),
     "start", 5.0, []),
    ("an unfunded start", unfunded_placed, "start", 5.0, [("started_unfunded", ("b1",))]),
    ("a failure", lambda: running(), ReportJobExited("j1", 1, 3), 200.0, [("job_failed", ("a1",))]),
    ("a completion says nothing", lambda: running(), ReportJobExited("j1", 1, 0), 200.0, []),
    ("a loss", lambda: running(), ReportJobLost("j1", 1, "heartbeat timeout"), 200.0, [("job_lost", ("a1",))]),
    ("a share changed", small_cluster, SetAllocations("a", {"a1": 0.5}, "rebalance"), 1.0,
     [("share_changed", ("a", "a1"))]),
    ("a new child", small_cluster, SetAllocations("b", {"b2": 0.5}, "new team"), 1.0,
     [("share_changed", ("b", "b2"))]),
    ("a share set to what it was says nothing", small_cluster, SetAllocations("a", {"a1": 1.0}, "same"), 1.0, []),
    # b1 is entitled to 0.4 x 0.5 x 8 = 1.6 GPUs: 2 GPUs placed put its burn at 125 %, b's (3.2) stays under
    ("a placement over the entitlement", small_cluster, "place-2-on-b1", 1.0, [("burn_forecast", ("b1",))]),
    ("a placement within it says nothing", small_cluster, "place-1-on-b1", 1.0, []),
    # a1 runs 4 of its 4.8 GPUs; cutting a's share to 0.25 leaves a and a1 2 GPUs each
    ("a share cut under what runs", lambda: running(gpus=4), SetAllocations("cluster", {"a": 0.25}, "cut"), 300.0,
     [("share_changed", ("cluster", "a")), ("burn_forecast", ("a",)), ("burn_forecast", ("a1",))]),
    ("capacity joining lowers the burn: nothing", lambda: running(gpus=4), RegisterNode("n1", 8, "V100", ["b0", "n1"]),
     300.0, []),
]


def _command(state: LedgerState, command: Any) -> tuple[LedgerState, Any]:
    from steward.domain.commands import ReportJobStarted

    if command == "start":
        return state, ReportJobStarted("j1", state.jobs["j1"].attempt, 42, started_at=5.0)
    if isinstance(command, str) and command.startswith("place-"):
        gpus = int(command.split("-")[1])
        state = apply(state, submit("j1", project="b1", gpus=gpus), now=0.0)
        return state, PlaceJob("j1", {"n0": list(range(gpus))}, funded=True)
    return state, command


@pytest.mark.parametrize(("case", "build", "command", "now", "expected"), RULES, ids=[r[0] for r in RULES])
def test_which_events_tell_what(case: str, build: Any, command: Any, now: float,
                                expected: list[tuple[str, tuple[str, ...]]]) -> None:
    state, cmd = _command(build(), command)
    assert told(state, cmd, now) == expected


def test_only_the_kinds_asked_are_computed() -> None:
    state, cmd = _command(small_cluster(), "place-2-on-b1")
    assert told(state, cmd, 1.0, kinds={"job_failed"}) == []
    assert told(state, cmd, 1.0, kinds={"burn_forecast"}) == [("burn_forecast", ("b1",))]


def test_a_preemption_notice_carries_the_reason_and_the_decisions_evidence() -> None:
    state = running(at=0.0)
    (ev,) = decide(state, RequestPreemption("j1", "fair_share", evidence={"waiting_ratio": 0.2}, for_job_id="j9"),
                   10_000.0)
    (notice,) = notices_for(state, ev, evolve(state, ev, 10_000.0))
    assert notice.facts["reason"] == "fair_share" and notice.facts["for_job_id"] == "j9"
    assert notice.facts["evidence"]["waiting_ratio"] == 0.2 and "protected_until" in notice.facts["evidence"]
    assert "fair_share" in notice.title and "j9" in notice.title


@pytest.mark.parametrize(("evidence", "words"), [
    ({}, "(operator)"),
    ({"requested_by": "user-maria", "requested_by_name": "Maria Manager", "note": "the review needs them"},
     "(operator: the review needs them; asked by Maria Manager (user-maria))"),
    ({"requested_by": "tok-7", "note": "make room"}, "(operator: make room; asked by tok-7)"),
])
def test_a_requeue_a_person_asked_for_says_their_words_and_name(evidence: dict[str, str], words: str) -> None:
    state = running(at=0.0)
    (ev,) = decide(state, RequestPreemption("j1", "operator", evidence=evidence), 10_000.0)
    (notice,) = notices_for(state, ev, evolve(state, ev, 10_000.0))
    assert notice.title.startswith(f"Job j1 (a1) is being preempted {words}: checkpoint within"), notice.title


@pytest.mark.parametrize(("by", "title"), [
    ("Maria Manager (user-maria)", "Shares under a changed by Maria Manager (user-maria): a1 100% -> 50%"),
    ("", "Shares under a changed: a1 100% -> 50%"),
])
def test_a_share_change_names_who_changed_it(by: str, title: str) -> None:
    state = small_cluster()
    (ev,) = decide(state, SetAllocations("a", {"a1": 0.5}, "rebalance"), 1.0)
    (notice,) = notices_for(state, ev, evolve(state, ev, 1.0), by=by)
    assert notice.title == title
    assert notice.facts.get("by", "") == by and notice.facts["reason"] == "rebalance"
    # a job's notice names no recorder: its events are the executors' and the scheduler's
    failed = running()
    (exited,) = decide(failed, ReportJobExited("j1", 1, 3), 200.0)
    (fail,) = notices_for(failed, exited, evolve(failed, exited, 200.0), by=by)
    assert "by" not in fail.facts


def sub(who: str, allocation: str, kinds: set[str], channel: str = "email", target: str = "") -> Subscription:
    return Subscription(who, allocation, channel, target or f"{who}@lab.example", frozenset(kinds))


PARENTS = {"a": "cluster", "a1": "a", "a2": "a", "b": "cluster", "b1": "b"}

# (case, subscriptions, notice, who receives it)
ROUTES: list[tuple[str, list[Subscription], Notice, list[str]]] = [
    ("the project's own", [sub("r", "a1", {"job_failed"})], Notice("job_failed", ("a1",), "t", "j1"), ["r"]),
    ("a manager of the subtree", [sub("m", "a", {"job_failed"})], Notice("job_failed", ("a1",), "t", "j1"), ["m"]),
    ("the whole tree", [sub("op", "cluster", {"job_failed"})], Notice("job_failed", ("b1",), "t"), ["op"]),
    ("another subtree hears nothing", [sub("m", "b", {"job_failed"})], Notice("job_failed", ("a1",), "t"), []),
    ("a sibling hears nothing", [sub("r", "a2", {"job_failed"})], Notice("job_failed", ("a1",), "t"), []),
    ("a kind not chosen", [sub("r", "a1", {"job_lost"})], Notice("job_failed", ("a1",), "t"), []),
    ("a share change under a's manager", [sub("m", "a", {"share_changed"})],
     Notice("share_changed", ("a", "a1"), "t"), ["m"]),
    ("a share change of a's own share reaches a's manager", [sub("m", "a", {"share_changed"})],
     Notice("share_changed", ("cluster", "a"), "t"), ["m"]),
    ("two matching subscriptions, one target: once", [sub("m", "a", {"job_failed"}), sub("m", "a1", {"job_failed"})],
     Notice("job_failed", ("a1",), "t"), ["m"]),
    ("one subscriber, two targets: each", [sub("m", "a", {"job_failed"}),
                                          sub("m", "a1", {"job_failed"}, "webhook", "https://hooks.example/x")],
     Notice("job_failed", ("a1",), "t"), ["m", "m"]),
]


@pytest.mark.parametrize(("case", "subs", "notice", "expected"), ROUTES, ids=[r[0] for r in ROUTES])
def test_who_receives_a_notice(case: str, subs: list[Subscription], notice: Notice, expected: list[str]) -> None:
    got = deliveries([notice], {s.key: s for s in subs}, PARENTS, 7)
    assert [d.subscriber for d in got] == expected
    assert len({d.delivery_id for d in got}) == len(got)


def test_a_delivery_id_is_the_same_however_often_it_is_derived_and_differs_per_target() -> None:
    subs = {s.key: s for s in [sub("r", "a1", {"job_failed"})]}
    notice = Notice("job_failed", ("a1",), "Job j1 failed", "j1", {"exit_code": 3})
    first, again = deliveries([notice], subs, PARENTS, 9), deliveries([notice], subs, PARENTS, 9)
    assert first == again
    assert first[0].delivery_id != deliveries([notice], subs, PARENTS, 10)[0].delivery_id
    assert delivery_id(9, notice.key, "r", "email", "x@y.z") != delivery_id(9, notice.key, "r", "email", "w@y.z")
    assert "exit_code: 3" in first[0].text and "steward why j1" in first[0].text


def test_subscriptions_fold_replaces_kinds_and_none_removes() -> None:
    p = {"subscriber": "r", "allocation": "a1", "channel": "email", "target": "r@x.org"}
    subs = apply_notifications_set({}, p | {"kinds": ["job_failed"]})
    subs = apply_notifications_set(subs, p | {"kinds": ["job_lost", "preemption"]})
    assert [s.kinds for s in subs.values()] == [frozenset({"job_lost", "preemption"})]
    assert apply_notifications_set(subs, p | {"kinds": []}) == {}


def setn(**over: Any) -> SetNotifications:
    base: dict[str, Any] = dict(subscriber="alice", allocation="a1", channel="email", target="alice@lab.example",
                                kinds=["job_failed"])
    return SetNotifications(**(base | over))


# (case, command, error, message)
GUARDS: list[tuple[str, SetNotifications, type[DomainError], str]] = [
    ("unknown allocation", setn(allocation="zz"), UnknownProject, "zz"),
    ("unknown kind", setn(kinds=["gossip"]), InvalidCommand, "gossip"),
    ("a kind twice", setn(kinds=["job_failed", "job_failed"]), InvalidCommand, "twice"),
    ("unknown channel", setn(channel="pigeon"), InvalidCommand, "channel"),
    ("two addresses", setn(target="a@x.org, b@x.org"), InvalidCommand, "e-mail"),
    ("a header in the address", setn(target="a@x.org\r\nBcc: all@x.org"), InvalidCommand, "e-mail"),
    ("a webhook that is no URL", setn(channel="webhook", target="ftp://x"), InvalidCommand, "URL"),
    ("no subscriber", setn(subscriber=" "), InvalidCommand, "subscriber"),
]


@pytest.mark.parametrize(("case", "command", "error", "message"), GUARDS, ids=[g[0] for g in GUARDS])
def test_set_notifications_guards(case: str, command: SetNotifications, error: type[DomainError],
                                  message: str) -> None:
    with pytest.raises(error, match=message):
        decide(small_cluster(), command, 1.0)


def test_set_notifications_is_recorded_in_the_subscribers_stream() -> None:
    (ev,) = decide(small_cluster(), setn(kinds=["preemption", "job_failed"]), 1.0)
    assert ev.stream == "notify-alice" and ev.type == "NotificationsSet"
    assert ev.payload["kinds"] == ["job_failed", "preemption"]
    (whole,) = decide(small_cluster(), setn(allocation="cluster", channel="webhook", target="http://127.0.0.1:9/h",
                                            kinds=list(KINDS)), 1.0)
    assert whole.payload["allocation"] == "cluster"


def test_a_delivery_given_up_is_recorded_once_in_its_own_stream() -> None:
    cmd = RecordDeliveryFailed("n7-abc", "alice", "webhook", "https://h.example", "job_failed", 7, 8, "HTTP 503")
    (ev,) = decide(LedgerState(), cmd, 5.0)
    assert ev.stream == "delivery-n7-abc" and ev.payload["attempts"] == 8 and ev.payload["failed_at"] == 5.0
    assert decide_or_reject(LedgerState(), RecordDeliveryFailed("", "a", "email", "x", "job_failed", 1, 1, ""),
                            5.0)[0].type == "CommandRejected"


@given(st.text(max_size=60))
def test_a_target_is_accepted_only_without_line_breaks(target: str) -> None:
    for channel in ("email", "webhook"):
        if target_problem(channel, target) is None:
            assert "\n" not in target and "\r" not in target and " " not in target


@given(st.floats(min_value=0, max_value=1e6), st.floats(min_value=0, max_value=1e6))
def test_burn_is_over_the_entitlement_exactly_when_running_exceeds_it(running_gpus: float, entitled: float) -> None:
    assert budget.over_entitlement(budget.burn(running_gpus, entitled)) == (entitled > 0 and running_gpus > entitled)


def test_the_recorded_events_match_their_schemas() -> None:
    from steward.store.upcasting import validate

    for cmd in (setn(kinds=list(KINDS)), setn(kinds=[]),
                RecordDeliveryFailed("n7-abc", "alice", "email", "a@x.org", "job_lost", 7, 2, "x" * 900)):
        for ev in decide(small_cluster(), cmd, 5.0):
            validate(ev.type, 1, ev.payload)


NAMES = st.sampled_from(["cluster", "a", "a1", "a2", "b", "b1"])
SUBS = st.lists(st.builds(lambda who, alloc, ch, kinds: sub(who, alloc, set(kinds), ch,
                                                            "https://h.example/x" if ch == "webhook" else ""),
                          st.sampled_from(["r", "m", "op"]), NAMES, st.sampled_from(["email", "webhook"]),
                          st.sets(st.sampled_from(sorted(KINDS)), min_size=1)), max_size=8)


@given(SUBS, st.lists(NAMES.filter(lambda n: n != "cluster"), min_size=1, max_size=3),
       st.sampled_from(sorted(KINDS)))
def test_a_notice_reaches_exactly_those_following_it_once_per_target(
        subs: list[Subscription], concerns: list[str], kind: str) -> None:
    notice = Notice(kind, tuple(concerns), "t")
    table = {s.key: s for s in subs}
    got = deliveries([notice], table, PARENTS, 3)

    def above(name: str) -> set[str]:
        out = {"cluster"}
        while name in PARENTS:
            out.add(name)
            name = PARENTS[name]
        return out

    followed = set().union(*(above(c) for c in concerns))
    expected = {(s.subscriber, s.channel, s.target) for s in table.values()
                if kind in s.kinds and s.allocation in followed}
    assert sorted((d.subscriber, d.channel, d.target) for d in got) == sorted(expected)


@given(st.lists(st.tuples(st.sampled_from(["a1", "b1"]), st.sets(st.sampled_from(sorted(KINDS)))), max_size=10))
def test_the_fold_keeps_the_last_choice_per_target(choices: list[tuple[str, set[str]]]) -> None:
    subs: dict[tuple[str, str, str, str], Subscription] = {}
    last: dict[str, set[str]] = {}
    for allocation, kinds in choices:
        subs = apply_notifications_set(subs, {"subscriber": "r", "allocation": allocation, "channel": "email",
                                              "target": "r@x.org", "kinds": sorted(kinds)})
        last[allocation] = kinds
    assert {s.allocation: set(s.kinds) for s in subs.values()} == {a: k for a, k in last.items() if k}

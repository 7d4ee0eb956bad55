"""One source for the contract's knobs: the recorded policy (`steward policy set`) reaches new runs.

The scheduler plans with the `PolicySet` settings; the workflows used to read only the worker's
STEWARD_CONTRACT_* environment. The dispatcher now freezes the recorded policy's values into each new
run's input (deterministic: the input is in the history), with the environment as the default for what
the policy does not set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from steward_workflows.dispatcher import RecordedPolicy, job_run_input
from steward_workflows.payloads import ContractTimings
from steward_workflows.settings import ContractSettings, with_recorded_policy

ENV = ContractSettings(grace_s=30.0, session_warnings_s="600,60", session_at_cap="stop")


@dataclass(frozen=True)
class Case:
    name: str
    policy: dict[str, Any]
    grace_s: float
    warnings: list[float]
    at_cap: str


CASES = [
    Case("no policy recorded: the environment", {}, 30.0, [600.0, 60.0], "stop"),
    Case("policy sets the warnings", {"session_warnings_s": [15.0, 2.5]}, 30.0, [15.0, 2.5], "stop"),
    Case("policy sets the grace", {"preemption_grace_s": 1.0}, 1.0, [600.0, 60.0], "stop"),
    Case("policy makes sessions preemptible at the cap", {"session_at_cap": "preemptible"}, 30.0,
         [600.0, 60.0], "preemptible"),
    Case("knobs the workflows do not keep are ignored", {"window_s": 3600.0, "lane": False}, 30.0,
         [600.0, 60.0], "stop"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_recorded_policy_overrides_the_environment(case: Case) -> None:
    t = ENV.timings(case.policy)
    assert (t.grace_s, t.session_warnings_s, t.session_at_cap) == (case.grace_s, case.warnings, case.at_cap)
    # the rest stays the environment's
    assert (t.heartbeat_timeout_s, t.lost_after_s, t.idle_limit_s) == (
        ENV.heartbeat_timeout_s, ENV.lost_after_s, ENV.idle_limit_s)


def test_an_empty_policy_leaves_the_timings_equal() -> None:
    base = ContractTimings()
    assert with_recorded_policy(base, {}) == base


def placed(job_id: str) -> dict[str, Any]:
    return {"type": "JobPlaced", "stream_id": f"job-{job_id}", "position": 7, "metadata": {},
            "payload": {"job_id": job_id, "attempt": 1, "executor": "local", "command": ["true"],
                        "assignments": {"n0": [0]}, "job_class": "interactive", "session_cap_s": 120.0}}


def policy_set(settings: dict[str, Any]) -> dict[str, Any]:
    return {"type": "PolicySet", "stream_id": "policy", "position": 5, "metadata": {},
            "payload": {"changed": settings, "settings": settings, "reason": "demo at 120x"}}


def test_a_policy_set_reaches_the_sessions_started_after_it() -> None:
    policy = RecordedPolicy()
    before = job_run_input(placed("s1"), policy.timings(ENV))
    assert policy.follow(policy_set({"session_warnings_s": [15.0, 2.5], "preemption_grace_s": 1.0}))
    after = job_run_input(placed("s2"), policy.timings(ENV))
    assert before.timings.session_warnings_s == [600.0, 60.0] and before.timings.grace_s == 30.0
    assert after.timings.session_warnings_s == [15.0, 2.5] and after.timings.grace_s == 1.0
    # the settings of a PolicySet are the whole set in force: a later one that drops a knob restores the env
    policy.follow(policy_set({"preemption_grace_s": 2.0}))
    again = job_run_input(placed("s3"), policy.timings(ENV))
    assert again.timings.session_warnings_s == [600.0, 60.0] and again.timings.grace_s == 2.0


def test_other_events_leave_the_policy_alone() -> None:
    policy = RecordedPolicy({"preemption_grace_s": 1.0})
    assert not policy.follow(placed("j"))
    assert policy.settings == {"preemption_grace_s": 1.0}


def test_the_worker_reads_the_policy_in_force_from_the_store(tmp_path: Any) -> None:
    """At the worker's start (`StoreFacts.recorded_policy`, the real embedded store): the last PolicySet."""
    from steward.domain.commands import SetPolicy
    from steward.domain.decide import decide
    from steward.domain.state import LedgerState, evolve
    from steward.store.eventstore import EventStore, PendingAppend
    from steward.store.migrate import upgrade
    from steward.store.recorder import EventRecorder
    from steward_workflows.facts import StoreFacts

    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    facts = StoreFacts(store)
    assert facts.recorded_policy() == {}
    state = LedgerState()
    for at, cmd in enumerate([SetPolicy({"session_warnings_s": [15.0]}, "demo"),
                              SetPolicy({"preemption_grace_s": 1.0}, "demo")]):
        events = decide(state, cmd, float(at))
        for ev in events:
            state = evolve(state, ev, float(at))
        with store.engine.begin() as conn:
            EventRecorder(store).append(conn, [PendingAppend(events, {"actor": "test"})], now=float(at))
    assert facts.recorded_policy() == {"session_warnings_s": [15.0], "preemption_grace_s": 1.0}


@pytest.mark.parametrize(("policy", "cap_s"), [({}, 8 * 3600.0), ({"session_cap_s": 3600.0}, 3600.0)])
def test_the_policy_session_cap_reaches_a_session_without_its_own(policy: dict[str, Any], cap_s: float) -> None:
    """A session submitted without a cap (min_runtime 0) is placed with the recorded policy's cap (the
    one the scheduler plans with), and its JobRun times that cap and protects it as long."""
    from steward.domain.commands import PlaceJob, RegisterNode, ReportJobStarted, SetPolicy
    from steward.domain.decide import decide
    from tests.unit.domain.builders import apply, submit, tree

    state = apply(tree(cluster={"a": 1.0}, a={"a1": 1.0}), RegisterNode("n0", 4, "V100", ["blk0", "n0"]))
    if policy:
        state = apply(state, SetPolicy(policy, "shorter sessions"))
    state = apply(state, submit("s", "a1", min_runtime_s=0.0, job_class="interactive"))
    (event,) = decide(state, PlaceJob("s", {"n0": [0]}, funded=True), 10.0)
    run = job_run_input({"type": event.type, "payload": event.payload, "metadata": {}})
    assert (run.session_cap_s, run.protection_s) == (cap_s, cap_s)
    state = apply(state, PlaceJob("s", {"n0": [0]}, funded=True), now=10.0)
    (started,) = decide(state, ReportJobStarted("s", 1, 42, started_at=20.0), 20.0)
    assert started.payload["protected_until"] == 20.0 + cap_s

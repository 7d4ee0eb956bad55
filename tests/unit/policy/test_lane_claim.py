"""ADR 0099: the debug quota read as a claim (DESIGN.md "Debug quota and the time-to-first-GPU SLO": the quota's
GPUs "may run debug jobs and sessions ahead of the fair-share order"). A qualified job that does not fit may take
funded work out of protection of an allocation running above its entitlement without strict improvement, is placed
funded, and its victims get the claim's grace."""

from __future__ import annotations

import math

import pytest

from steward.domain.policy_settings import InvalidSettings, PolicySettings
from steward.policy.contract import victim_grace_s
from steward.policy.cycle import schedule
from steward.policy.model import AllocationTree, PendingJob, RunningJob
from steward.policy.preemption import CLAIM_RULE, Branches, claim_within_debug_quota, over_entitlement
from tests.unit.policy.builders import HOUR, NOW, nodes, pending, preempted, running, snapshot

CLAIM = PolicySettings.steward(lane_claim=True, lane_claim_grace_s=30.0)
WINDOW = 7 * 24 * HOUR  # the `steward` usage window: entitled-in-window ÷ it = entitlement × capacity
E = 8 * WINDOW  # entitled-in-window of the whole cluster (8 GPUs): an allocation's is its share of it
TREE = AllocationTree.flat({"a": 0.25, "b": 0.25, "c": 0.5})  # 2, 2 and 4 GPUs of entitlement
# a is the most served (no strict improvement against b), c the least
USAGE = {"a": 0.25 * E * 0.40, "b": 0.25 * E * 0.30, "c": 0.5 * E * 0.05}


def debug(id: str = "dbg", project: str = "a") -> PendingJob:
    return pending(id, project, 1, submitted_at=NOW - 5, min_runtime_s=300.0, klass="debug")


def held(b_jobs: int = 3, b_protected_for: float = HOUR, b_funded: bool = True) -> list[RunningJob]:
    """A full node: a runs its entitlement (2 GPUs, protected), b `b_jobs` 1-GPU jobs (funded: 3 is one above its
    entitlement; out of protection unless told, checkpointed 10 s, 20 s... ago), c protected work on the rest."""
    return [
        *(running(f"a{i}", "a", 1, protected_for=10 * HOUR) for i in range(2)),
        *(running(f"b{i}", "b", 1, protected_for=b_protected_for, funded=b_funded,
                  last_checkpoint_at=NOW - 10 * (i + 1)) for i in range(b_jobs)),
        *(running(f"c{i}", "c", 1, protected_for=10 * HOUR) for i in range(6 - b_jobs)),
    ]


def cycle(settings: PolicySettings, jobs: list[RunningJob] | None = None,
          waiting: list[PendingJob] | None = None):  # type: ignore[no-untyped-def]
    return schedule(snapshot(nodes=nodes(1), tree=TREE, usage=USAGE, running=held() if jobs is None else jobs,
                             pending=[debug()] if waiting is None else waiting, settings=settings))


# --- the rule ----------------------------------------------------------------------------------------


def _branches(running_gpus: dict[str, float], entitlement: dict[str, float] | None = None,
              also: Branches | None = None, worst: Branches | None = None) -> Branches:
    share = entitlement or {"a": 0.25, "b": 0.25, "c": 0.5}
    return Branches(USAGE, {k: v * E for k, v in share.items()}, running_gpus, also=also, worst=worst)


@pytest.mark.parametrize(
    ("branches", "victim", "freed", "expected"),
    [
        (_branches({"b": 3.0}), "b", 1.0, True),  # one GPU above its 2: that one may go
        (_branches({"b": 3.0}), "b", 2.0, False),  # never below its entitlement
        (_branches({"b": 2.0}), "b", 1.0, False),  # at its entitlement: only strict improvement may take it
        (_branches({"b": 2.0}), "b", 0.0, True),  # (the search asks first with nothing freed yet)
        (_branches({"c": 3.0}), "c", 1.0, False),  # below
        (_branches({"x": 1.0}), "x", 1.0, True),  # no entitlement at all (funded by the lane): all of it
        # every reading strict improvement reads: ADR 0016's in-full reading (a larger entitlement) too
        (_branches({"b": 3.0}, also=_branches({"b": 3.0}, {"b": 0.5})), "b", 1.0, False),
        (_branches({"b": 3.0}, also=_branches({"b": 3.0})), "b", 1.0, True),
        # ADR 0076, on one cluster of several: above its part of the cluster and over the tree
        (_branches({"b": 3.0}, worst=_branches({"b": 3.0}, {"b": 0.5})), "b", 1.0, False),
        (_branches({"b": 3.0}, worst=_branches({"b": 5.0})), "b", 1.0, True),
    ],
)
def test_which_allocations_run_above_their_entitlement(branches: Branches, victim: str, freed: float,
                                                       expected: bool) -> None:
    assert over_entitlement(branches, victim, freed, WINDOW) is expected


@pytest.mark.parametrize(
    ("waiting", "victim", "expected", "why"),
    [
        (("a",), ("b",), True, None),
        (("a",), ("c",), False, None),
        (("a",), ("a",), False, "same allocation"),  # its own allocation's work is a trade (ADR 0021)
        (("a",), (), True, None),  # no allocation: as strict improvement
        (("x", "x1"), ("x", "b"), True, None),  # where the paths part
    ],
)
def test_a_claim_where_the_paths_part(waiting: tuple[str, ...], victim: tuple[str, ...], expected: bool,
                                      why: str | None) -> None:
    ok, evidence = claim_within_debug_quota(waiting, victim, 1.0, _branches({"b": 3.0, "c": 3.0}), WINDOW)
    assert ok is expected and evidence["rule"] == CLAIM_RULE and evidence.get("why") == why


# --- through the cycle ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "jobs", "expected"),
    [
        (CLAIM, None, {"b0": "dbg"}),  # b runs above its entitlement: the claim takes its cheapest job
        (CLAIM.with_(lane_claim=False), None, {}),  # off: a is more served than b, no strict improvement
        (CLAIM, held(b_jobs=2), {}),  # b at its entitlement: never without strict improvement
        (CLAIM, held(b_protected_for=10 * HOUR), {}),  # never inside protection
        (CLAIM, held(b_funded=False), {"b0": "dbg"}),  # unfunded work first, as before (not a claim)
    ],
)
def test_what_a_claim_takes(settings: PolicySettings, jobs: list[RunningJob] | None,
                            expected: dict[str, str]) -> None:
    result = cycle(settings, jobs)
    assert preempted(result) == expected
    for p in result.preemptions:
        assert p.evidence["lane"]


def test_a_claim_carries_its_evidence_and_grace() -> None:
    (p,) = cycle(CLAIM).preemptions
    ev = p.evidence
    assert ev["rule"] == CLAIM_RULE and ev["lane"] and not ev["trade"]
    assert ev["check"]["strict_improvement"] is False
    claim = ev["check"]["claim"]
    assert claim["victim_allocation"] == "b" and claim["above_entitlement"]
    assert len(claim["readings"]) == 2  # the order's ranked reading and ADR 0016's in-full one
    for reading in claim["readings"]:
        assert reading["running_gpus"] == 3.0 and reading["entitled_gpus"] == pytest.approx(2.0)
        assert reading["freed_gpus"] == 1.0
    assert p.grace_ends_at == NOW + 30.0  # the claim's grace, not the contract's 120 s


@pytest.mark.parametrize(("grace", "expected"), [(None, 120.0), (20.0, 20.0), (0.0, 0.0)])
def test_the_claim_grace(grace: float | None, expected: float) -> None:
    (p,) = cycle(CLAIM.with_(lane_claim_grace_s=grace)).preemptions
    assert p.grace_ends_at - NOW == expected


def test_the_claim_grace_is_only_for_claim_victims() -> None:
    s = CLAIM.with_(lane_claim_grace_s=5.0)
    # an unfunded victim of the lane keeps the unfunded grace (20 s)
    (p,) = cycle(s, held(b_funded=False)).preemptions
    assert p.evidence["rule"] == "unfunded_preemptible_at_once" and p.grace_ends_at - NOW == 20.0
    # a batch job of under-served c (with entitlement left) takes b's work under strict improvement, with the
    # contract's grace
    (p,) = cycle(s, waiting=[pending("batch", "c", 1, submitted_at=NOW - 5)]).preemptions
    assert p.evidence["rule"] == "strict_improvement" and not p.evidence["lane"]
    assert p.grace_ends_at - NOW == 120.0


@pytest.mark.parametrize(
    ("funded", "claim", "expected"),
    [(True, True, 7.0), (True, False, 120.0), (False, True, 20.0), (False, False, 20.0)],
)
def test_victim_grace(funded: bool, claim: bool, expected: float) -> None:
    assert victim_grace_s(funded, claim, CLAIM.with_(lane_claim_grace_s=7.0)) == expected


def test_the_claimed_job_is_placed_funded_once_its_room_is_free() -> None:
    """a has used its entitlement (2 funded GPUs running): the claim funds its debug job all the same."""
    jobs = [j for j in held() if j.id != "b0"]  # b0 has stopped: its GPU is free
    waiting = [pending("dbg", "a", 1, submitted_at=NOW - 5, min_runtime_s=300.0, klass="debug",
                       room_freed_at=NOW - 1)]
    result = cycle(CLAIM, jobs, waiting)
    (p,) = result.placements
    assert p.job_id == "dbg" and p.funded and p.protected_until == NOW + 300.0
    assert p.evidence["lane"]["funded_by_lane"]


def test_the_setting() -> None:
    """On in the `steward` preset with a 20 s grace (measured: docs/results/debug-claim/); the baselines have
    no lane, so no claim."""
    assert PolicySettings.steward().lane_claim and PolicySettings.steward().lane_claim_grace_s == 20.0
    for preset in ("ai2", "fair-tree", "fifo-priority"):
        s = PolicySettings.preset(preset)
        assert not s.lane and not s.lane_claim
    with pytest.raises(InvalidSettings):
        PolicySettings.steward(lane_claim_grace_s=-1.0)
    with pytest.raises(InvalidSettings):
        PolicySettings.steward(lane_claim_grace_s=math.nan)

"""The what-if preview: a proposal is checked like `SetAllocations`, recent history becomes a simulator
scenario, both runs go through the real simulator, and the `whatIf` query is authorised like
`setAllocations` and cached by its inputs."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from steward.api.whatif import (
    History,
    HistoryJob,
    Runner,
    WhatIfRefused,
    history_job,
    load_history,
    proposed_shares,
    run_times,
    runner_for,
    scenario_of,
    simulate,
)
from tests.unit.api.harness import serve

TREE = {"team": ("cluster", 1.0), "a": ("team", 0.5), "b": ("team", 0.5)}
NODES = (("n1", 8, "h100", ("blk", "n1"), "default"), ("n2", 8, "h100", ("blk", "n2"), "default"))
# two clusters of one 8-GPU node each, with other models (issue 25: the what-if takes several clusters)
TWO_CLUSTERS = (("c1", 8, "h100", ("c1",), "ceres"), ("j1", 8, "a100", ("j1",), "jupiter"))


def hjob(job_id: str, project: str, submitted: float, gpus: int = 8, duration: float = 3600.0,
         cls: str = "batch") -> HistoryJob:
    return HistoryJob(job_id, project, cls, gpus, 600.0, True, 0, submitted, duration)


def history(jobs: list[HistoryJob], shares: dict[str, tuple[str, float]] | None = None) -> History:
    return History(since=0.0, until=86400.0, nodes=NODES, shares=shares or TREE, policy={}, jobs=tuple(jobs),
                   capped=False)


@pytest.mark.parametrize(("parent", "shares", "field", "words"), [
    ("team", [], "shares", "at least one child"),
    ("team", [("a", 0.7)], "shares", "sum to 1.2000 > 1"),
    ("team", [("a", 1.5)], "shares", "must be in [0, 1]"),
    ("team", [("a", -0.1)], "shares", "must be in [0, 1]"),
    ("team", [("a", math.nan)], "shares", "finite"),
    ("team", [("a", 0.2), ("a", 0.3)], "shares", "more than once"),
    ("nowhere", [("a", 0.2)], "shares", "unknown parent node 'nowhere'"),
    ("team", [("c", 0.0)], "shares", "'c' is not a child of 'team' yet"),
    ("a", [("b", 0.2)], "shares", "already belongs to 'team'"),
])
def test_invalid_proposals_are_refused_with_the_problem_named(
        parent: str, shares: list[tuple[str, float]], field: str, words: str) -> None:
    with pytest.raises(WhatIfRefused) as err:
        proposed_shares(TREE, parent, shares)
    assert err.value.field == field and words in err.value.message


def test_a_valid_proposal_changes_only_the_named_children() -> None:
    after = proposed_shares(TREE, "team", [("a", 0.8), ("b", 0.2)])
    assert after == {"team": ("cluster", 1.0), "a": ("team", 0.8), "b": ("team", 0.2)}
    assert TREE["a"] == ("team", 0.5)  # the current tree is not touched


@pytest.mark.parametrize(("row", "expected"), [
    # ran and ended: the time it ran
    ({"state": "COMPLETED", "started_at": 100.0, "ended_at": 700.0}, 600.0),
    # still running: what it ran so far (until = 1000)
    ({"state": "RUNNING", "started_at": 400.0, "ended_at": None}, 600.0),
    # still waiting: its protection time, at least a minute
    ({"state": "QUEUED", "started_at": None, "ended_at": None, "min_runtime_s": 30.0}, 60.0),
    ({"state": "QUEUED", "started_at": None, "ended_at": None}, 900.0),
    # cancelled before it ran: no work to replay
    ({"state": "CANCELLED", "started_at": None, "ended_at": 500.0}, None),
])
def test_projection_rows_become_replayable_jobs(row: dict[str, Any], expected: float | None) -> None:
    base = {"job_id": "j", "project": "a", "job_class": "debug", "gpus": 2, "min_runtime_s": 900.0,
            "resumable": 1, "priority": 0, "submitted_at": 50.0}
    h = history_job({**base, **row}, until=1000.0)
    assert (h.duration_s if h else None) == expected


def test_the_scenario_keeps_the_tree_the_nodes_and_relative_submit_times() -> None:
    h = History(since=1000.0, until=2000.0, nodes=NODES, shares=TREE, policy={"window_s": 2 * 86400.0},
                jobs=(hjob("x", "a", 1500.0), hjob("huge", "a", 1600.0, gpus=64)), capped=False)
    sc = scenario_of(h, TREE)
    assert sc.capacity == 16 and [n.path for n in sc.nodes] == [("blk", "n1"), ("blk", "n2")]
    assert sc.allocations["a"].entitlement == pytest.approx(0.5) and sc.allocations["team"].children == ("a", "b")
    assert [(j.job_id, j.submit_s) for j in sc.jobs] == [("x", 500.0)]  # the 64-GPU job could never run here
    assert sc.policy.window_days == pytest.approx(2.0)


def test_a_bigger_share_raises_what_the_project_is_owed_and_gets_when_both_compete() -> None:
    # a and b each keep the whole cluster busy all day: what each gets follows its share
    jobs = [hjob(f"{p}{i}", p, i * 600.0 + (0 if p == "a" else 1)) for i in range(60) for p in ("a", "b")]
    h = history(jobs)
    before = simulate(h, TREE)
    after = simulate(h, proposed_shares(TREE, "team", [("a", 0.8), ("b", 0.2)]))
    assert after.allocations["a"].owed_gpu_s > before.allocations["a"].owed_gpu_s
    assert after.allocations["a"].delivered_gpu_s > before.allocations["a"].delivered_gpu_s
    assert after.allocations["b"].delivered_gpu_s < before.allocations["b"].delivered_gpu_s
    assert before.waits["batch"][2] == 120 and before.waits["batch"][1] is not None


@pytest.mark.parametrize(("models", "clusters", "gpus", "kept"), [
    ((), (), 8, True),  # no request: any cluster
    ((), ("jupiter",), 8, True),
    (("h100",), (), 8, True),
    ((), (), 16, False),  # a gang never spans clusters: 16 GPUs fit no single one
    (("v100",), (), 1, False),  # a model no node has
    (("h100",), ("jupiter",), 1, False),  # jupiter has no H100
    ((), ("",), 1, False),  # pinned elsewhere than it asks (`pinned_clusters`: none)
])
def test_the_scenario_keeps_each_nodes_cluster_and_each_jobs_request(
        models: tuple[str, ...], clusters: tuple[str, ...], gpus: int, kept: bool) -> None:
    job = HistoryJob("x", "a", "batch", gpus, 600.0, True, 0, 1500.0, 3600.0, models, clusters)
    h = History(since=1000.0, until=2000.0, nodes=TWO_CLUSTERS, shares=TREE, policy={}, jobs=(job,), capped=False)
    sc = scenario_of(h, TREE)
    assert [(n.name, n.gpu_model, n.cluster) for n in sc.nodes] == [("c1", "h100", "ceres"), ("j1", "a100", "jupiter")]
    assert [(j.gpu_models, j.clusters) for j in sc.jobs] == ([(models, clusters)] if kept else [])


def test_a_job_that_accepts_one_cluster_is_replayed_on_that_cluster_only() -> None:
    # two 8-GPU hour-long jobs of `a`: side by side on two clusters, one after the other when both ask ceres
    def delivered_in_the_first_hour(clusters: tuple[str, ...]) -> float:
        jobs = tuple(HistoryJob(f"x{i}", "a", "batch", 8, 600.0, True, 0, 0.0, 3600.0, (), clusters)
                     for i in range(2))
        h = History(since=0.0, until=3600.0, nodes=TWO_CLUSTERS, shares=TREE, policy={}, jobs=jobs, capped=False)
        return simulate(h, TREE).allocations["a"].delivered_gpu_s

    anywhere, on_ceres = delivered_in_the_first_hour(()), delivered_in_the_first_hour(("ceres",))
    assert on_ceres == pytest.approx(anywhere / 2, rel=0.05)


def test_a_pinned_allocation_is_owed_at_most_what_its_pins_cluster_could_deliver() -> None:
    """ADR 0067 in the preview as in the books: `team` (and so `a`) pinned to ceres, one 8-GPU node of 16; `a`
    asks 16 GPUs for the hour: owed 8 GPU-hours (what ceres holds), not the 16 it is entitled to and asks."""
    jobs = tuple(HistoryJob(f"x{i}", "a", "batch", 8, 600.0, True, 0, 0.0, 3600.0, (), ("ceres",))
                 for i in range(2))
    tree = {"team": ("cluster", 1.0), "a": ("team", 1.0)}
    base = History(since=0.0, until=3600.0, nodes=TWO_CLUSTERS, shares=tree, policy={}, jobs=jobs, capped=False)
    pinned = History(since=0.0, until=3600.0, nodes=TWO_CLUSTERS, shares=tree, policy={}, jobs=jobs,
                     capped=False, pins={"team": "ceres"})
    assert base.digest() != pinned.digest()  # a pin is an input of the cached run
    unpinned_owed = simulate(base, tree).allocations["a"].owed_gpu_s
    run = simulate(pinned, tree).allocations["a"]
    assert unpinned_owed == pytest.approx(16 * 3600.0)  # entitled to all 16 GPUs, asking 16
    assert run.owed_gpu_s == pytest.approx(8 * 3600.0) and run.delivered_gpu_s == pytest.approx(8 * 3600.0)


def test_the_runner_caches_by_inputs_and_retries_a_failed_run() -> None:
    runner = Runner()
    h = history([hjob("j1", "a", 10.0, duration=60.0)])
    f1, hit1 = runner.submit(h, TREE)
    f2, hit2 = runner.submit(h, TREE)
    assert f1 is f2 and (hit1, hit2) == (False, True) and runner.runs == 1
    f1.result(timeout=60)
    other = history([hjob("j1", "a", 10.0, duration=61.0)])  # another head: other inputs, another run
    runner.submit(other, TREE)[0].result(timeout=60)
    assert runner.runs == 2


# -- the GraphQL field on a real server -----------------------------------------------------------------

QUERY = """query W($parent: String!, $shares: [ShareInput!]!, $w: Float! = 604800) {
  whatIf(parent: $parent, shares: $shares, windowS: $w) {
    __typename
    ... on WhatIfPreview { parent jobs cached summary capacityGpus
      allocations { name changed shareBefore shareAfter owedBefore owedAfter deliveredBefore deliveredAfter
                    ratioBefore ratioAfter }
      waits { jobClass jobs p50BeforeS p90BeforeS p50AfterS p90AfterS } }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


def test_the_what_if_query_is_authorised_like_set_allocations_and_cached(tmp_path: Path) -> None:
    with serve(tmp_path) as srv:
        def ask(token: str, parent: str, shares: list[dict[str, Any]], query: str = QUERY, **kw: Any) -> dict[str, Any]:
            body = srv.gql(query, {"parent": parent, "shares": shares, **kw}, srv.tokens[token])
            assert "errors" not in body, body
            out: dict[str, Any] = body["data"]["whatIf"]
            return out

        change = [{"child": "a1", "share": 0.3}, {"child": "a2", "share": 0.7}]
        first = ask("manager", "team-a", change)
        assert first["__typename"] == "WhatIfPreview", first
        assert first["jobs"] == 5 and first["capacityGpus"] == 16 and not first["cached"]
        rows = {r["name"]: r for r in first["allocations"]}
        assert set(rows) == {"team-a", "a1", "a2"}  # the parent and its subtree
        assert rows["a2"]["changed"] and rows["a2"]["shareBefore"] == 0.4 and rows["a2"]["shareAfter"] == 0.7
        assert rows["a2"]["owedAfter"] >= rows["a2"]["owedBefore"]
        assert [w["jobClass"] for w in first["waits"]] == ["debug", "batch", "large"]
        assert "Replaying 5 jobs" in first["summary"]
        runner = runner_for(srv.services.store)
        assert runner.runs == 2  # without and with the change
        # the same proposal again (in other words, so that the API's response cache does not answer)
        again = ask("manager", "team-a", change, query=QUERY + "\n# again")
        assert again["cached"] and runner.runs == 2
        # another proposal shares the run without the change
        ask("manager", "team-a", [{"child": "a1", "share": 0.5}])
        assert runner.runs == 3

        # an admin anywhere; a manager only inside their subtree; researchers and auditors never
        assert ask("admin", "cluster", [{"child": "ops", "share": 0.3}])["__typename"] == "WhatIfPreview"
        outside = ask("manager", "research", [{"child": "team-a", "share": 0.4}])
        assert outside == {"__typename": "NotAuthorised", "message": "no node 'research' that you may allocate under"}
        for role in ("researcher", "auditor"):
            refused = ask(role, "team-a", change)
            assert refused["__typename"] == "NotAuthorised" and "may not use 'whatIf'" in refused["message"]

        # invalid proposals: the problem named, nothing simulated
        over = ask("manager", "team-a", [{"child": "a1", "share": 0.9}])
        assert over == {"__typename": "InvalidInput", "field": "shares",
                        "message": "children of 'team-a' would sum to 1.3000 > 1"}
        window = ask("manager", "team-a", change, w=10.0)
        assert window["__typename"] == "InvalidInput" and window["field"] == "windowS"


def _row(name: str, changed: bool, owed: tuple[float, float], ratio: tuple[float | None, float | None]) -> Any:
    from steward.api.whatif import WhatIfAllocation

    return WhatIfAllocation(name=name, parent="team", depth=2, is_project=True, changed=changed, share_before=0.5,
                            share_after=0.6, entitlement_before=0.5, entitlement_after=0.6, owed_before=owed[0],
                            delivered_before=owed[0] * (ratio[0] or 0), ratio_before=ratio[0], owed_after=owed[1],
                            delivered_after=owed[1] * (ratio[1] or 0), ratio_after=ratio[1])


@pytest.mark.parametrize(("jobs", "rows", "p90", "expected"), [
    (0, [], None, "No jobs were submitted in the last 7 days: there is no history to replay."),
    (3, [_row("a", True, (0.0, 0.0), (None, None)), _row("b", False, (3600.0, 3600.0), (1.0, 1.0))], None,
     "Replaying 3 jobs of the last 7 days: a had no demand in the window, so nothing changes for it."),
    (12, [_row("a", True, (7200.0, 9000.0), (1.0, 0.8))], (600.0, 300.0),
     "Replaying 12 jobs of the last 7 days: a owed 2.00 → 2.50 GPU·h, delivered/owed 100% → 80%; "
     "p90 wait batch 600 s → 300 s."),
])
def test_the_summary_names_what_changes(jobs: int, rows: list[Any], p90: tuple[float, float] | None,
                                        expected: str) -> None:
    from steward.api.whatif import WhatIfWaits, summary

    waits = [WhatIfWaits(job_class="batch", jobs=jobs, p50_before_s=None, p90_before_s=p90[0] if p90 else None,
                         p50_after_s=None, p90_after_s=p90[1] if p90 else None)]
    assert summary(rows, waits, jobs, 7 * 86400.0) == expected


# -- run times from the log -----------------------------------------------------------------------------


def test_a_requeued_job_is_replayed_with_both_of_its_runs(tmp_path: Path) -> None:
    """The projection keeps a job's latest run only; the what-if measures every run on the log."""
    from steward.bus.envelope import command_envelope
    from steward.domain.commands import (
        PlaceJob,
        RegisterNode,
        ReportJobExited,
        ReportJobLost,
        ReportJobStarted,
        SetAllocations,
        SubmitJob,
    )
    from steward.ledger.ledger import Ledger
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'steward.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    t0 = 999_960.0  # a whole minute, as the what-if rounds "now" up to one
    clock = [t0]
    ledger = Ledger(store, consumer_name="t", clock=lambda: clock[0])

    def at(t: float, *cmds: Any) -> None:
        clock[0] = t0 + t
        ledger.process([("t", command_envelope(c, actor="t", role="admin").encode()) for c in cmds], {})

    at(0, SetAllocations("cluster", {"a": 1.0}, "setup"), RegisterNode("n1", 8, "h100", ["blk", "n1"]),
       RegisterNode("n2", 8, "h100", ["blk", "n2"], "other", cluster="other"))  # another executor (and so its own
    # cluster, ADR 0091): healthy after n1 is lost
    at(10, SubmitJob("rq", "a", 4, 0, ["true"]), SubmitJob("once", "a", 4, 0, ["true"]),
       SubmitJob("open", "a", 4, 0, ["true"]))
    at(20, PlaceJob("rq", {"n1": [0, 1, 2, 3]}, True), PlaceJob("once", {"n1": [4, 5, 6, 7]}, True))
    at(20, ReportJobStarted("rq", 1, 100, started_at=t0 + 20), ReportJobStarted("once", 1, 101, started_at=t0 + 20))
    at(1020, ReportJobLost("rq", 1, "heartbeat timeout"))  # ran 1000 s, then lost with n1: requeued
    at(1100, ReportJobExited("once", 1, 0))  # ran 1080 s
    at(2000, PlaceJob("rq", {"n2": [0, 1, 2, 3]}, True), PlaceJob("open", {"n2": [4, 5, 6, 7]}, True))
    at(2000, ReportJobStarted("rq", 2, 102, started_at=t0 + 2000), ReportJobStarted("open", 1, 103,
                                                                                     started_at=t0 + 2000))
    at(2500, ReportJobExited("rq", 2, 0))  # its second run: 500 s
    states = {e.payload.get("job_id"): e.type for e in store.read() if e.type.startswith("Job")}
    assert states == {"rq": "JobCompleted", "once": "JobCompleted", "open": "JobStarted"}, states

    until = t0 + 3000  # now, on a minute boundary: "open" has run 1000 s so far
    assert run_times(store, ["rq", "once", "open", "never"], until) == {"rq": 1500.0, "once": 1080.0,
                                                                         "open": 1000.0}
    h = load_history(store, until, 86400.0, 100)
    assert {j.job_id: j.duration_s for j in h.jobs} == {"rq": 1500.0, "once": 1080.0, "open": 1000.0}


def test_the_history_reads_each_nodes_cluster_and_each_jobs_request_with_its_pin(tmp_path: Path) -> None:
    """The projection keeps no request: the what-if reads it from `JobSubmitted`, and narrows it to the
    allocation's pin (ADR 0067) with the rule the ledger and routing use."""
    from steward.bus.envelope import command_envelope
    from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
    from steward.ledger.ledger import Ledger
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'steward.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    t0 = 999_960.0
    ledger = Ledger(store, consumer_name="t", clock=lambda: t0)
    cmds = [RegisterNode("c1", 8, "h100", ["c1"], cluster="ceres"), RegisterNode("j1", 8, "a100", ["j1"],
                                                                               cluster="jupiter"),
            SetAllocations("cluster", {"lab": 0.5, "b": 0.5}, "setup"),
            SetAllocations("lab", {"a": 1.0}, "setup"),
            SetAllocations("cluster", {}, "the lab's own hardware", pins={"lab": "ceres"}),
            SubmitJob("any", "a", 1, 0, ["true"]), SubmitJob("h", "b", 1, 0, ["true"], gpu_models=["h100"]),
            SubmitJob("j", "b", 1, 0, ["true"], clusters=["jupiter"])]
    ledger.process([("t", command_envelope(c, actor="t", role="admin").encode()) for c in cmds], {})
    assert [e.payload for e in store.read() if e.type == "CommandRejected"] == []
    h = load_history(store, t0 + 60, 86400.0, 100)
    assert sorted((n[0], n[2], n[4]) for n in h.nodes) == [("c1", "h100", "ceres"), ("j1", "a100", "jupiter")]
    assert {j.job_id: (j.gpu_models, j.clusters) for j in h.jobs} == {
        "any": ((), ("ceres",)),  # under the pinned `lab`: its pin
        "h": (("h100",), ()), "j": ((), ("jupiter",))}

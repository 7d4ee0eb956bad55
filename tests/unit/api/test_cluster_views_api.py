"""Per-cluster views through a real API server (issue 25): each cluster's occupancy (busy, free, draining, down
GPUs in all and per GPU model), the queue of one cluster (`queue(cluster:)`: the jobs that may run there, with
their position there), and what a job accepts and where it runs (`Job.gpuModels`, `clusters`, `runsOn`).

The seeded log (tests/unit/api/harness.py): nodes n1 and n2, 8 "h100" GPUs each, in the default cluster, with
a1-run on n1 (4 GPUs) and b1-run on n2 (8), and a1-wait, a2-wait, b1-wait waiting (they accept any cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from steward.api.clusters import cluster_occupancy
from steward.domain.commands import DrainNode, PlaceJob, RegisterNode, SubmitJob
from tests.unit.api.harness import Server, record, serve

OCCUPANCY = """{ clusterOccupancy { name nodes gpus busyGpus freeGpus drainingGpus downGpus
  gpuModels { gpuModel nodes gpus busyGpus freeGpus drainingGpus downGpus } } }"""
QUEUE = """query($cluster: String, $project: String) { queue(cluster: $cluster, project: $project) {
  waiting waitingGpus entries { position mine positionInCluster positionInClusters job { id } } } }"""
Accepts = tuple[tuple[str, ...], tuple[str, ...]]
JOB = "query($id: ID!) { job(id: $id) { id state gpuModels clusters runsOn } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve(tmp_path_factory.mktemp("cluster-views")) as s:
        record(s.store, [RegisterNode("j1", 4, "a100", ["jupiter", "j1"], cluster="jupiter"),
                         RegisterNode("j2", 4, "v100", ["jupiter", "j2"], cluster="jupiter"),
                         DrainNode("j2", "maintenance")])
        record(s.store, [SubmitJob("a1-jup", "a1", 2, 600, ["true"], clusters=["jupiter"]),
                         SubmitJob("a1-h100", "a1", 2, 600, ["true"], gpu_models=["h100"]),
                         SubmitJob("a1-placed", "a1", 1, 600, ["true"], gpu_models=["a100"], clusters=["jupiter"])],
               actor="alice")
        record(s.store, [PlaceJob("a1-placed", {"j1": [0]}, True, {"policy": "test"})], actor="scheduler")
        yield s


def test_each_cluster_has_its_occupancy_in_all_and_per_model(server: Server) -> None:
    found = {c["name"]: c for c in server.gql(OCCUPANCY, token=server.tokens["researcher"])["data"]["clusterOccupancy"]}
    assert list(found) == ["default", "jupiter"]
    assert found["default"] | {"gpuModels": None} == {
        "name": "default", "nodes": 2, "gpus": 16, "busyGpus": 12, "freeGpus": 4, "drainingGpus": 0, "downGpus": 0,
        "gpuModels": None}
    assert found["default"]["gpuModels"] == [{"gpuModel": "h100", "nodes": 2, "gpus": 16, "busyGpus": 12,
                                              "freeGpus": 4, "drainingGpus": 0, "downGpus": 0}]
    jupiter = found["jupiter"]
    assert (jupiter["gpus"], jupiter["busyGpus"], jupiter["freeGpus"], jupiter["drainingGpus"]) == (8, 1, 3, 4)
    assert [(m["gpuModel"], m["busyGpus"], m["freeGpus"], m["drainingGpus"]) for m in jupiter["gpuModels"]] == [
        ("a100", 1, 3, 0), ("v100", 0, 0, 4)]


@pytest.mark.parametrize(("nodes", "used", "want"), [
    # (gpus, state, foreign GPUs) per node of one cluster and model -> (busy, free, draining, down)
    ([(8, "ready", 0)], {"x0": 3}, (3, 5, 0, 0)),
    ([(8, "ready", 2)], {"x0": 3}, (5, 3, 0, 0)),
    ([(8, "ready", 4)], {"x0": 8}, (8, 0, 0, 0)),  # held GPUs never count past the node's GPUs
    ([(8, "draining", 0)], {"x0": 2}, (2, 0, 6, 0)),
    ([(8, "unhealthy", 0)], {"x0": 2}, (2, 0, 0, 6)),
    ([(8, "retiring", 0)], {"x0": 2}, (2, 0, 6, 0)),  # offered to no new job while its last attempts run out
    ([(8, "lost", 0)], {}, (0, 0, 0, 8)),  # a state the policy does not know: as unhealthy
    ([(8, "ready", 0), (4, "unhealthy", 0), (2, "draining", 1)], {"x0": 1}, (2, 7, 1, 4)),
])
def test_busy_free_draining_and_down_sum_to_the_gpus(nodes: list[tuple[int, str, int]], used: dict[str, int],
                                                     want: tuple[int, int, int, int]) -> None:
    rows = [{"node_id": f"x{i}", "gpus": g, "gpu_model": "h100", "state": st, "foreign_gpus": f, "cluster": ""}
            for i, (g, st, f) in enumerate(nodes)]
    [one] = cluster_occupancy(rows, used)
    assert one.name == "default"  # the domain's name for a node registered without one
    assert (one.busy_gpus, one.free_gpus, one.draining_gpus, one.down_gpus) == want
    assert sum(want) == one.gpus == sum(g for g, _, _ in nodes)
    assert cluster_occupancy([], used) == []


NODES = "{ nodes { id freeGpus usedGpus state } topology { path freeGpus usedGpus gpus } " + OCCUPANCY[1:]


def test_every_figure_of_free_gpus_reads_a_node_alike(server: Server) -> None:
    """One reading of a node's GPUs (`clusters.node_gpus`): a drained node's unheld GPUs are free nowhere, in the
    nodes, the topology's domains and the clusters alike (the Nodes screen once showed "4 free" on a draining
    node's block while its cluster said "0 free, 4 draining")."""
    data = server.gql(NODES, token=server.tokens["admin"])["data"]
    free = {n["id"]: n["freeGpus"] for n in data["nodes"]}
    assert free["j2"] == 0 and free["j1"] == 3
    root = next(d for d in data["topology"] if d["path"] == [])
    by_cluster = {c["name"]: c for c in data["clusterOccupancy"]}
    assert root["freeGpus"] == sum(free.values()) == sum(c["freeGpus"] for c in by_cluster.values())
    assert root["usedGpus"] == sum(c["busyGpus"] for c in by_cluster.values())
    jupiter = next(d for d in data["topology"] if d["path"] == ["jupiter"])
    assert (jupiter["freeGpus"], jupiter["gpus"]) == (by_cluster["jupiter"]["freeGpus"], 8)


def _entries(server: Server, token: str, **variables: Any) -> list[dict[str, Any]]:
    res = server.gql(QUEUE, variables, token)
    assert "errors" not in res, res
    entries: list[dict[str, Any]] = res["data"]["queue"]["entries"]
    return entries


def test_a_clusters_queue_holds_the_jobs_that_may_run_there_with_their_position_there(server: Server) -> None:
    admin = server.tokens["admin"]
    everything = _entries(server, admin)
    assert all(e["positionInCluster"] is None for e in everything)  # no cluster asked: the field stays empty
    order = [e["job"]["id"] for e in everything]
    for cluster, excluded in (("jupiter", {"a1-h100"}), ("default", {"a1-jup"})):
        got = _entries(server, admin, cluster=cluster)
        assert [e["job"]["id"] for e in got] == [j for j in order if j not in excluded]
        assert [e["positionInCluster"] for e in got] == list(range(1, len(got) + 1))
        assert [e["position"] for e in got] == [e["position"] for e in everything if e["job"]["id"] not in excluded]


def test_a_clusters_queue_counts_its_own_waiting_jobs(server: Server) -> None:
    admin = server.tokens["admin"]
    for cluster in (None, "jupiter", "default"):
        queue = server.gql(QUEUE, {"cluster": cluster}, admin)["data"]["queue"]
        assert queue["waiting"] == len(queue["entries"]), (cluster, queue)
    assert server.gql(QUEUE, {"cluster": "jupiter"}, admin)["data"]["queue"]["waiting"] == 4  # all but a1-h100


@pytest.mark.parametrize(("accepts", "clusters", "want"), [
    (None, None, {"default", "jupiter"}),  # a job the read model does not hold: any
    ((("a100",), ()), None, {"jupiter"}),
    (((), ("default",)), None, {"default"}),
    ((("a100",), ("default",)), None, set()),
    (None, frozenset({"default"}), {"default"}),  # the policy's answer (with the pin) wins
])
def test_without_a_policy_the_clusters_come_from_the_request(accepts: Accepts | None, clusters: frozenset[str] | None,
                                                            want: set[str]) -> None:
    from types import SimpleNamespace

    from steward.api.readmodel import QueueItem, ReadView
    from steward.api.schema import _may_run_on

    nodes = [{"node_id": "n1", "gpus": 8, "gpu_model": "h100", "state": "ready", "cluster": ""},
             {"node_id": "j1", "gpus": 4, "gpu_model": "a100", "state": "ready", "cluster": "jupiter"}]
    ctx = SimpleNamespace(services=SimpleNamespace(read=SimpleNamespace(cached_accepts=lambda job_id: accepts)))
    item = QueueItem({"job_id": "x", "project": "a1", "gpus": 1}, 1, 1, None, clusters)
    assert _may_run_on(ctx, ReadView(1, [], nodes, []), item) == want  # type: ignore[arg-type]


def test_a_clusters_queue_shows_other_tenants_as_positions_and_narrows_to_a_project(server: Server) -> None:
    theirs = _entries(server, server.tokens["other"], cluster="jupiter")  # bob sees b1 only
    admin = _entries(server, server.tokens["admin"], cluster="jupiter")
    assert [(e["positionInCluster"], e["mine"]) for e in theirs] == [
        (e["positionInCluster"], e["job"]["id"].startswith("b1")) for e in admin]
    assert all(e["job"] is None for e in theirs if not e["mine"])
    mine = _entries(server, server.tokens["researcher"], cluster="jupiter", project="a1")
    assert [e["job"]["id"] for e in mine] == [e["job"]["id"] for e in admin if e["job"]["id"].startswith("a1")]
    assert [e["positionInCluster"] for e in mine] == [e["positionInCluster"] for e in admin
                                                      if e["job"]["id"].startswith("a1")]


def test_an_unknown_cluster_is_refused_with_the_known_ones(server: Server) -> None:
    res = server.gql(QUEUE, {"cluster": "ceres"}, server.tokens["admin"])
    assert res["errors"][0]["message"] == "no cluster 'ceres': the clusters are default, jupiter"


@pytest.mark.parametrize(("job", "want"), [
    ("a1-wait", {"gpuModels": [], "clusters": [], "runsOn": None}),  # any; waiting: runs nowhere
    ("a1-run", {"gpuModels": [], "clusters": [], "runsOn": "default"}),
    ("a1-jup", {"gpuModels": [], "clusters": ["jupiter"], "runsOn": None}),
    ("a1-h100", {"gpuModels": ["h100"], "clusters": [], "runsOn": None}),
    ("a1-placed", {"gpuModels": ["a100"], "clusters": ["jupiter"], "runsOn": "jupiter"}),
])
def test_a_job_says_what_it_accepts_and_where_it_runs(server: Server, job: str, want: dict[str, Any]) -> None:
    found = server.gql(JOB, {"id": job}, server.tokens["researcher"])["data"]["job"]
    assert {k: found[k] for k in want} == want


def test_a_job_that_left_memory_still_says_what_it_accepts(server: Server) -> None:
    read = server.services.read
    assert read.cached_accepts("a1-placed") == (("a100",), ("jupiter",))
    assert read.cached_accepts("nope") is None
    # what the store's log says, as read for a job the read model no longer holds (ADR 0070)
    held = read.live.proj.jobs.pop("a1-placed")
    try:
        assert read.accepts("a1-placed") == (("a100",), ("jupiter",))
    finally:
        read.live.proj.jobs["a1-placed"] = held
    assert read.accepts("nope") == ((), ())


def test_the_occupancy_subscription_carries_the_clusters(server: Server) -> None:
    from tests.unit.api.harness import ws_messages

    [msg] = ws_messages(server.ws_url, {"query": "subscription { occupancy { totalGpus clusters { name gpus } } }"},
                        server.tokens["researcher"])
    assert msg["type"] == "next", msg
    occ = msg["payload"]["data"]["occupancy"]
    assert occ["clusters"] == [{"name": "default", "gpus": 16}, {"name": "jupiter", "gpus": 8}]
    assert occ["totalGpus"] == 24



FRAGMENTATION = "{ clusterOccupancy { name freeGpus largestWaitingGang fragmentedGpus } }"


def test_each_cluster_has_its_fragmentation_against_the_largest_gang_that_may_run_there(server: Server) -> None:
    """ADR 0091: gangs never span clusters, so each cluster's free GPUs are measured against the largest waiting job
    that may run there. default: b1-wait (16 GPUs, any cluster) fits its 16 GPUs; its 4 free GPUs (on n1, half busy)
    are no whole node: all unusable. jupiter: b1-wait can never run there (8 GPUs registered), a1-wait (8) can; its
    3 free GPUs (j1, one busy; j2 draining) are no whole node: unusable. Lab-wide, both were measured against 16."""
    answer = server.gql(FRAGMENTATION, token=server.tokens["researcher"])["data"]["clusterOccupancy"]
    found = {c["name"]: c for c in answer}
    assert found == {
        "default": {"name": "default", "freeGpus": 4, "largestWaitingGang": 16, "fragmentedGpus": 4},
        "jupiter": {"name": "jupiter", "freeGpus": 3, "largestWaitingGang": 8, "fragmentedGpus": 3},
    }


# one cluster's nodes (gpus, state, GPUs used, foreign GPUs) and its largest waiting gang -> fragmented GPUs
FRAGMENTED: list[tuple[str, list[tuple[int, str, int, int]], int, int]] = [
    ("no waiting gang", [(8, "ready", 2, 0)], 0, 0),
    ("a one-node gang fits the free GPUs", [(8, "ready", 2, 0)], 6, 0),
    ("a one-node gang larger than a node's free GPUs", [(8, "ready", 2, 0), (8, "ready", 7, 0)], 4, 1),
    ("foreign load is not free", [(8, "ready", 2, 3)], 4, 3),
    ("a draining node's idle GPUs are not free", [(8, "draining", 0, 0), (8, "ready", 6, 0)], 4, 2),
    ("a two-node gang uses whole free nodes only", [(8, "ready", 0, 0), (8, "ready", 0, 0), (8, "ready", 1, 0)],
     16, 7),
    ("too few whole free nodes: nothing usable", [(8, "ready", 0, 0), (8, "ready", 1, 0)], 16, 15),
]


@pytest.mark.parametrize(("case", "nodes", "gang", "want"), FRAGMENTED, ids=[f[0] for f in FRAGMENTED])
def test_a_clusters_fragmented_gpus(case: str, nodes: list[tuple[int, str, int, int]], gang: int, want: int) -> None:
    from steward.api.clusters import fragmented_gpus

    rows = [{"node_id": f"x{i}", "gpus": g, "gpu_model": "m", "path": ["b", f"x{i}"], "executor": "e", "state": s,
             "foreign_gpus": f, "cluster": "c"} for i, (g, s, _u, f) in enumerate(nodes)]
    used = {f"x{i}": u for i, (_g, _s, u, _f) in enumerate(nodes) if u}
    assert fragmented_gpus(rows, used, {"c": gang}) == {"c": want}, case
    (occ,) = cluster_occupancy(rows, used, {"c": gang})
    assert (occ.largest_waiting_gang, occ.fragmented_gpus) == (gang, want)
    (unknown,) = cluster_occupancy(rows, used)
    assert (unknown.largest_waiting_gang, unknown.fragmented_gpus) == (None, None)

"""ADR 0085: the Slurm and Kubernetes executors name the cluster of the nodes they register
(STEWARD_EXECUTOR_CLUSTER, `steward up --cluster`, the chart's `kubernetesExecutor.cluster`); a bad name is
refused at start, naming it; without the setting a node is registered again in the cluster it was last
registered in (or, for the Kubernetes executor, the one the ledger records, as read through the API), never
moved back to the default cluster by a restart. And the Slurm drain carries the operator's reason."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from steward.bus.envelope import Envelope
from steward.cli.output import CliError
from steward.cli.stack import bring_up
from steward.config import Settings
from steward.domain.clusters import cluster_name
from steward.domain.commands import RegisterNode
from steward.executor import kubernetes_inventory, slurm_inventory
from steward.executor.kubernetes import KubernetesExecutor, run_kubernetes_executor
from steward.executor.kubernetes_steward import Standing, StewardUnreachable, standing_of
from steward.executor.node_clusters import cluster_for
from steward.executor.retirement import Retirements
from steward.executor.settings import ClusterSettingError, ExecutorSettings
from steward.executor.slurm import SlurmExecutor, drain_argv, run_slurm_executor
from steward.executor.slurm_commands import STEWARD_REASON, SlurmNode, drain_reason, parse_nodes
from steward_workflows.payloads import NodeRef

SLURM_NODES = [SlurmNode("slurm0", 8, "h100", frozenset({"IDLE"}), ""),
               SlurmNode("slurm1", 4, "", frozenset({"IDLE"}), ""),
               SlurmNode("login0", 0, "", frozenset({"IDLE"}), "")]


def k8s_node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "A100"}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


# -- the inventories' registrations carry the configured cluster --------------------------------------------

@pytest.mark.parametrize("cluster", ["", "ceres", "lab-2.a_b"])
def test_the_inventories_registrations_carry_the_configured_cluster(cluster: str) -> None:
    slurm = slurm_inventory.registrations(SLURM_NODES, {}, "hpc", cluster=cluster)
    k8s = kubernetes_inventory.registrations([k8s_node("g0", 8), k8s_node("cpu0", 0)], "k8s", cluster=cluster)
    assert [(r.node_id, r.cluster) for r in slurm] == [("slurm0", cluster), ("slurm1", cluster)]
    assert [(r.node_id, r.cluster) for r in k8s] == [("g0", cluster)]


# -- the rule (ADR 0085) -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("setting", "recorded", "remembered", "expected"), [
    ("", None, "", ""),                  # a new node, no setting: the default cluster, as always
    ("ceres", None, "", "ceres"),        # the setting
    ("ceres", "jupiter", "jupiter", "ceres"),  # the setting wins over any record (a changed setting moves nodes)
    ("", None, "ceres", "ceres"),        # no setting: the cluster its last registration named
    ("", "jupiter", "ceres", "jupiter"),  # ... or the one the ledger records (an operator's choice)
    ("", "default", "ceres", ""),        # the ledger's default cluster reads as "" (the payload it always had)
    ("default", None, "ceres", "default"),  # named on purpose: moves the node back (a new message id)
])
def test_the_cluster_of_a_registration(setting: str, recorded: str | None, remembered: str, expected: str) -> None:
    assert cluster_for(setting, recorded, remembered) == expected


def test_a_registration_s_message_id_names_its_cluster_and_is_unchanged_in_the_default_one(tmp_path: Path) -> None:
    r = Retirements(tmp_path / "retired.json")
    node = RegisterNode("n1", 8, "h100", ["spine", "n1"], "hpc")
    assert r.register_id(node) == "register-n1-8-spine/n1"  # as before ADR 0085: a restart is deduplicated
    assert r.register_id(RegisterNode("n1", 8, "h100", ["spine", "n1"], "hpc", "ceres")) == \
        "register-n1-8-spine/n1@ceres"  # a new setting is a new registration, not a duplicate
    assert r.register_id(RegisterNode("n1", 8, "h100", ["spine", "n1"], "hpc", "default")) == \
        "register-n1-8-spine/n1@default"


# -- a bad name is refused at start, naming it ----------------------------------------------------------------

BAD = ["two words", "-lead", "a/b", "é", "x" * 101, "ceres\n"]


@pytest.mark.parametrize("name", BAD)
def test_a_bad_cluster_name_is_refused_by_each_executor_naming_it(tmp_path: Path, name: str) -> None:
    options = ExecutorSettings(isolation="none", cluster=name)
    shown = ascii(name) if len(ascii(name)) <= 80 else ascii(name)[:77]
    with pytest.raises(ClusterSettingError, match="STEWARD_EXECUTOR_CLUSTER: the cluster name ") as refused:
        SlurmExecutor(Settings(run_dir=tmp_path, executor_id="hpc"), publisher=None, options=options)  # type: ignore[arg-type]
    assert shown in str(refused.value)
    with pytest.raises(ClusterSettingError, match="STEWARD_EXECUTOR_CLUSTER") as refused:
        KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), publisher=None, kube=None,  # type: ignore[arg-type]
                           options=options)
    assert shown in str(refused.value)


@pytest.mark.parametrize("run", [run_slurm_executor, run_kubernetes_executor])
def test_a_bad_cluster_setting_stops_the_executor_before_it_connects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Any) -> None:
    monkeypatch.setenv("STEWARD_EXECUTOR_CLUSTER", "two words")
    settings = Settings(run_dir=tmp_path, temporal_address="127.0.0.1:1")  # nothing answers there
    with pytest.raises(SystemExit, match="STEWARD_EXECUTOR_CLUSTER: the cluster name 'two words' must be 1 to 100"):
        asyncio.run(run(settings))


@pytest.mark.parametrize(("executor", "cluster", "message"), [
    ("slurm", "two words", "--cluster: the cluster name 'two words' must be"),
    ("kubernetes", "a/b", "--cluster: the cluster name 'a/b' must be"),
    ("local", "ceres", "--cluster names the cluster of a Slurm or Kubernetes executor's nodes"),
])
def test_up_refuses_a_bad_cluster_before_anything_starts(tmp_path: Path, executor: str, cluster: str,
                                                         message: str) -> None:
    with pytest.raises(CliError) as refused:
        bring_up(Settings(run_dir=tmp_path), executor=executor, cluster=cluster)
    assert refused.value.code == 2 and message in str(refused.value)
    assert not (tmp_path / "pids").exists() and not (tmp_path / "stack.env").exists()


# -- a restart without the setting does not move a node out of its cluster -------------------------------------

class Published:
    def __init__(self) -> None:
        self.sent: list[Envelope] = []

    def publish(self, env: Envelope) -> None:
        self.sent.append(env)

    def registrations(self) -> list[tuple[str, str, str]]:
        return [(e.payload["node_id"], e.payload["cluster"], e.id) for e in self.sent
                if e.type == "RegisterNode"]


def slurm_executor(tmp_path: Path, cluster: str, text: str) -> tuple[SlurmExecutor, Published]:
    published = Published()

    def runner(argv: list[str], env: dict[str, str]) -> str:
        assert argv[:4] == ["scontrol", "-o", "-d", "show"]
        return text

    ex = SlurmExecutor(Settings(run_dir=tmp_path, executor_id="hpc"), publisher=published,  # type: ignore[arg-type]
                       options=ExecutorSettings(isolation="none", cluster=cluster), runner=runner)
    ex.conf = str(tmp_path / "slurm.conf")  # no topology.conf beside it
    return ex, published


NODES_TEXT = (Path(__file__).parent / "slurm_outputs" / "nodes-idle.txt").read_text()


@pytest.mark.parametrize("first", ["ceres", "default"])
def test_a_slurm_executor_restarted_without_the_setting_keeps_its_nodes_cluster(tmp_path: Path, first: str) -> None:
    names = [n.name for n in parse_nodes(NODES_TEXT) if n.gpus]
    ex, published = slurm_executor(tmp_path, first, NODES_TEXT)
    asyncio.run(ex.register_nodes())
    assert {(n, c) for n, c, _ in published.registrations()} == {(n, first) for n in names}
    again, republished = slurm_executor(tmp_path, "", NODES_TEXT)  # the operator dropped --cluster
    asyncio.run(again.register_nodes())
    # the same cluster (ceres: the same registration, deduplicated; the default cluster reads as "", as always)
    assert {(n, cluster_name(c)) for n, c, _ in republished.registrations()} == {(n, first) for n in names}
    if first != "default":
        assert republished.registrations() == published.registrations()
    # a node Slurm lists later (added, or back after a retirement) joins the cluster of its last registration too
    again.registered.clear()
    again.follow_inventory(parse_nodes(NODES_TEXT), set())
    assert {(n, cluster_name(c)) for n, c, _ in republished.registrations()[len(names):]} == {
        (n, first) for n in names}


def test_a_slurm_executor_without_the_setting_registers_new_nodes_in_the_default_cluster(tmp_path: Path) -> None:
    ex, published = slurm_executor(tmp_path, "", NODES_TEXT)
    asyncio.run(ex.register_nodes())
    assert {c for _, c, _ in published.registrations()} == {""}
    assert all("@" not in mid for _, _, mid in published.registrations())  # the ids of before ADR 0085


class Kube:
    def __init__(self, nodes: list[dict[str, Any]]) -> None:
        self.listed = nodes

    def nodes(self) -> list[dict[str, Any]]:
        return self.listed


def k8s_executor(tmp_path: Path, cluster: str, standing: Standing | None,
                 gpus: int = 8) -> tuple[KubernetesExecutor, Published]:
    published = Published()
    ex = KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), publisher=published,  # type: ignore[arg-type]
                            kube=Kube([k8s_node("g0", gpus), k8s_node("g1", gpus)]),  # type: ignore[arg-type]
                            options=ExecutorSettings(isolation="none", cluster=cluster),
                            steward=(lambda: standing) if standing is not None else None)
    ex.refresh()
    return ex, published


def test_a_kubernetes_executor_restarted_without_the_setting_keeps_the_recorded_cluster(tmp_path: Path) -> None:
    ex, published = k8s_executor(tmp_path, "ceres", None)
    ex.register_nodes()
    assert [(n, c) for n, c, _ in published.registrations()] == [("g0", "ceres"), ("g1", "ceres")]
    # restarted without the setting, its GPUs changed (a new registration, not a duplicate): still in ceres
    again, republished = k8s_executor(tmp_path, "", None, gpus=4)
    again.register_nodes()
    assert [(n, c) for n, c, _ in republished.registrations()] == [("g0", "ceres"), ("g1", "ceres")]
    # an operator moved g1 to jupiter through the API: the ledger's record holds, read through the API
    recorded = standing_of({"nodes": [{"id": "g0", "cluster": "ceres"}, {"id": "g1", "cluster": "jupiter"}]})
    third, published3 = k8s_executor(tmp_path, "", recorded, gpus=2)
    third.register_nodes()
    assert [(n, c) for n, c, _ in published3.registrations()] == [("g0", "ceres"), ("g1", "jupiter")]


def test_a_first_read_that_fails_is_tried_again_by_the_first_round(tmp_path: Path) -> None:
    answers: list[Standing | None] = [None, Standing(clusters={"g0": "jupiter"})]

    def read() -> Standing:
        answer = answers.pop(0)
        if answer is None:
            raise StewardUnreachable("the API is not up yet")
        return answer

    ex = KubernetesExecutor(Settings(run_dir=tmp_path, executor_id="k8s"), publisher=Published(),  # type: ignore[arg-type]
                            kube=Kube([k8s_node("g0", 8)]), options=ExecutorSettings(isolation="none"),  # type: ignore[arg-type]
                            steward=read)
    assert not ex.read_first()
    assert ex.refresh() and ex.standing is not None and [n.cluster for n in ex.inventory()] == ["jupiter"]


def test_the_kubernetes_executor_s_read_gives_each_node_s_recorded_cluster() -> None:
    assert standing_of({}).clusters is None  # an answer without nodes: not read
    assert standing_of({"nodes": [{"id": "g0", "cluster": "default"}, {"id": "g1", "cluster": "ceres"}]}).clusters \
        == {"g0": "default", "g1": "ceres"}


# -- the Slurm drain carries the operator's reason ------------------------------------------------------------

@pytest.mark.parametrize(("reason", "expected"), [
    ("", "steward: drained by Steward"),
    ("fan failure, ticket 4711", "steward: fan failure, ticket 4711"),
    ("bad\nState=IDLE", "steward: bad State IDLE"),       # no second record, no key our parser would read
    ('say "hi" it\'s `x` \\ [a]', "steward: say hi it s x a"),  # nothing scontrol would unquote
    ("PSU\t\x00\u202eé  swap", "steward: PSU swap"),       # control, bidi, non-ASCII: spaces, collapsed
    ("=\"'", "steward: drained by Steward"),             # nothing left
    ("x" * 300, "steward: " + "x" * 200),
])
def test_the_slurm_drain_command_carries_the_operator_s_reason(reason: str, expected: str) -> None:
    assert drain_reason(reason) == expected
    assert drain_argv(NodeRef("slurm1", reason)) == [
        "scontrol", "update", "NodeName=slurm1", "State=DRAIN", f"Reason={expected}"]
    # read back as Slurm prints it (with its " [user@time]"), the drain is still Steward's
    line = f"NodeName=slurm1 Gres=gpu:sim:8 State=IDLE+DRAIN Reason={expected} [root@2026-12-04T19:00:00]"
    (node,) = parse_nodes(line)
    assert node.reason == expected and node.reason.startswith(STEWARD_REASON) and node.drained_by_steward
    assert node.flags == {"IDLE", "DRAIN"}

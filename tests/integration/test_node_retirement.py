"""Retiring nodes through the whole stack (ADR 0078; API -> Kafka -> ledger -> PostgreSQL -> scheduler): a store
that registered a cluster under its old node names (`node-19`, before the one scenario parser) and then its new
ones keeps both until `steward cluster apply --prune` says which it will retire and retires them; a retired node
leaves `node list` and the capacity (a job only the old nodes could hold is refused at submit), `steward node
retire` retires one by name and names an unknown one, registering a node again brings it back, and the audit
replays the log with its `NodeRetired` decisions. A node retired `--when-empty` while a job holds it is retiring
until that job ends, then retired by the same decision (ADR 0081)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import REPO, steward
from tests.integration.test_api_flows import SCENARIO, Client, mint

pytestmark = pytest.mark.integration

LAB = "retire-lab"
OLD = {"clusters": {LAB: {"executor": LAB, "gpu_model": "L4",
                          "nodes": [{"name": "node-19", "gpus": 4}, {"name": "node-20", "gpus": 4}]}}}
NEW = {"clusters": {LAB: {"executor": LAB, "gpu_model": "L4", "nodes": 1, "gpus_per_node": 4}}}


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def lab_nodes() -> list[str]:
    nodes = json.loads(steward("node", "list", "--output", "json").stdout)
    return sorted(n["id"] for n in nodes if n["cluster"] == LAB)


@pytest.fixture(scope="module")
def lab(stack: dict[str, object]) -> Iterator[None]:
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    yield
    # The session's stack is shared: the lab's nodes have no executor running, and a later module's job open to
    # any cluster was routed to one and lost at its start (test_workflows_contract in CI). Retire them.
    for node in lab_nodes():
        steward("node", "retire", node, "--reason", "test module over", "--when-empty")


def test_apply_prune_says_what_it_retires_then_retires_it_and_the_capacity_follows(lab: None,
                                                                                    tmp_path: Path) -> None:
    old, new = write(tmp_path, "old.yaml", OLD), write(tmp_path, "lab.yaml", NEW)
    steward("cluster", "apply", str(old))
    steward("cluster", "apply", str(new))  # the new names beside the old ones, as before ADR 0078
    assert lab_nodes() == [f"{LAB}-node-19", f"{LAB}-node-20", f"{LAB}-node000"]
    submit = ["submit", "--project", "ee9e8c", "--gpus", "8", "--cluster", LAB, "--output", "json", "--", "true"]
    # 8 GPUs fit on the old nodes: still placeable, and placed there by the scheduler
    job = json.loads(steward(*submit).stdout)["id"]

    # asked, and refused: nothing is applied
    asked = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "cluster", "apply", str(new), "--prune"],
                           capture_output=True, text=True, timeout=120, input="n\n", env=os.environ.copy())
    assert asked.returncode == 1 and "not confirmed" in asked.stderr, asked
    assert f"will retire {LAB}-node-19 (cluster {LAB}, executor {LAB}, 4 GPUs, ready): not in lab.yaml" in asked.stderr
    assert len(lab_nodes()) == 3

    busy = steward("cluster", "apply", str(new), "--prune", "--yes", check=False)
    if busy.returncode != 0:  # placed by now: the ledger keeps a node an attempt holds, and names the job
        assert busy.returncode == 1 and f"still runs {job}: drain it first" in busy.stderr, busy
        assert len(lab_nodes()) == 3
    steward("cancel", job, "--reason", "room for the retirement")
    done = steward("cluster", "apply", str(new), "--prune", "--yes", "--output", "json")
    assert f"will retire {LAB}-node-20" in done.stderr
    out = json.loads(done.stdout)
    assert (out["retired"], out["kept"]) == ([f"{LAB}-node-19", f"{LAB}-node-20"], [])
    assert lab_nodes() == [f"{LAB}-node000"]
    refused = steward(*submit, check=False)
    assert refused.returncode != 0 and "8 GPUs" in refused.stderr + refused.stdout, refused
    # the other clusters' nodes (the demo scenario's, another executor's) are not the file's to retire
    assert any(n["cluster"] != LAB for n in json.loads(steward("node", "list", "--output", "json").stdout))


def test_node_retire_by_name_and_a_retired_node_registered_again_is_back(lab: None, stack: dict[str, object],
                                                                         tmp_path: Path) -> None:
    steward("cluster", "apply", str(write(tmp_path, "lab.yaml", NEW)))
    gone = steward("node", "retire", f"{LAB}-nowhere", "--reason", "typo", check=False)
    assert gone.returncode == 2 and f"unknown node '{LAB}-nowhere'" in gone.stderr, gone
    done = json.loads(steward("node", "retire", f"{LAB}-node000", "--reason", "decommissioned", "--output",
                              "json").stdout)
    assert done["__typename"] == "NodeRetired"
    assert f"{LAB}-node000" not in lab_nodes()
    auditor = Client(str(stack["api"]), mint("auditor"))
    page = auditor("""{ auditEvents(first: 10, filter: {streamPrefix: "node-retire-lab-node000",
        types: ["NodeRetired"]}) { edges { node { payload metadata } } } }""")["auditEvents"]["edges"]
    (event,) = [e["node"] for e in page]
    assert (event["payload"]["reason"], event["payload"]["was"], event["payload"]["gpus"]) == ("decommissioned",
                                                                                                "ready", 4)
    assert event["metadata"]["actor"], event  # who retired it (the run folder's admin token here)
    steward("cluster", "apply", str(write(tmp_path, "lab.yaml", NEW)))
    assert lab_nodes() == [f"{LAB}-node000"]

    replayed = json.loads(steward("audit", "replay", "--output", "json", timeout=600).stdout)
    assert replayed["ok"] and replayed["reproduced"] == replayed["decisions"], replayed


def test_a_node_retired_when_empty_is_retiring_until_its_job_ends_then_retired_by_that_decision(
        lab: None, stack: dict[str, object], tmp_path: Path) -> None:
    steward("cluster", "apply", str(write(tmp_path, "lab.yaml", NEW)))
    node = f"{LAB}-node000"
    job = json.loads(steward("submit", "--project", "ee9e8c", "--gpus", "4", "--cluster", LAB, "--output", "json",
                             "--", "true").stdout)["id"]
    deadline = time.monotonic() + 90
    while json.loads(steward("job", "show", job, "--output", "json").stdout)["state"] not in ("PLACED", "RUNNING"):
        assert time.monotonic() < deadline, "the scheduler did not place the job on the lab's only node"
        time.sleep(0.5)
    refused = steward("node", "retire", node, "--reason", "decommissioned", check=False)
    assert refused.returncode == 2 and f"still runs {job}" in refused.stderr and "--when-empty" in refused.stderr
    pending = json.loads(steward("node", "retire", node, "--reason", "decommissioned", "--when-empty", "--output",
                                 "json").stdout)
    assert (pending["__typename"], pending["pending"], pending["jobs"]) == ("NodeRetired", True, [job]), pending
    told = steward("node", "retire", node, "--reason", "again", "--when-empty", check=False)
    assert told.returncode == 2 and "already retiring" in told.stderr, told
    (listed,) = [n for n in json.loads(steward("node", "list", "--output", "json").stdout) if n["id"] == node]
    assert listed["state"] == "retiring", listed
    steward("cancel", job, "--reason", "the node is going")
    deadline = time.monotonic() + 60
    while node in lab_nodes():
        assert time.monotonic() < deadline, "the cancellation of its last job did not retire the node"
        time.sleep(0.5)
    auditor = Client(str(stack["api"]), mint("auditor"))
    page = auditor(f"""{{ auditEvents(first: 10, filter: {{streamPrefix: "node-{node}",
        types: ["NodeRetirementPending", "NodeRetired"]}}) {{ edges {{ node {{ type payload metadata }} }} }} }}""")
    events = [e["node"] for e in page["auditEvents"]["edges"]]
    assert [e["type"] for e in events][-2:] == ["NodeRetirementPending", "NodeRetired"], events
    assert events[-2]["payload"]["jobs"] == [job] and events[-1]["payload"]["was"] == "retiring"
    assert events[-1]["metadata"]["command"] == "CancelJob", events[-1]  # retired by the decision that ended the job
    replayed = json.loads(steward("audit", "replay", "--output", "json", timeout=600).stdout)
    assert replayed["ok"] and replayed["reproduced"] == replayed["decisions"], replayed


def test_cluster_apply_keeps_a_drained_node_draining_and_refuses_a_node_beyond_the_bound(
        lab: None, tmp_path: Path) -> None:
    """ADR 0082 through the stack: applying the file again (which registers every node of it) leaves a node drained
    for repair draining until `node resume`; a file or a `node register` naming more than 1,024 GPUs a node is
    refused with the reason before anything is sent, and the registered node keeps what it was."""
    lab_file = write(tmp_path, "lab.yaml", NEW)
    steward("cluster", "apply", str(lab_file))
    node = f"{LAB}-node000"

    def listed() -> tuple[str, int]:
        (found,) = [n for n in json.loads(steward("node", "list", "--output", "json").stdout) if n["id"] == node]
        return str(found["state"]), int(found["gpus"])

    steward("node", "drain", node, "--reason", "fan failing")
    steward("cluster", "apply", str(lab_file))
    assert listed() == ("draining", 4)
    typo = write(tmp_path, "typo.yaml", {"clusters": {LAB: {"executor": LAB, "gpu_model": "L4", "nodes": 1,
                                                            "gpus_per_node": 80_000}}})
    refused = steward("cluster", "apply", str(typo), check=False)
    assert refused.returncode == 2 and "a node has at most 1,024 GPUs, got 80,000" in refused.stderr, refused
    big = steward("node", "register", node, "--gpus", "80000", "--path", f"{LAB}/{node}", check=False)
    assert big.returncode == 2 and "has 80,000 GPUs: a node has at most 1,024 GPUs" in big.stderr, big
    assert listed() == ("draining", 4)
    steward("node", "resume", node, "--reason", "fan replaced")
    assert listed() == ("ready", 4)

"""The demo's own live log replays and verifies (issue 19, "Replay that always reproduces"): the demo's
set-up and replay driver run on the real stack (Kafka, PostgreSQL, Temporal, ledger, scheduler, API, worker,
the simulated and the local executors) for a slice of the Philly trace at 120x, about two and a half real
minutes of arrivals with preemptions, session caps and restores; then `steward audit replay` reproduces
every decision recorded (the whole shared log: the demo's and any earlier test's) and `steward audit verify`
answers ok, while the scheduler still writes.

Run with STEWARD_TEST_SLOT=<n>. The driver and the simulated executor are stopped afterwards, the demo's
jobs cancelled, the policy put back and the node agent serving every node placed with it again, so later
tests see the stack as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from steward.demo.__main__ import local_agent_serves
from tests.integration.conftest import REPO, TEST_RUN_DIR, steward
from tests.integration.test_demo import Api

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

# 5 trace hours at 120x: 150 real seconds of arrivals; sessions capped at 15 trace minutes (7.5 real s),
# restored after 1 real minute, so caps, checkpoints and restores are in the log as well as preemptions
DEMO_ARGS = ["--hours", "5", "--speed", "120", "--sessions", "2", "--session-cap-hours", "0.25",
             "--restore-after-minutes", "1", "--wait", "60"]
DRIVE_S = 150.0  # how long the driver runs (from the demo's start) before the log is replayed


@pytest.fixture(scope="module")
def demo_log(stack: dict[str, object]) -> Iterator[dict[str, Any]]:
    from steward.domain.policy_settings import PolicySettings
    from steward.infra.processes import Paths, stop_own

    paths = Paths(TEST_RUN_DIR)
    for name in ("demo-driver", "sim-executor"):  # left by an earlier test or session on this slot
        stop_own(name, paths)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "steward.demo", *DEMO_ARGS], capture_output=True, text=True,
                          timeout=600, env=os.environ.copy(), cwd=REPO)
    assert proc.returncode == 0, f"the demo exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    config = json.loads((TEST_RUN_DIR / "demo" / "config.json").read_text())
    time.sleep(max(0.0, DRIVE_S - (time.monotonic() - started)))
    status = json.loads((TEST_RUN_DIR / "demo" / "status.json").read_text())
    for name in ("demo-driver", "sim-executor"):
        stop_own(name, paths)
    yield {"config": config, "status": status}
    api = Api()
    jobs = api("""{ jobs(first: 500, filter: {states: ["QUEUED", "PLACED", "RUNNING", "SUSPENDED"]})
        { edges { node { id } } } }""")["jobs"]["edges"]
    for edge in jobs:
        if edge["node"]["id"].startswith(config["tag"]):
            api("mutation($id: ID!) { cancelJob(id: $id, reason: \"demo replay test over\") { __typename } }",
                id=edge["node"]["id"])
    local_agent_serves(paths, "")  # later modules place on nodes of their own with this agent
    defaults = {k: v for k, v in PolicySettings().to_dict().items() if k in json.loads(
        (TEST_RUN_DIR / "demo" / "policy.json").read_text())}
    api("mutation($i: PolicyInput!) { setPolicy(input: $i) { __typename } }",
        i={"settings": defaults, "reason": "demo replay test over"})


def test_the_demos_live_log_replays_every_decision_and_verifies(demo_log: dict[str, Any]) -> None:
    tag = demo_log["config"]["tag"]
    assert demo_log["status"]["submitted"] > 50, demo_log["status"]
    api = Api()
    # the contract's decisions are in the log: preemptions asked for (the stops, session caps and lost
    # attempts that follow come as fast as the loaded machine lets the worker time them)
    assert api.events(f"job-{tag}-", ["JobPreemptionRequested"]), "the slice asked for no preemption"

    proc = steward("audit", "replay", "--json", check=False, timeout=600)
    report = json.loads(proc.stdout)
    assert report["decisions"] > 300, report
    # every difference and every unreplayable decision is listed with what it was
    assert len(report["differences"]) == min(report["different"], 20), report
    assert len(report["unreplayable_decisions"]) == min(report["unreplayable"], 20), report
    assert report["reproduced"] == report["decisions"] and report["ok"], json.dumps(
        {k: report[k] for k in ("decisions", "reproduced", "different", "unreplayable", "differences",
                                "unreplayable_decisions")}, indent=1)[:20000]
    assert proc.returncode == 0, proc.stderr

    verified = steward("audit", "verify", "--json", check=False, timeout=600)
    result = json.loads(verified.stdout)
    assert verified.returncode == 0 and result["ok"], result
    assert result["events"] >= report["events"]

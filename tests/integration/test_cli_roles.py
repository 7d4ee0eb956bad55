"""The CLI on the API, as each role uses it (tokens from STEWARD_TOKEN), against the whole stack: every
command takes `--output table|json`; refusals go to stderr, one line, non-zero, saying what to do."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, steward

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"


def as_(token: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ | {"STEWARD_TOKEN": token})
    if check and proc.returncode != 0:
        raise AssertionError(f"steward {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    assert "Traceback" not in proc.stderr
    return proc


def token(role: str, *scopes: str) -> str:
    args = ["token", "create", "--role", role, "--output", "json"]
    for s in scopes:
        args += ["--scope", s]
    value: str = json.loads(steward(*args).stdout)["token"]
    return value


@pytest.fixture(scope="module")
def roles(stack: dict[str, object]) -> dict[str, str]:
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    return {"researcher": token("researcher", "7f04ca"), "manager": token("manager", "platform"),
            "auditor": token("auditor")}


def test_token_create_prints_the_token_as_json(stack: dict[str, object]) -> None:
    out = json.loads(steward("token", "create", "--role", "auditor", "--output", "json").stdout)
    assert out["token"].startswith("stw_") and out["role"] == "auditor"
    proc = steward("token", "create", "--role", "manager", "--output", "json", check=False)
    assert proc.returncode == 2 and "--scope" in proc.stderr


def test_researcher_commands(roles: dict[str, str]) -> None:
    r = roles["researcher"]
    assert json.loads(as_(r, "whoami", "--output", "json").stdout)["role"] == "researcher"
    huge = as_(r, "submit", "-p", "7f04ca", "-g", "1000", "--", "true", check=False)
    assert huge.returncode == 2 and "could ever give is 320 GPUs" in huge.stderr  # refused at submit
    steward("node", "drain", "node039", "--reason", "cli roles: a job too large for the nodes taking work")
    try:
        researcher_waits(r)
    finally:
        steward("node", "resume", "node039", "--reason", "cli roles: done")
    session = json.loads(as_(r, "session", "open", "-p", "7f04ca", "-g", "1", "--cap", "600", "--output", "json",
                             "--", "sleep", "1").stdout)
    assert session["jobClass"] == "interactive"
    foreign = as_(r, "submit", "-p", "b436b2", "--", "true", check=False)
    assert foreign.returncode == 2 and "not authorised" in foreign.stderr


def researcher_waits(r: str) -> None:
    """A job the registered nodes could hold, but not those taking work now, waits and says why."""
    job = json.loads(as_(r, "submit", "-p", "7f04ca", "-g", "320", "--output", "json", "--", "true").stdout)
    assert job["state"] == "QUEUED"
    jobs = json.loads(as_(r, "jobs", "--output", "json").stdout)
    assert job["id"] in {j["id"] for j in jobs} and {j["project"] for j in jobs} == {"7f04ca"}
    why = json.loads(as_(r, "why", job["id"], "--output", "json").stdout)
    assert why["whyPending"]["reason"] == "too_large"
    assert "can never fit" in as_(r, "why", job["id"]).stdout
    queue = json.loads(as_(r, "queue", "--output", "json").stdout)
    assert any(e["job"] and e["job"]["id"] == job["id"] for e in queue["entries"])
    assert job["id"] in as_(r, "queue").stdout
    assert as_(r, "job", "show", job["id"]).stdout.count("JobSubmitted") == 1
    cancelled = json.loads(as_(r, "cancel", job["id"], "--reason", "too big", "--output", "json").stdout)
    assert cancelled["state"] == "CANCELLED"
    again = as_(r, "cancel", job["id"], check=False)
    assert again.returncode == 2 and "already CANCELLED" in again.stderr


def test_manager_commands(roles: dict[str, str]) -> None:
    m = roles["manager"]
    tree = json.loads(as_(m, "tree", "show", "--output", "json").stdout)
    assert {a["name"] for a in tree} == {"platform", "6c71a0", "2869ce", "0e4a51", "ed69ec"}
    assert "platform" in as_(m, "tree", "show").stdout
    done = json.loads(as_(m, "allocate", "platform", "6c71a0=0.35", "2869ce=0.35", "--reason", "review",
                          "--output", "json").stdout)
    assert done["__typename"] == "AllocationsChanged"
    refused = as_(m, "allocate", "research", "ee9e8c=0.45", "--reason", "not mine", check=False)
    assert refused.returncode == 2 and "not authorised" in refused.stderr
    bad = as_(m, "allocate", "platform", "6c71a0", "--reason", "x", check=False)
    assert bad.returncode == 2 and "CHILD=SHARE" in bad.stderr


def test_auditor_reads_but_cannot_act(roles: dict[str, str]) -> None:
    a = roles["auditor"]
    assert json.loads(as_(a, "whoami", "--output", "json").stdout)["capabilities"] == ["read_audit"]
    refused = as_(a, "submit", "-p", "7f04ca", "--", "true", check=False)
    assert refused.returncode == 2 and "may not use 'submitJob'" in refused.stderr
    # an auditor without access to the store verifies and travels in time through the API
    verified = json.loads(as_(a, "audit", "verify", "--api", "--output", "json").stdout)
    assert verified["ok"] is True and verified["events"] > 0 and verified["via"] == "api"
    state = json.loads(as_(a, "audit", "state", "--api", "--at", str(time.time()), "--output", "json").stdout)
    assert state["position"] > 0 and {x["name"] for x in state["allocations"]} >= {"platform", "research"}
    no = as_(roles["researcher"], "audit", "verify", "--api", check=False)
    assert no.returncode == 1 and "may not use 'verify'" in no.stderr


def test_operator_node_commands(stack: dict[str, object], roles: dict[str, str]) -> None:
    nodes = json.loads(steward("node", "list", "--output", "json").stdout)
    last = sorted(n["id"] for n in nodes)[-1]
    drained = json.loads(steward("node", "drain", last, "--reason", "maintenance", "--output", "json").stdout)
    assert drained["__typename"] == "NodeDraining"
    assert any(n["id"] == last and n["state"] == "draining"
               for n in json.loads(steward("node", "list", "--output", "json").stdout))
    assert json.loads(steward("node", "resume", last, "--reason", "done", "--output", "json").stdout)["id"] == last
    refused = as_(roles["manager"], "node", "drain", last, "--reason", "x", check=False)
    assert refused.returncode == 2 and "not authorised" in refused.stderr


def test_revoked_and_bad_tokens_say_what_to_do(stack: dict[str, object]) -> None:
    out = json.loads(steward("token", "create", "--role", "auditor", "--output", "json").stdout)
    assert as_(out["token"], "whoami").returncode == 0
    steward("token", "revoke", out["id"])
    proc = as_(out["token"], "whoami", check=False)
    assert proc.returncode == 1 and "STEWARD_TOKEN" in proc.stderr and "steward token create" in proc.stderr
    assert as_("garbage", "jobs", check=False).returncode == 1


def test_preempt_goes_through_the_api(roles: dict[str, str]) -> None:
    """`steward preempt` is the requestPreemption mutation: managers in their subtree, refused for others,
    and the ledger's answer (accepted, or rejected with its reason) is what the CLI prints."""
    m, r = roles["manager"], roles["researcher"]
    # the job ignores the checkpoint signal: a plain `sleep` would die of it at once, its attempt would end, and
    # the requeued job's next attempt would take a second preemption (what CI saw once)
    job = json.loads(as_(r, "submit", "-p", "7f04ca", "-g", "1", "--min-runtime", "0", "--output", "json",
                         "--", "sh", "-c", "trap '' TERM USR1 USR2 INT HUP; exec sleep 600").stdout)
    refused = as_(r, "preempt", job["id"], "--reason", "mine", check=False)
    assert refused.returncode == 2 and "may not use 'requestPreemption'" in refused.stderr
    foreign = as_(m, "preempt", job["id"], "--reason", "not my subtree", check=False)
    assert foreign.returncode == 2 and "not authorised" in foreign.stderr
    deadline = time.monotonic() + 90
    state = job["state"]
    while state != "RUNNING" and time.monotonic() < deadline:
        time.sleep(1)
        state = json.loads(steward("job", "show", job["id"], "--output", "json").stdout)["state"]
    if state != "RUNNING":  # the cluster was full: a waiting job is not preempted, and the CLI says why
        queued = steward("preempt", job["id"], "--reason", "demo", check=False)
        assert queued.returncode == 2 and "rejected (invalid_transition)" in queued.stderr
        return
    # once per attempt: asking again for the attempt just asked is refused. The second request names that
    # attempt: on a loaded machine the attempt may end before it (lost when its executor's heartbeats lag, or
    # stopped), and an unpinned request would then rightly stop the next attempt (issue 22: the flake)
    done = json.loads(steward("preempt", job["id"], "--reason", "demo", "--grace", "600", "--output",
                              "json").stdout)
    assert done["__typename"] == "PreemptionRequested" and done["graceS"] == 600.0
    again = steward("preempt", job["id"], "--reason", "twice", "--attempt", str(done["attempt"]), check=False)
    assert again.returncode == 2 and "rejected (invalid_transition)" in again.stderr
    as_(r, "cancel", job["id"], "--reason", "done with it", check=False)  # its GPU back for the tests after

"""The submit preview and the debug quota through the whole stack (API -> Kafka -> ledger -> PostgreSQL, the
scheduler's view): a researcher is told at submit whether a job runs funded or unfunded and why, and whether
a debug job is inside its allocation's debug quota; a manager sets a quota with the CLI, a bad one is refused
by the ledger with its reason (an event in the chain), and the audit replays and verifies the log."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.conftest import steward
from tests.integration.test_api_flows import PAYLOAD, SCENARIO, Client, mint

pytestmark = pytest.mark.integration

OUTLOOK = "funded reason fundedByLane protectionS allocation inUseGpus entitledGpus message " \
          "qualification { qualified reason quotaGpus inUseGpus aheadGpus }"
SUBMIT = f"""mutation($input: SubmitJobInput!) {{ submitJob(input: $input) {{ {PAYLOAD}
    ... on JobAccepted {{ job {{ id }} outlook {{ {OUTLOOK} }} }} }} }}"""
PREVIEW = f"""query($input: SubmitJobInput!) {{ submitOutlook(input: $input) {{ __typename
    ... on NotAuthorised {{ message }} ... on InvalidInput {{ field message }}
    ... on SubmitOutlook {{ {OUTLOOK} }} }} }}"""


@pytest.fixture(scope="module")
def clients(stack: dict[str, object]) -> dict[str, Client]:
    steward("tree", "apply", str(SCENARIO))
    steward("cluster", "apply", str(SCENARIO))
    url = str(stack["api"])
    return {"researcher": Client(url, mint("researcher", "ee9e8c")),
            "manager": Client(url, mint("manager", "research")), "auditor": Client(url, mint("auditor"))}


def job(**kw: Any) -> dict[str, Any]:
    return {"input": {"project": "ee9e8c", "gpus": 1, "minRuntimeS": 600, "command": ["true"]} | kw}


def test_the_researcher_is_told_at_submit_and_the_manager_sets_a_quota(clients: dict[str, Client]) -> None:
    me, manager = clients["researcher"], clients["manager"]
    unfunded = me(SUBMIT, **job(minRuntimeS=0))["submitJob"]
    assert unfunded["__typename"] == "JobAccepted", unfunded
    assert (unfunded["outlook"]["funded"], unfunded["outlook"]["reason"]) == (False, "unfunded_by_request")
    assert "it asks for no protection" in unfunded["outlook"]["message"]
    funded = me(SUBMIT, **job(gpus=1, minRuntimeS=600))["submitJob"]["outlook"]
    assert funded["reason"] in ("funded", "entitlement_used") and funded["allocation"] == "ee9e8c"
    assert funded["entitledGpus"] > 0

    debug = job(jobClass="debug", minRuntimeS=300)
    default = me(PREVIEW, **debug)["submitOutlook"]["qualification"]
    assert default["reason"] in ("within_quota", "over_quota") and default["quotaGpus"] >= 4  # the floor

    done = json.loads(steward("tree", "quota", "ee9e8c", "0", "--reason", "no debug this week", "--output",
                              "json").stdout)  # the CLI, as the run folder's admin
    assert done["__typename"] == "DebugQuotaChanged", done
    quota = next(a["debugQuotaGpus"] for a in manager("{ allocations { name debugQuotaGpus { gpus setGpus "
                                                      "isDefault setOn } } }")["allocations"] if a["name"] == "ee9e8c")
    assert quota == {"gpus": 0, "setGpus": 0, "isDefault": False, "setOn": "ee9e8c"}
    over = me(PREVIEW, **debug)["submitOutlook"]["qualification"]
    assert (over["qualified"], over["reason"], over["quotaGpus"]) == (False, "over_quota", 0)

    bad = manager(f"""mutation {{ setDebugQuota(allocation: "ee9e8c", gpus: -3, reason: "oops") {{ {PAYLOAD} }}
        }}""")["setDebugQuota"]
    assert bad["__typename"] == "Rejected" and "must be >= 0 GPUs, got -3" in bad["reason"]
    back = manager(f"""mutation {{ setDebugQuota(allocation: "ee9e8c", gpus: null, reason: "back") {{ {PAYLOAD} }}
        }}""")["setDebugQuota"]
    assert back["__typename"] == "DebugQuotaChanged"

    # the whole shared stack's log (this test's decisions and every earlier test's) replays and verifies
    replayed = json.loads(steward("audit", "replay", "--output", "json", timeout=600).stdout)
    assert replayed["ok"] and replayed["reproduced"] == replayed["decisions"], replayed
    assert clients["auditor"]("{ verify { ok } }")["verify"]["ok"] is True

"""Single sign-on through the whole stack (Kafka, the ledger, PostgreSQL, the API as `steward up` runs it)
and the real OpenID provider: the group mapping an admin sets travels as a command through Kafka to the
ledger, a person signed in at the provider is who the API takes them for, and the commands they send
are recorded with their name."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.integration.conftest import REPO, steward
from tests.integration.oidc_signin import sign_in

pytestmark = pytest.mark.integration


def as_person(token: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / ".venv" / "bin" / "steward"), *args], capture_output=True, text=True,
                          timeout=120, env=os.environ | {"STEWARD_TOKEN": token})


def test_a_person_mapped_through_the_ledger_acts_under_their_name(stack: dict[str, object],
                                                                   oidc_provider: str) -> None:
    ada = sign_in(oidc_provider, "ada", "ada-pass")["id_token"]
    refused = as_person(ada, "whoami")
    assert refused.returncode == 1
    assert "Ada Admin (user-ada) is signed in, but their groups (steward-admins) map to no Steward role" \
        in refused.stderr and "Traceback" not in refused.stderr
    # the operator (the run folder's admin token) maps the admins' group: a command through Kafka
    steward("identity", "map", "steward-admins=admin", "--reason", "the lab's admins")
    me = json.loads(as_person(ada, "whoami", "--output", "json").stdout)
    assert (me["name"], me["subject"], me["role"], me["via"]) == ("Ada Admin", "user-ada", "admin", "oidc")
    # Ada sets the mapping herself: recorded with her name
    done = as_person(ada, "identity", "map", "steward-admins=admin", "compliance=auditor", "--reason", "auditors too")
    assert done.returncode == 0, done.stderr
    shown = json.loads(as_person(ada, "identity", "show", "--output", "json").stdout)
    assert (shown["setBy"], shown["setByName"], shown["reason"]) == ("user-ada", "Ada Admin", "auditors too")
    assert [r["group"] for r in shown["rules"]] == ["steward-admins", "compliance"]

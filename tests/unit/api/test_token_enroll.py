"""Enrolling a token minted elsewhere (`steward token enroll`; the Helm chart mints the Kubernetes executor's
read-only token and a hook Job enrolls it at every install and upgrade): idempotent, refused when the id is
taken by another token or was revoked, and a rotated Secret's token replaces the one enrolled before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from steward.auth.tokens import InvalidTokenRequest, TokenStore
from steward.store.eventstore import EventStore
from steward.store.migrate import upgrade

TOKEN = "stw_chartmint0000001_" + "s" * 43
ROTATED = "stw_chartmint0000002_" + "t" * 43


@pytest.fixture()
def tokens(tmp_path: Path) -> TokenStore:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    return TokenStore(EventStore.from_url(url))


def test_a_token_is_enrolled_once_and_authenticates_as_its_role(tokens: TokenStore) -> None:
    info, new = tokens.enroll(TOKEN, role="auditor", subject="kubernetes-executor:k8s", created_by="helm")
    assert new and (info.token_id, info.role, info.subject, info.scopes) == (
        "chartmint0000001", "auditor", "kubernetes-executor:k8s", ())
    again, new = tokens.enroll(TOKEN, role="auditor", subject="kubernetes-executor:k8s", created_by="helm")
    assert not new and again == info  # a hook run at every upgrade changes nothing
    principal = tokens.authenticate(TOKEN)
    assert (principal.subject, principal.role.value) == ("kubernetes-executor:k8s", "auditor")


@pytest.mark.parametrize(("token", "role", "subject", "problem"), [
    ("not-a-token", "auditor", "x", "not an API token"),
    ("stw_short_abc", "auditor", "x", "too short"),
    (TOKEN, "researcher", "x", "needs --scope"),
    (TOKEN, "wizard", "x", "unknown role"),
    ("stw_chartmint0000001_" + "z" * 43, "auditor", "kubernetes-executor:k8s", "recorded for another token"),
    (TOKEN, "admin", "kubernetes-executor:k8s", "recorded for another token"),
    (TOKEN, "auditor", "someone-else", "recorded for another token"),
])
def test_what_is_refused(tokens: TokenStore, token: str, role: str, subject: str, problem: str) -> None:
    tokens.enroll(TOKEN, role="auditor", subject="kubernetes-executor:k8s", created_by="helm")
    with pytest.raises(InvalidTokenRequest, match=problem):
        tokens.enroll(token, role=role, subject=subject, created_by="helm")


def test_a_revoked_token_is_not_enrolled_again_and_a_rotated_one_replaces_the_old(tokens: TokenStore) -> None:
    kept, _ = tokens.create(role="auditor", scopes=[], subject="kubernetes-executor:k8s", created_by="cli:alice")
    tokens.enroll(TOKEN, role="auditor", subject="kubernetes-executor:k8s", created_by="helm")
    tokens.enroll(ROTATED, role="auditor", subject="kubernetes-executor:k8s", created_by="helm", replace=True)
    assert not tokens.is_valid(TOKEN) and tokens.is_valid(ROTATED)
    assert tokens.is_valid(kept)  # a token a person made for the same subject is theirs to revoke
    with pytest.raises(InvalidTokenRequest, match="was revoked"):
        tokens.enroll(TOKEN, role="auditor", subject="kubernetes-executor:k8s", created_by="helm")


def test_the_cli_enrolls_from_a_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    upgrade(url)
    (tmp_path / "token").write_text(TOKEN + "\n")
    env = os.environ | {"STEWARD_STORE_URL": url, "STEWARD_RUN_DIR": str(tmp_path)}
    args = [sys.executable, "-m", "steward.cli.main", "token", "enroll", "--role", "auditor", "--subject",
            "kubernetes-executor:k8s", "--token-file", str(tmp_path / "token"), "--by", "helm", "--replace",
            "--output", "json"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"id": "chartmint0000001", "role": "auditor",
                                        "subject": "kubernetes-executor:k8s", "enrolled": True}
    second = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert second.returncode == 0 and json.loads(second.stdout)["enrolled"] is False
    missing = subprocess.run([*args[:-6], str(tmp_path / "nope")], capture_output=True, text=True, timeout=120,
                             env=env)
    assert missing.returncode != 0 and "cannot read the token file" in missing.stderr

"""Single sign-on against the real OpenID provider (oidc-provider from npm, started by infra/oidc.sh): people
sign in through the provider's own endpoints (authorization code + PKCE, its login form), the API verifies
their ID tokens by discovery and JWKS, the group mapping an admin recorded decides their role, every
command they send records them (subject and name), jobs have owners, and a refused token says why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from steward.api.settings import ApiSettings
from steward.auth.oidc import OidcConfig, OidcVerifier, SignInRefused
from steward.domain.identity import GroupRule
from tests.integration.oidc_signin import approve_device, sign_in
from tests.unit.api.harness import Server, serve

PEOPLE = {"ada": "ada-pass", "maria": "maria-pass", "rui": "rui-pass", "aud": "aud-pass", "nobody": "nobody-pass"}
RULES: list[dict[str, Any]] = [
    {"group": "steward-admins", "role": "admin", "scopes": []},
    {"group": "physics-leads", "role": "manager", "scopes": ["team-a"]},
    {"group": "physics-researchers", "role": "researcher", "scopes": ["a1"]},
    {"group": "compliance", "role": "auditor", "scopes": []},
]
SET_MAPPING = """mutation($rules: [GroupRuleInput!]!, $reason: String!) {
  setGroupMapping(rules: $rules, reason: $reason) { __typename ... on GroupMappingChanged { position rules }
    ... on Rejected { code reason } ... on NotAuthorised { message } ... on InvalidInput { message } } }"""
ME = "{ me { subject name role scopes via } }"


@pytest.fixture(scope="module")
def tokens(oidc_provider: str) -> dict[str, str]:
    """Each person's ID token, from signing in at the provider."""
    return {login: sign_in(oidc_provider, login, password)["id_token"] for login, password in PEOPLE.items()}


@pytest.fixture(scope="module")
def api(oidc_provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("oidc-api")
    settings = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, oidc_issuer=oidc_provider,
                           api_auth_cache_s=0.0)
    with serve(tmp, settings) as server:
        yield server


def _mapped(api: Server) -> None:
    body = api.gql(SET_MAPPING, {"rules": RULES, "reason": "the lab's groups"}, api.tokens["admin"])
    assert body["data"]["setGroupMapping"]["__typename"] == "GroupMappingChanged", body


def test_the_id_token_names_the_person_and_their_groups(oidc_provider: str, tokens: dict[str, str]) -> None:
    v = OidcVerifier(OidcConfig(issuer=oidc_provider), lambda: ())
    person = v.identity(tokens["rui"])
    assert (person.subject, person.name, person.groups) == ("user-rui", "Rui Researcher", ("physics-researchers",))


@pytest.mark.parametrize(("login", "role", "scopes"), [
    ("ada", "admin", ()), ("maria", "manager", ("team-a",)), ("rui", "researcher", ("a1",)),
    ("aud", "auditor", ()),
])
def test_the_group_mapping_decides_the_role(oidc_provider: str, tokens: dict[str, str], login: str, role: str,
                                            scopes: tuple[str, ...]) -> None:
    rules = tuple(GroupRule(str(r["group"]), str(r["role"]), tuple(r["scopes"])) for r in RULES)
    p = OidcVerifier(OidcConfig(issuer=oidc_provider), lambda: rules).verify(tokens[login])
    assert (p.role.value, p.scopes, p.via) == (role, scopes, "oidc")
    # the same person, with their group mapped elsewhere, has the other role
    moved = tuple(GroupRule(r.group, "auditor" if r.role != "auditor" else "admin", ()) for r in rules)
    other = OidcVerifier(OidcConfig(issuer=oidc_provider), lambda: moved).verify(tokens[login])
    assert other.role.value == ("admin" if role == "auditor" else "auditor")


@pytest.mark.parametrize(("config", "later_s", "says"), [
    (lambda iss: OidcConfig(issuer=iss, audiences=("another-app",)), 0, "is for audience 'steward-cli', not one of"),
    (lambda iss: OidcConfig(issuer=iss + "/other"), 0, "was issued by 'http://127.0.0.1:.*'; Steward trusts"),
    # seen from more than an hour later: the token's expiry (the provider's 3,600 s) has passed
    (lambda iss: OidcConfig(issuer=iss), 3600 + 31, "the sign-in token expired at .* UTC; sign in again"),
    # and seen from before it was issued
    (lambda iss: OidcConfig(issuer=iss), -120, "not valid yet"),
])
def test_a_refused_token_says_why(oidc_provider: str, tokens: dict[str, str], config: Any, later_s: float,
                                  says: str) -> None:
    verifier = OidcVerifier(config(oidc_provider), lambda: (GroupRule("steward-admins", "admin"),),
                            clock=lambda: time.time() + later_s)
    with pytest.raises(SignInRefused, match=says):
        verifier.verify(tokens["ada"])
    # the same token, seen now by a verifier configured as the provider says, is accepted
    assert OidcVerifier(OidcConfig(issuer=oidc_provider),
                        lambda: (GroupRule("steward-admins", "admin"),)).verify(tokens["ada"]).subject == "user-ada"


def test_a_token_with_a_forged_signature_is_refused(oidc_provider: str, tokens: dict[str, str]) -> None:
    claims = jwt.decode(tokens["rui"], options={"verify_signature": False})
    header = jwt.get_unverified_header(tokens["rui"])
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode({**claims, "groups": ["steward-admins"]}, key, algorithm="RS256",
                        headers={"kid": header["kid"]})
    with pytest.raises(SignInRefused, match="signature does not verify"):
        OidcVerifier(OidcConfig(issuer=oidc_provider), lambda: ()).verify(forged)


def test_the_api_refuses_a_person_until_their_group_is_mapped_and_says_why(api: Server,
                                                                          tokens: dict[str, str]) -> None:
    before = api.post(ME, token=tokens["nobody"])
    assert before.status_code == 401
    message = before.json()["errors"][0]["message"]
    assert "Nemo Nobody (user-nobody) is signed in, but their groups (visitors) map to no Steward role" in message
    _mapped(api)
    me = api.gql(ME, token=tokens["rui"])["data"]["me"]
    assert me == {"subject": "user-rui", "name": "Rui Researcher", "role": "researcher", "scopes": ["a1"],
                  "via": "oidc"}
    assert api.post(ME, token=tokens["nobody"]).status_code == 401


def test_an_expired_or_foreign_token_gets_a_clear_401(api: Server, tokens: dict[str, str]) -> None:
    claims = jwt.decode(tokens["rui"], options={"verify_signature": False})
    foreign = jwt.encode({**claims, "iss": "https://idp.elsewhere.example"}, "x" * 32, algorithm="HS256")
    resp = api.post(ME, token=foreign)
    assert resp.status_code == 401
    assert "not authenticated: the sign-in token" in resp.json()["errors"][0]["message"]


def test_commands_record_the_person_and_jobs_their_owner(api: Server, tokens: dict[str, str]) -> None:
    _mapped(api)
    body = api.gql("""mutation { submitJob(input: {jobId: "rui-1", project: "a1", gpus: 1, minRuntimeS: 0,
        command: ["true"]}) { __typename } }""", token=tokens["rui"])
    assert body["data"]["submitJob"]["__typename"] == "JobAccepted", body
    ev = next(e for e in api.store.stream("job-rui-1") if e.type == "JobSubmitted")
    assert (ev.metadata["actor"], ev.metadata["actor_name"]) == ("user-rui", "Rui Researcher")
    # the group mapping itself records who set it
    mapping = api.gql("{ groupMapping { setBy rules { group role scopes } } }", token=tokens["aud"])
    assert mapping["data"]["groupMapping"]["rules"] == RULES
    q = """query($mine: Boolean!) {
      jobs(first: 50, filter: {mine: $mine}) { edges { node { id owner { subject name } } } } }"""
    mine = api.gql(q, {"mine": True}, tokens["rui"])["data"]["jobs"]["edges"]
    assert [e["node"] for e in mine] == [{"id": "rui-1", "owner": {"subject": "user-rui", "name": "Rui Researcher"}}]
    everyone = api.gql(q, {"mine": False}, tokens["rui"])["data"]["jobs"]["edges"]
    assert {e["node"]["id"] for e in everyone} > {"rui-1"}  # a1's other jobs (submitted by alice's token) too
    assert {e["node"]["owner"]["subject"] for e in everyone} == {"user-rui", "alice"}
    # `steward why` and `steward job show` name the person
    why = _steward(api, tokens["rui"], "why", "rui-1")
    assert "submitted by: Rui Researcher (user-rui)" in why
    assert "Rui Researcher (user-rui)" in _steward(api, tokens["aud"], "job", "show", "rui-1")


def _steward(api: Server, token: str, *args: str) -> str:
    env = {**os.environ, "STEWARD_TOKEN": token, "STEWARD_API_URL": api.url, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-m", "steward.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(("role", "scopes", "refused"), [
    ("researcher", ["a1"], None),
    ("researcher", ["a2"], "outside your scopes: a2"),
    ("researcher", ["cluster"], "outside your scopes: cluster"),
    ("manager", ["a1"], "your role is researcher"),
    ("admin", [], "your role is researcher"),
])
def test_a_persons_api_token_is_theirs_and_no_wider(api: Server, tokens: dict[str, str], role: str,
                                                     scopes: list[str], refused: str | None) -> None:
    _mapped(api)
    q = """mutation($role: String!, $subject: String!, $scopes: [String!]) {
      createToken(role: $role, subject: $subject, scopes: $scopes) { __typename
        ... on TokenCreated { token info { subject createdBy } } ... on NotAuthorised { message } } }"""
    res = api.gql(q, {"role": role, "subject": "user-rui", "scopes": scopes}, tokens["rui"])["data"]["createToken"]
    if refused is None:
        assert res["info"] == {"subject": "user-rui", "createdBy": "user-rui"}
        me = api.gql(ME, token=res["token"])["data"]["me"]
        assert (me["subject"], me["role"], me["scopes"]) == ("user-rui", "researcher", ["a1"])
    else:
        assert res["__typename"] == "NotAuthorised" and refused in res["message"], res
    for_someone_else = api.gql(q, {"role": "researcher", "subject": "alice", "scopes": ["a1"]}, tokens["rui"])
    assert for_someone_else["data"]["createToken"]["__typename"] == "NotAuthorised"


def test_steward_token_create_mints_a_token_the_signed_in_person_owns(api: Server, tokens: dict[str, str]) -> None:
    _mapped(api)
    out = json.loads(_steward(api, tokens["rui"], "token", "create", "--role", "researcher", "--scope", "a1",
                              "--output", "json"))
    assert (out["subject"], out["via"]) == ("user-rui", "api")


def test_steward_login_signs_in_with_the_device_flow(api: Server, oidc_provider: str, tmp_path: Path) -> None:
    _mapped(api)
    token_file = tmp_path / "token"
    env = {**os.environ, "STEWARD_OIDC_ISSUER": oidc_provider, "STEWARD_TOKEN_FILE": str(token_file),
           "STEWARD_API_URL": api.url, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("STEWARD_TOKEN", None)
    proc = subprocess.Popen([sys.executable, "-m", "steward.cli.main", "login", "--wait", "60", "--output", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    link = ""
    for line in proc.stderr:
        if line.startswith("To sign in, open "):
            link = line.removeprefix("To sign in, open ").strip()
            break
    assert link, "steward login printed no link"
    done = threading.Thread(target=approve_device, args=(link, oidc_provider, "maria", "maria-pass"))
    done.start()
    out, err = proc.communicate(timeout=120)
    done.join(timeout=30)
    assert proc.returncode == 0, err
    assert '"name": "Maria Manager"' in out and '"role": "manager"' in out
    assert token_file.stat().st_mode & 0o777 == 0o600
    me = api.gql(ME, token=token_file.read_text().strip())["data"]["me"]
    assert (me["subject"], me["scopes"]) == ("user-maria", ["team-a"])


@pytest.mark.parametrize(("issuer", "says"), [
    (lambda iss: iss + "/", "names issuer 'http://127.0.0.1:[0-9]+', not the configured"),
    (lambda iss: "http://127.0.0.1:9", "the OpenID provider does not answer at http://127.0.0.1:9/"),
])
def test_discovery_must_answer_and_name_the_configured_issuer(oidc_provider: str, issuer: Any, says: str) -> None:
    with pytest.raises(SignInRefused, match=says):
        OidcVerifier(OidcConfig(issuer=issuer(oidc_provider)), lambda: ()).discover()

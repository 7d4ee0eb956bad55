"""A person signs in to the web UI through the real OpenID provider (infra/oidc.sh) in Chromium: the
authorization code flow with PKCE, the provider's own login page, back to Steward, whose header then
shows their name and the role their group maps to; a person whose groups map to nothing is told why."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from steward.api.settings import ApiSettings
from tests.e2e.conftest import SCREENSHOTS, sign_in_at_provider
from tests.integration.conftest import SLOT, oidc_provider  # noqa: F401  (the provider fixture, reused)
from tests.integration.oidc_signin import sign_in
from tests.unit.api.harness import Server, serve

UI_PORT = 18005 + SLOT * 20  # a redirect URI the provider knows for the web client (tests/integration/conftest.py)
RULES = [{"group": "physics-researchers", "role": "researcher", "scopes": ["a1"]},
         {"group": "steward-admins", "role": "admin", "scopes": []},
         {"group": "compliance", "role": "auditor", "scopes": []}]


@pytest.fixture(scope="module")
def ui(oidc_provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("signin-ui")
    settings = ApiSettings(run_dir=tmp, api_rate_per_s=10_000, api_rate_burst=10_000, oidc_issuer=oidc_provider)
    with serve(tmp, settings, port=UI_PORT) as server:
        body = server.gql("""mutation($rules: [GroupRuleInput!]!) { setGroupMapping(rules: $rules, reason: "lab")
                             { __typename } }""", {"rules": RULES}, server.tokens["admin"])
        assert body["data"]["setGroupMapping"]["__typename"] == "GroupMappingChanged", body
        # Rui submits a job as himself (signed in at the provider's endpoints), for the auditor to see
        rui = sign_in(oidc_provider, "rui", "rui-pass")["id_token"]
        body = server.gql("""mutation { submitJob(input: {jobId: "rui-e2e", project: "a1", gpus: 1, minRuntimeS: 0,
                             command: ["true"]}) { __typename } }""", token=rui)
        assert body["data"]["submitJob"]["__typename"] == "JobAccepted", body
        yield server


def _sign_in(page: Any, login: str, password: str) -> None:
    sign_in_at_provider(page, f"http://127.0.0.1:{UI_PORT}", login, password,
                        screenshot="signin-provider" if login == "rui" else "")


def test_a_researcher_signs_in_through_the_provider_and_sees_their_name(ui: Server, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, "rui", "rui-pass")
    header = page.locator("header.topbar")
    expect(header).to_contain_text("Rui Researcher", timeout=30_000)
    expect(header).to_contain_text("researcher")
    assert "code=" not in page.url  # the code does not linger in the address bar


def test_a_person_whose_groups_map_to_nothing_is_told_why(ui: Server, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, "nobody", "nobody-pass")
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Nemo Nobody (user-nobody) is signed in, but their groups (visitors) map to no "
                                  "Steward role", timeout=30_000)


def test_an_auditor_signs_in_and_sees_people_as_actors(ui: Server, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, "aud", "aud-pass")
    expect(page.locator("header.topbar")).to_contain_text("Audrey Auditor", timeout=30_000)
    page.goto(f"http://127.0.0.1:{UI_PORT}/#/audit")
    expect(page.get_by_role("cell", name="Rui Researcher (user-rui)").first).to_be_visible(timeout=30_000)


def test_an_admin_sees_and_changes_the_group_mapping_in_the_people_screen(ui: Server, page: Any) -> None:
    from playwright.sync_api import expect

    _sign_in(page, "ada", "ada-pass")
    expect(page.locator("header.topbar")).to_contain_text("Ada Admin", timeout=30_000)
    page.get_by_role("link", name="People", exact=True).click()
    expect(page.get_by_role("cell", name="physics-researchers")).to_be_visible()
    rules = page.get_by_label("Rules, one per line: GROUP=ROLE[:SCOPE,SCOPE]")
    rules.fill(rules.input_value() + "\nphysics-leads=manager:team-a")
    page.get_by_label("Why").fill("Maria leads team-a")
    page.get_by_role("button", name="Record the mapping").click()
    expect(page.get_by_role("status")).to_contain_text("recorded at position")
    expect(page.get_by_role("cell", name="physics-leads")).to_be_visible()
    expect(page.locator("#sso")).to_contain_text("Set by Ada Admin (user-ada)")
    page.screenshot(path=str(SCREENSHOTS / "people-group-mapping.png"))

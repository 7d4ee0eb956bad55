"""Issue 24's story end to end, in Chromium against the whole stack (`steward up`: Kafka, the ledger, PostgreSQL,
Temporal, the worker's notifier) and the real OpenID provider (infra/oidc.sh), people signing in through its
own login form:

1. Maria (physics-leads: manager of `research`) chooses e-mail for share changes in her subtree, changes a
   share from the tree screen, and the real SMTP server started here receives the message saying what changed
   and why.
2. Rui (physics-researchers: researcher of the project) chooses a webhook for preemptions, submits from the
   UI; Maria asks for its requeue from the drawer with a reason; the real HTTP receiver started here gets the
   preemption with the reason and who asked.
3. Audrey (compliance: auditor) sees Maria and Rui by name and subject as the actors of what they did, in the
   audit explorer; no token subject stands for a person.

Every screen a person touched is checked with axe-core (no critical or serious violation)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from playwright.sync_api import expect

from tests.e2e.conftest import SCENARIO, VIEWPORT, WAITING_PROJECT, cli, shot, sign_in_at_provider
from tests.e2e.conftest import wait_for_state as job_reaches
from tests.e2e.test_accessibility_ui import report, settled, violations
from tests.integration.conftest import oidc_provider  # noqa: F401  (the provider fixture, reused)
from tests.integration.test_notify_delivery import Mailbox, Receiver
from tests.integration.test_notify_stack import (
    receiver,  # noqa: F401  (the webhook receiver fixture, reused)
    wait,
)

pytestmark = pytest.mark.e2e

# the lab's groups (infra/oidc/provider.mjs's people) mapped to Steward roles by the operator
GROUPS = ("steward-admins=admin", "physics-leads=manager:research",
          f"physics-researchers=researcher:{WAITING_PROJECT}", "compliance=auditor")
SHARE_CHILD = "ee9e8c"  # a sibling of the researcher's project under research
SHARE_REASON = "story: the review season needs Vision Lab's room"
REQUEUE_REASON = "story: the review needs these GPUs tonight"


@pytest.fixture(scope="module")
def mailbox() -> Iterator[Mailbox]:
    """A real SMTP server (aiosmtpd) where the stack's notifier sends e-mail (STEWARD_NOTIFY_SMTP_PORT)."""
    box = Mailbox()
    server = Controller(box, hostname="127.0.0.1", port=int(os.environ["STEWARD_NOTIFY_SMTP_PORT"]))
    server.start()
    try:
        yield box
    finally:
        server.stop()


@pytest.fixture(scope="module")
def people(world: dict[str, Any], oidc_provider: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    """The stack's API trusts the provider (STEWARD_OIDC_ISSUER); the operator maps the lab's groups."""
    cli("identity", "map", *GROUPS, "--reason", "the lab's groups")
    yield world | {"issuer": oidc_provider}
    cli("identity", "map", "steward-admins=admin", "--reason", "the story is over", check=False)
    # the e2e screens share one stack: Maria's share change is put back (test_ui's manager starts from 0.45)
    cli("tree", "apply", str(SCENARIO), "--reason", "the story is over: the shares as the scenario sets them")


@pytest.fixture()
def person(browser: Any) -> Iterator[Callable[[], Any]]:
    """A fresh browser context (its own provider session) per person; each page's uncaught errors fail."""
    contexts: list[Any] = []
    errors: list[str] = []

    def new_page() -> Any:
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(20_000)
        contexts.append(context)
        pg = context.new_page()
        pg.on("pageerror", lambda err: errors.append(str(err)))
        return pg

    yield new_page
    for context in contexts:
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def accessible(page: Any, state: str, seen: dict[str, list[dict[str, Any]]]) -> None:
    found = violations(page)
    if found:
        seen[state] = found


def choose(page: Any, allocation: str, channel: str, target: str, kind: str) -> None:
    """The Notifications screen: one kind of an allocation to one target."""
    page.get_by_role("link", name="Notifications", exact=True).click()
    settled(page)
    page.get_by_label("Allocation (a project, or a node: its whole subtree)").fill(allocation)
    page.get_by_label("Channel").select_option(channel)
    page.get_by_label("E-mail address" if channel == "email" else "Webhook URL").fill(target)
    page.get_by_role("checkbox", name=re.compile(f"^{kind}")).check()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_test_id("notify-answer")).to_have_text(f"Saved: {kind} of {allocation} to {target}.")
    expect(page.locator("#notify-current").get_by_role("cell", name=target, exact=True)).to_be_visible()


def mail_to(box: Mailbox, address: str, subject: str) -> Message | None:
    return next((m for m in box.messages if m["To"] == address and subject in str(m["Subject"])), None)


@pytest.mark.timeout(900)
def test_people_sign_in_act_and_are_told(people: dict[str, Any], person: Callable[[], Any], mailbox: Mailbox,
                                         receiver: tuple[Receiver, str]) -> None:  # noqa: F811
    base = people["base"]
    rec, hooks = receiver
    seen: dict[str, list[dict[str, Any]]] = {}

    # 1. Maria, a manager, signs in at the provider and is told of the share she changes
    maria = person()
    sign_in_at_provider(maria, base, "maria", "maria-pass")
    header = maria.locator("header.topbar")
    expect(header).to_contain_text("Maria Manager", timeout=30_000)
    expect(header).to_contain_text("manager")
    choose(maria, "research", "email", "maria@lab.example", "share_changed")
    accessible(maria, "manager/notifications", seen)
    maria.get_by_role("link", name="Allocations", exact=True).click()
    maria.get_by_label("Node whose children to re-share").select_option("research")
    share = maria.get_by_label(SHARE_CHILD, exact=True)
    before = float(share.input_value())
    after = 0.3 if abs(before - 0.3) > 1e-9 else 0.35  # below what it was or equal: the sum stays within 1
    share.fill(str(after))
    maria.get_by_label("Reason (required, recorded in the audit log)").fill(SHARE_REASON)
    maria.get_by_role("button", name="Save shares").click()
    expect(maria.get_by_test_id("save-result")).to_contain_text("Saved")
    accessible(maria, "manager/tree saved", seen)
    wait(lambda: mail_to(mailbox, "maria@lab.example", "Shares under research changed"), "Maria's e-mail")
    mail = mail_to(mailbox, "maria@lab.example", "Shares under research changed")
    assert mail is not None
    body = mail.get_body(preferencelist=("plain",)).get_content()
    assert str(mail["Subject"]) == (f"Steward: Shares under research changed by Maria Manager (user-maria): "
                                    f"{SHARE_CHILD} {before:.0%} -> {after:.0%}"), mail["Subject"]
    assert f"reason: {SHARE_REASON}" in body, body
    assert mail["Message-ID"], "the receiver's de-duplication key"

    # 2. Rui, a researcher, signs in, chooses a webhook for preemptions, submits from the UI
    rui = person()
    sign_in_at_provider(rui, base, "rui", "rui-pass")
    expect(rui.locator("header.topbar")).to_contain_text("Rui Researcher", timeout=30_000)
    choose(rui, WAITING_PROJECT, "webhook", f"{hooks}/rui", "preemption")
    accessible(rui, "researcher/notifications", seen)
    rui.get_by_role("link", name="Jobs & sessions", exact=True).click()
    form = rui.get_by_role("form", name="Submit a job")
    form.get_by_test_id("submit-gpus").fill("1")
    form.get_by_test_id("submit-min-runtime").fill("0")  # no protection: a manager may requeue it at once
    form.get_by_test_id("submit-command").fill("sleep 600")
    form.get_by_test_id("submit-button").click()
    expect(form.get_by_test_id("submit-result")).to_contain_text("Submitted")
    job_id = form.get_by_test_id("submit-result").locator("strong").inner_text()
    try:
        job_reaches(job_id, {"RUNNING"})
        row = rui.get_by_test_id("jobs-table").locator("tbody tr", has_text=job_id)
        expect(row.locator("td[data-label='owner']")).to_contain_text("Rui Researcher")
        accessible(rui, "researcher/jobs", seen)

        # Maria asks for its requeue from the job's drawer, saying why
        maria.get_by_role("link", name="Jobs & sessions", exact=True).click()
        maria.get_by_test_id("jobs-search").fill(job_id)
        maria.get_by_test_id("jobs-table").get_by_role("button", name=job_id).click()
        drawer = maria.get_by_role("dialog")
        drawer.get_by_test_id("action-requeue").click()
        drawer.get_by_test_id("action-reason").fill(REQUEUE_REASON)
        drawer.get_by_test_id("action-confirm").click()
        expect(drawer.get_by_test_id("action-result")).to_contain_text("Requeue requested")

        def preemption() -> dict[str, Any] | None:
            return next((m for m in rec.kept.get("/rui", {}).values()
                         if m["steward"]["kind"] == "preemption" and m["steward"]["job_id"] == job_id), None)

        wait(preemption, "Rui's webhook")
        told = preemption()
        assert told is not None
        facts = told["steward"]["facts"]
        # Slack-compatible: the title in bold, then the facts
        assert told["text"].startswith(f"*Job {job_id} ({WAITING_PROJECT}) is being preempted (operator: "
                                       f"{REQUEUE_REASON}; asked by Maria Manager (user-maria))"), told["text"]
        assert facts["evidence"]["note"] == REQUEUE_REASON, facts
        assert facts["evidence"]["requested_by_name"] == "Maria Manager", facts
        assert [k for p, k in rec.requests if p == "/rui"], "an Idempotency-Key per message"
    finally:
        cli("cancel", job_id, check=False)

    # 3. Audrey, an auditor, sees people as the actors of what they did
    aud = person()
    sign_in_at_provider(aud, base, "aud", "aud-pass")
    expect(aud.locator("header.topbar")).to_contain_text("Audrey Auditor", timeout=30_000)
    aud.get_by_role("link", name="Audit", exact=True).click()
    settled(aud)
    events = aud.get_by_test_id("events-table")
    changed = events.locator("tbody tr[data-type='AllocationsSet']", has_text=SHARE_REASON)
    expect(changed.get_by_role("cell", name="Maria Manager (user-maria)")).to_be_visible(timeout=30_000)
    expect(events.get_by_role("cell", name="Rui Researcher (user-rui)").first).to_be_visible()
    # what Maria did, found by the actor filter (her subject): each row names her
    aud.get_by_label("Actor", exact=True).fill("user-maria")
    rows = events.locator("tbody tr[data-type]")

    def shown() -> tuple[set[str], set[str]]:  # (actors, event types) of the rows now (the live feed redraws)
        found = rows.evaluate_all("rs => rs.map(r => [r.cells[4].innerText.trim(), r.dataset.type])")
        return {a for a, _ in found}, {t for _, t in found}

    maria_did = {"NotificationsSet", "AllocationsSet", "JobPreemptionRequested"}
    wait(lambda: shown()[1] >= maria_did, "the rows of what Maria did")
    actors, kinds = shown()
    assert actors == {"Maria Manager (user-maria)"}, (actors, kinds)
    accessible(aud, "auditor/audit", seen)
    shot(aud, "audit-people")
    assert not seen, f"axe-core found critical or serious violations:\n{report(seen)}"

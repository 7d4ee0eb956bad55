"""Acting from the UI (issue 24 "Acting from the UI") in a real browser against the real stack: a researcher
submits and finds the job in "My jobs", cancels it after confirming; opens and closes a session with the
keyboard alone; a manager's requeue of a protected job shows the ledger's refusal as given; and the Jobs
and sessions screen fits a 390 px phone without spilling sideways."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import WAITING_PROJECT, cli, cli_json, shot, sign_in

pytestmark = pytest.mark.e2e

PHONE = {"width": 390, "height": 844}  # an iPhone 12-15's CSS viewport


@pytest.fixture()
def phone(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    context.set_default_timeout(15_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda err: errors.append(str(err)))
    yield pg
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def _owners(table: Any) -> set[str]:
    return {t.strip() for t in table.locator("tbody td[data-label='owner']").all_inner_texts()}


def test_researcher_submits_finds_it_in_my_jobs_and_cancels_it(world: dict[str, Any], page: Any) -> None:
    base, tok = world["base"], world["tokens"]["researcher"]
    sign_in(page, base, tok, "researcher")
    page.get_by_role("link", name="Jobs & sessions", exact=True).click()
    expect(page.get_by_role("radio", name="My jobs and sessions")).to_be_checked()  # a researcher's default
    table = page.get_by_test_id("jobs-table")
    expect(table.locator("tbody tr", has_text=world["waiting"])).to_be_visible()
    # only the researcher's own: the cluster's fillers (submitted by the operator's token) are not listed
    assert _owners(table) == {f"researcher:{WAITING_PROJECT}"}, _owners(table)
    page.get_by_role("radio", name="All I may see").check()
    expect(table.locator("tbody td[data-label='owner']", has_text="operator").first).to_be_visible()
    page.get_by_role("radio", name="My jobs and sessions").check()
    expect(table.locator("tbody td[data-label='owner']", has_text="operator")).to_have_count(0)

    form = page.get_by_role("form", name="Submit a job")
    # the projects one may act for, and nothing else
    options = form.get_by_test_id("submit-project").locator("option").all_inner_texts()
    assert options == [WAITING_PROJECT], options
    form.get_by_test_id("submit-gpus").fill("1")
    form.get_by_test_id("submit-min-runtime").fill("30000")  # above the contract's 8 h: refused before sending
    form.get_by_test_id("submit-command").fill("sleep 300")
    form.get_by_test_id("submit-button").click()
    expect(form.get_by_test_id("submit-minRuntimeS-error")).to_contain_text("0 to 28800")
    expect(form.get_by_test_id("submit-min-runtime")).to_have_attribute("aria-invalid", "true")
    expect(form.get_by_test_id("submit-result")).to_have_count(0)  # nothing was sent
    form.get_by_test_id("submit-min-runtime").fill("600")
    expect(form.get_by_test_id("submit-preview-outlook")).to_contain_text(re.compile(r"Funded|Unfunded"))
    form.get_by_test_id("submit-button").click()
    result = form.get_by_test_id("submit-result")
    expect(result).to_contain_text("Submitted")
    job_id = result.locator("strong").inner_text()
    try:
        row = table.locator("tbody tr", has_text=job_id)
        expect(row).to_be_visible()  # in My jobs, without reloading
        expect(row.locator("td[data-label='owner']")).to_have_text(f"researcher:{WAITING_PROJECT}")
        # found by a part of its id, its project or its command
        page.get_by_test_id("jobs-search").fill(job_id[-6:])
        expect(table.locator("tbody tr")).to_have_count(1)
        page.get_by_test_id("jobs-search").fill("")
        page.evaluate("document.getElementById('sessions').scrollIntoView()")
        shot(page, "jobs-my-jobs")

        row.get_by_role("button", name=job_id).click()
        drawer = page.get_by_role("dialog")
        expect(drawer.get_by_test_id("job-owner")).to_have_text(f"researcher:{WAITING_PROJECT}")
        expect(drawer.get_by_test_id("action-close")).to_have_count(0)  # a job is cancelled, a session closed
        drawer.get_by_test_id("action-cancel").click()
        confirm = drawer.get_by_role("group", name="Confirm: Cancel job")
        expect(confirm).to_contain_text(f"Cancel {job_id}?")
        expect(confirm.get_by_test_id("action-reason")).to_be_focused()
        confirm.get_by_test_id("action-reason").fill("e2e: submitted by mistake")
        shot(page, "job-cancel-confirm")
        # "no" sends nothing
        confirm.get_by_test_id("action-keep").click()
        expect(confirm).to_be_hidden()
        drawer.get_by_test_id("action-cancel").click()
        drawer.get_by_test_id("action-confirm").click()
        expect(drawer.get_by_test_id("action-result")).to_have_text("Cancelled.")
        expect(drawer.get_by_test_id("action-cancel")).to_have_count(0)  # nothing left to cancel
        expect(row).to_contain_text("cancelled")
        # no requeue for a researcher (the API has none for them): the same shape can be sent again
        expect(drawer.get_by_test_id("action-requeue")).to_have_count(0)
        drawer.get_by_test_id("action-submit-again").click()
        expect(drawer).to_be_hidden()
        expect(form.get_by_test_id("submit-project")).to_be_focused()
        expect(form.get_by_test_id("submit-command")).to_have_value("sleep 300")
        expect(form.get_by_test_id("submit-min-runtime")).to_have_value("600")
        expect(form.get_by_test_id("submit-result")).to_have_count(0)
    finally:
        cli("cancel", job_id, check=False)


def test_researcher_opens_and_closes_a_session_with_the_keyboard_alone(world: dict[str, Any], page: Any) -> None:
    base, tok = world["base"], world["tokens"]["researcher"]
    sign_in(page, base, tok, "researcher")
    page.goto(base + "/#/jobs")
    page.reload()  # a fresh page: the focus at its start (the token stays in the tab's session)
    expect(page.get_by_role("heading", name="Jobs & sessions")).to_be_visible()
    page.keyboard.press("Tab")  # the skip link
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # the first field of the form
    form = page.get_by_role("form", name="Submit a job")
    expect(form.get_by_test_id("submit-project")).to_be_focused()
    page.keyboard.press("Tab")
    expect(form.get_by_test_id("submit-class")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(form.get_by_test_id("submit-class")).to_have_value("interactive")
    expect(form.get_by_label("Session cap (s)")).to_be_visible()
    page.keyboard.press("Tab")
    expect(form.get_by_test_id("submit-gpus")).to_be_focused()
    page.keyboard.press("Tab")
    expect(form.get_by_test_id("submit-min-runtime")).to_be_focused()
    page.keyboard.press("Control+A")
    page.keyboard.type("900")
    page.keyboard.press("Tab")  # past the resumable box (a session always is), to the command
    expect(form.get_by_test_id("submit-command")).to_be_focused()
    page.keyboard.press("Enter")  # no command yet: told at the field, the focus stays there
    expect(form.get_by_test_id("submit-command-error")).to_have_text("the command to run")
    expect(form.get_by_test_id("submit-command")).to_be_focused()
    expect(form.get_by_test_id("submit-preview-outlook")).to_contain_text(re.compile(r"Funded|Unfunded"))
    page.keyboard.type("sleep 600")
    shot(page, "submit-session")
    page.keyboard.press("Enter")
    result = form.get_by_test_id("submit-result")
    expect(result).to_contain_text("Opened")
    session = result.locator("strong").inner_text()
    try:
        assert session.startswith("s-"), session  # openSession names sessions s-…
        mine = page.get_by_test_id("sessions-list").get_by_role("button", name=session)
        expect(mine).to_be_visible()  # in My sessions
        mine.focus()
        page.keyboard.press("Enter")  # the drawer opens and takes the focus
        drawer = page.get_by_role("dialog")
        expect(drawer).to_be_focused()
        # the job's details arrive after the drawer opens (a keyboard user hears them arrive): until then the
        # drawer holds only its Close button, and a second Tab would leave it
        expect(drawer.get_by_test_id("action-close")).to_be_visible()
        page.keyboard.press("Tab")
        expect(drawer.get_by_role("button", name="Close", exact=True)).to_be_focused()
        page.keyboard.press("Tab")
        expect(drawer.get_by_test_id("action-close")).to_be_focused()
        page.keyboard.press("Enter")
        expect(drawer.get_by_test_id("action-reason")).to_be_focused()
        page.keyboard.type("e2e: done for today")
        page.keyboard.press("Enter")
        expect(drawer.get_by_test_id("action-result")).to_contain_text("Closed")
        page.keyboard.press("Escape")
        expect(drawer).to_be_hidden()
        expect(mine).to_be_focused()  # back where the keyboard was
    finally:
        cli("cancel", session, check=False)


def test_manager_requeue_of_a_protected_session_shows_the_ledgers_refusal(world: dict[str, Any], page: Any) -> None:
    base, tok = world["base"], world["tokens"]["manager"]
    sign_in(page, base, tok, "manager")
    page.get_by_role("link", name="Jobs & sessions", exact=True).click()
    expect(page.get_by_role("radio", name="All I may see")).to_be_checked()  # a manager's default
    expect(page.get_by_role("form", name="Submit a job")).to_have_count(0)  # managers do not submit
    # the researcher's running session: funded (1 GPU, inside its project's entitlement), so protected until
    # its cap; the cluster's fillers run unfunded and would be requeued at once
    session = world["running_session"]
    page.get_by_test_id("jobs-search").fill(session)
    table = page.get_by_test_id("jobs-table")
    expect(table.locator("tbody tr")).to_have_count(1)
    table.get_by_role("button", name=session).click()
    drawer = page.get_by_role("dialog")
    expect(drawer).to_contain_text(re.compile(r"· funded ·"))
    expect(drawer.get_by_test_id("action-close")).to_have_count(0)  # closing is a researcher's (work)
    drawer.get_by_test_id("action-requeue").click()
    drawer.get_by_test_id("action-confirm").click()  # no reason yet
    expect(drawer.get_by_text("say why (recorded with the request)")).to_be_visible()
    drawer.get_by_test_id("action-reason").fill("e2e: make room for the review")
    drawer.get_by_test_id("action-confirm").click()
    refused = drawer.get_by_test_id("action-result")
    expect(refused).to_contain_text("Refused:")
    expect(refused).to_contain_text("(protected)")
    shot(page, "job-requeue-refused")
    assert cli_json("job", "show", session)["state"] == "RUNNING"  # and nothing happened


def test_jobs_and_sessions_fit_a_390_px_screen(world: dict[str, Any], phone: Any) -> None:
    base, tok = world["base"], world["tokens"]["researcher"]
    sign_in(phone, base, tok, "researcher")
    phone.get_by_role("link", name="Jobs & sessions", exact=True).click()
    table = phone.get_by_test_id("jobs-table")
    expect(table.locator("tbody tr", has_text=world["waiting"])).to_be_visible()
    expect(phone.get_by_test_id("sessions-list")).to_be_visible()
    for whose in ("My jobs and sessions", "All I may see"):
        phone.get_by_role("radio", name=whose).check()
        expect(table.locator("tbody tr").first).to_be_visible()
        # each row is a card: the header row is for screen readers only, every field labelled
        assert table.locator("tbody tr").first.evaluate("r => getComputedStyle(r).display") == "block"
        assert table.locator("thead").evaluate("h => h.getBoundingClientRect().height") <= 1
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{whose}: the page is {width} px wide on a {PHONE['width']} px screen"
    phone.evaluate("document.getElementById('sessions').scrollIntoView()")
    shot(phone, "jobs-phone")
    # the drawer too
    table.get_by_role("button", name=world["waiting"]).click()
    expect(phone.get_by_role("dialog")).to_be_visible()
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]

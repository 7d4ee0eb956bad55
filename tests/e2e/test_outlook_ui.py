"""The submit preview and the debug quota in a real browser against the real stack (DESIGN.md "The
time-slicing contract": the researcher is told at submit when a job will run unfunded, and why; "Debug
quota": managers set it in the tree, and whether a job is qualified is shown at submit)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import WAITING_PROJECT, cli, shot, sign_in

pytestmark = pytest.mark.e2e


def test_researcher_sees_before_and_after_submitting_whether_a_job_runs_funded(world: dict[str, Any],
                                                                              page: Any) -> None:
    base, tok = world["base"], world["tokens"]["researcher"]
    sign_in(page, base, tok, "researcher")
    page.get_by_role("link", name="Jobs & sessions", exact=True).click()
    form = page.get_by_role("form", name="Submit a job")
    expect(form.get_by_test_id("submit-project")).to_have_value(WAITING_PROJECT)  # the researcher's project
    preview = form.get_by_test_id("submit-preview-outlook")
    # the preview answers before anything is submitted, with the project's own figures
    expect(preview).to_contain_text(re.compile(r"funded: protected for 10m|will run unfunded"))
    expect(preview).to_contain_text(f"'{WAITING_PROJECT}'")

    form.get_by_test_id("submit-min-runtime").fill("0")  # no protection asked: unfunded, and it says why
    expect(preview).to_contain_text("Unfunded: no protection asked")
    expect(preview).to_contain_text("it asks for no protection (min runtime 0)")

    form.get_by_test_id("submit-min-runtime").fill("300")  # a small, short debug job: the debug quota
    form.get_by_test_id("submit-class").select_option("debug")
    expect(preview).to_contain_text(re.compile(r"debug: (qualified|over quota)"))
    expect(preview).to_contain_text("debug quota of")
    shot(page, "submit-preview")

    form.get_by_test_id("submit-command").fill("sleep 1")
    form.get_by_test_id("submit-button").click()
    result = form.get_by_test_id("submit-result")
    expect(result).to_contain_text("Submitted")
    expect(result.get_by_test_id("submit-result-outlook")).to_contain_text(re.compile(r"debug: (qualified|over quota)"))
    job_id = result.locator("strong").inner_text()
    shot(page, "submit-result")
    cli("cancel", job_id, check=False)


def test_manager_sets_a_debug_quota_in_the_tree(world: dict[str, Any], page: Any) -> None:
    base, tok = world["base"], world["tokens"]["manager"]
    sign_in(page, base, tok, "manager")
    page.get_by_role("link", name="Allocations", exact=True).click()
    editor = page.get_by_test_id("quota-editor")
    expect(editor.get_by_test_id(f"quota-now-{WAITING_PROJECT}")).to_contain_text("(default)")
    quota = editor.get_by_label(f"{WAITING_PROJECT} debug quota", exact=True)
    quota.fill("1.5")
    expect(editor.get_by_text("a whole number of GPUs, 0 or more (empty: default)")).to_be_visible()
    expect(editor.get_by_test_id("quota-save")).to_be_disabled()
    quota.fill("2")
    editor.get_by_test_id("quota-save").click()  # no reason yet
    expect(editor.get_by_text("say why (recorded in the audit log)")).to_be_visible()
    editor.get_by_test_id("quota-reason").fill("e2e: two GPUs of debug work for the review")
    editor.get_by_test_id("quota-save").click()
    expect(editor.get_by_test_id("quota-result")).to_contain_text("Saved the debug quota of " + WAITING_PROJECT)
    expect(page.get_by_test_id(f"quota-{WAITING_PROJECT}")).to_have_text("2 (set)")  # the tree shows it
    shot(page, "tree-debug-quota")
    # back to the default, so the other tests see the tree they expect
    editor.get_by_label(f"{WAITING_PROJECT} debug quota", exact=True).fill("")
    editor.get_by_test_id("quota-reason").fill("e2e: back to the default")
    editor.get_by_test_id("quota-save").click()
    expect(page.get_by_test_id(f"quota-{WAITING_PROJECT}")).to_contain_text("(default)")

"""End-to-end tier: the web UI in Debian's Chromium (driven by Playwright through `executable_path`) against
the whole real stack, started by the integration tier's own pieces (imported from its conftest).

The stack here is package-scoped, so it is stopped when the e2e tests end and the integration tier (in the
same pytest session) starts its own clean one. Set STEWARD_TEST_SLOT for separate ports and run folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import KEEP, REPO, clean_run_dir, services

CHROMIUM = os.environ.get("STEWARD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SCREENSHOTS = REPO / "docs" / "screenshots"
SCENARIO = REPO.parent / "shared" / "data" / "scenarios" / "philly.yaml"
WEB_DIST = REPO / "web" / "dist" / "index.html"
VIEWPORT = {"width": 1440, "height": 900}  # a laptop screen

# A small cluster (4 nodes x 8 GPUs in 2 blocks) so that a few jobs fill it.
SMALL_CLUSTER = """cluster:
  nodes: 4
  gpus_per_node: 8
  gpu_model: V100
  topology: {levels: [block, node], nodes_per_block: 2}
"""
WAITING_PROJECT = "7f04ca"  # research/7f04ca: the researcher's project
FILLER_PROJECT = "ee9e8c"   # research/ee9e8c
# The running session asks for a 5 h cap, not the policy's 8 h: its countdown must read the cap its
# SessionOpened recorded (the UI once assumed 8 h and showed every session "7 h 59 min left").
RUNNING_SESSION_CAP_S = 5 * 3600


def cli(*args: str, token: str | None = None, check: bool = True,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real `steward` CLI, as the given token (default: the run folder's admin token)."""
    env = os.environ.copy()
    if token:
        env["STEWARD_TOKEN"] = token
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"steward {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def cli_json(*args: str, token: str | None = None) -> Any:
    """JSON output; `--output json` goes before a `--` that starts the job's own command."""
    cut = args.index("--") if "--" in args else len(args)
    return json.loads(cli(*args[:cut], "--output", "json", *args[cut:], token=token).stdout)


def wait_for_state(job_id: str, states: set[str], timeout: float = 90, token: str | None = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = cli_json("job", "show", job_id, token=token)
        if job.get("state") in states:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} stayed {job.get('state')} for {timeout} s: {job}")


@pytest.fixture(scope="package")
def stack() -> Iterator[dict[str, Any]]:
    """The whole stack as `steward up` starts it (PostgreSQL store), clean, for the e2e tests only."""
    from steward.cli.stack import bring_up
    from steward.config import Settings
    from steward.infra.processes import OWN_PROCESSES, Paths, stop_own

    if not WEB_DIST.exists():
        pytest.fail("web/dist is missing: build the UI first (`make web`)")
    clean_run_dir()
    services("up")
    settings = Settings()
    info = bring_up(settings, postgres=True)
    info["base"] = settings.resolved_api_url.rsplit("/graphql", 1)[0]
    info["restart_worker"] = lambda: (stop_own("worker", Paths(settings.run_dir)), bring_up(settings, postgres=True))
    yield info
    if not KEEP:
        for name in reversed(OWN_PROCESSES):
            stop_own(name, Paths(settings.run_dir))
        services("down")


def _warm_up(restart_worker: Any) -> None:
    """Run one tiny job through every layer before the tests. On a fresh stack the worker's event consumer
    sometimes starts without partition metadata for steward.events and dispatches nothing for minutes
    (seen 2 of 6 fresh stacks): then the worker is restarted once or twice (bring_up is idempotent)."""
    for attempt in range(3):
        probe = cli_json("submit", "-p", FILLER_PROJECT, "-g", "1", "--min-runtime", "0", "--", "true")["id"]
        try:
            wait_for_state(probe, {"COMPLETED"}, timeout=20)
            return
        except AssertionError:
            cli("cancel", probe, check=False)
            if attempt == 2:
                raise
            restart_worker()


def token(role: str, *scopes: str) -> str:
    args = ["token", "create", "--role", role]
    for s in scopes:
        args += ["--scope", s]
    return str(cli_json(*args)["token"])


@pytest.fixture(scope="package")
def world(stack: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The tree, a small full cluster, a job that waits, a running session and a cancelled one to restore."""
    cluster = tmp_path_factory.mktemp("e2e") / "cluster.yaml"
    cluster.write_text(SMALL_CLUSTER)
    cli("tree", "apply", str(SCENARIO))
    cli("cluster", "apply", str(cluster))
    _warm_up(stack["restart_worker"])
    tokens = {
        "admin": token("admin"),
        "manager": token("manager", "research"),
        "researcher": token("researcher", WAITING_PROJECT),
        "auditor": token("auditor"),
    }
    started: list[str] = []  # cancelled at the end whatever happens, so no job outlives the tests
    try:
        # Fill 29 of 32 GPUs with the researcher's own project's work (1 h protection): an 8-GPU job of the
        # same project then waits (fair share never preempts a project for itself), and 3 GPUs stay free
        # for sessions.
        for g in (8, 8, 8, 5):
            started.append(cli_json("submit", "-p", WAITING_PROJECT, "-g", str(g), "--min-runtime", "3600", "--",
                                    "sleep", "600")["id"])
        for f in started:
            wait_for_state(f, {"RUNNING"})
        researcher = tokens["researcher"]
        waiting = cli_json("submit", "-p", WAITING_PROJECT, "-g", "8", "--min-runtime", "600", "--", "sleep", "30",
                           token=researcher)["id"]
        started.append(waiting)
        wait_for_state(waiting, {"QUEUED"}, token=researcher)
        sessions = []
        for cap in (RUNNING_SESSION_CAP_S, None):
            opened = cli_json("session", "open", "-p", WAITING_PROJECT, "-g", "1",
                              *(["--cap", str(cap)] if cap else []), "--", "sleep", "600", token=researcher)
            sessions.append(str(opened.get("id") or opened.get("job", {}).get("id")))
            started.append(sessions[-1])
            wait_for_state(sessions[-1], {"RUNNING"}, token=researcher)
        cli("cancel", sessions[1], token=researcher)  # a stopped session, to restore
        wait_for_state(sessions[1], {"CANCELLED"}, token=researcher)
        yield {"base": stack["base"], "tokens": tokens, "waiting": waiting, "running_session": sessions[0],
               "session": sessions[1]}
    finally:
        for job in started:
            cli("cancel", job, check=False)
        # and whatever the tests started (a restored session), so that no process outlives the stack
        listed = cli("jobs", "--limit", "500", "--output", "json", check=False)
        for job in (json.loads(listed.stdout) if listed.returncode == 0 else []):
            if isinstance(job, dict) and job.get("state") in ("QUEUED", "PLACED", "RUNNING"):
                cli("cancel", str(job["id"]), check=False)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(15_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda err: errors.append(str(err)))
    yield pg
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def graphql(base: str, token: str, query: str) -> dict[str, Any]:
    resp = httpx.post(f"{base}/graphql", json={"query": query}, headers={"Authorization": f"Bearer {token}"},
                      timeout=30)
    body: dict[str, Any] = resp.json()
    return body


def shot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=False)


def sign_in_at_provider(page: Any, base: str, login: str, password: str, screenshot: str = "") -> None:
    """Sign in as a person does with single sign-on: Steward's button, the OpenID provider's own login form
    (infra/oidc.sh's people), and back to `base` (a redirect URI the provider knows for the web client)."""
    from playwright.sync_api import expect

    page.goto(base + "/")
    button = page.get_by_role("button", name="Sign in with your lab account")
    expect(button).to_be_visible()
    if screenshot:
        page.screenshot(path=str(SCREENSHOTS / f"{screenshot}.png"))
    button.click()
    page.wait_for_url(re.compile(r".*/interaction/.*"))
    page.fill("#login", login)
    page.fill("#password", password)
    page.click("#submit")


def sign_in(page: Any, base: str, token: str, role: str) -> None:
    """Sign in through the form, as a person does; the role picker only matters when the API has no `me`."""
    from playwright.sync_api import expect

    page.goto(base + "/")
    page.get_by_label("API token").fill(token)
    page.get_by_label("View as (used only when the API cannot tell your role)").select_option(role)
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(page.get_by_test_id("identity")).to_contain_text(role)


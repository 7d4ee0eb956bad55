"""Operations on the real stack: one submission followed by its correlation id through the logs of every
process and the metadata of its events, and the Prometheus endpoint of every process scraped and parsed
with prometheus_client's own text parser after that work, then linted as `promtool check metrics` does
(steward-promlint: client_golang's promlint, built by `infra/tools.sh install-promlint`)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.integration.conftest import REPO, TEST_RUN_DIR, active_of, serving_metrics, steward

pytestmark = pytest.mark.integration

SCENARIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "scenarios" / "philly.yaml"
PROJECT = "ee9e8c"
SUBMIT = """mutation($input: SubmitJobInput!) { submitJob(input: $input) {
  __typename ... on JobAccepted { job { id } } ... on Rejected { code reason } } }"""


@pytest.fixture(scope="module")
def applied(stack: dict[str, Any]) -> dict[str, Any]:
    # the skeleton's module may have applied them already in this session: applying again is harmless
    steward("tree", "apply", str(SCENARIO), check=False)
    steward("cluster", "apply", str(SCENARIO), check=False)
    return stack


def api_url(stack: dict[str, Any]) -> str:
    return str(stack["api"])


def token(stack: dict[str, Any]) -> str:
    return Path(str(stack["admin_token_file"])).read_text().strip()


def wait_for_state(job_id: str, states: set[str], timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = json.loads(steward("job", "show", job_id, "--output", "json").stdout)
        if job["state"] in states:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} stayed {job.get('state')} for {timeout} s: {job}")


def submit(stack: dict[str, Any], cid: str, command: list[str]) -> tuple[str, httpx.Response]:
    variables = {"input": {"project": PROJECT, "gpus": 1, "minRuntimeS": 30, "command": command}}
    resp = httpx.post(api_url(stack), json={"query": SUBMIT, "variables": variables}, timeout=30,
                      headers={"Authorization": f"Bearer {token(stack)}", "X-Correlation-Id": cid})
    resp.raise_for_status()
    res = resp.json()["data"]["submitJob"]
    assert res["__typename"] == "JobAccepted", res
    return str(res["job"]["id"]), resp


def log_lines(name: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    path = TEST_RUN_DIR / "logs" / f"{name}.log"
    if not path.exists():  # a standby never started (`-2` of a service that has none)
        return out
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


@pytest.fixture(scope="module")
def followed(applied: dict[str, Any]) -> dict[str, Any]:
    cid = f"test-follow-{uuid.uuid4().hex[:12]}"
    job_id, resp = submit(applied, cid, ["sh", "-c", "echo followed"])
    job = wait_for_state(job_id, {"COMPLETED", "FAILED"})
    assert job["state"] == "COMPLETED", job
    return {"cid": cid, "job_id": job_id, "response": resp}


def test_the_api_answers_with_the_correlation_id_it_was_sent(followed: dict[str, Any]) -> None:
    assert followed["response"].headers["x-correlation-id"] == followed["cid"]


def test_every_event_of_the_job_carries_the_submissions_correlation_id(followed: dict[str, Any]) -> None:
    from steward.config import Settings
    from steward.store.eventstore import EventStore

    store = EventStore.from_url(Settings().resolved_store_url)
    events = [r for r in store.iterate(0) if r.stream_id.endswith(followed["job_id"])
              or r.payload.get("job_id") == followed["job_id"]]
    types = {r.type for r in events}
    assert {"JobSubmitted", "JobPlaced", "JobStarted", "JobCompleted"} <= types, types
    wrong = [(r.type, r.metadata.get("correlation_id"), r.metadata.get("actor")) for r in events
             if r.metadata.get("correlation_id") != followed["cid"]]
    assert wrong == []


def test_one_submission_is_followed_through_the_logs_of_every_process(followed: dict[str, Any]) -> None:
    """api (the mutation), ledger (each command decided), scheduler (the placement), worker (the dispatch,
    the workflow and its activities) and executor (its activities) all log under the same id."""
    cid = followed["cid"]
    found: dict[str, list[str]] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        # a ledger or scheduler and its standby (`-2`): whichever holds the lease did the work (ADR 0048)
        found = {name: [line["msg"] for log in (name, f"{name}-2") for line in log_lines(log)
                        if line.get("correlation_id") == cid]
                 for name in ("api", "ledger", "scheduler", "worker", "executor")}
        if all(found.values()):
            break
        time.sleep(0.5)
    assert all(found.values()), {k: v[:5] for k, v in found.items()}
    assert any("submitJob" in m for m in found["api"])
    assert any("SubmitJob" in m for m in found["ledger"]) and any("ReportJobExited" in m or "JobCompleted" in m
                                                                    for m in found["ledger"])
    assert any("PlaceJob" in m for m in found["scheduler"])
    assert any("JobPlaced" in m for m in found["worker"]) and any("workflow" in m for m in found["worker"])
    assert any("start_job" in m for m in found["executor"])


def scrape(url: str) -> dict[str, list[Sample]]:
    resp = httpx.get(url, timeout=30)
    assert resp.status_code == 200, (url, resp.text[:300])
    assert resp.headers["content-type"].startswith("text/plain")
    return {f.name: list(f.samples) for f in text_string_to_metric_families(resp.text)}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_every_process_serves_metrics_that_count_the_work(followed: dict[str, Any], applied: dict[str, Any]) -> None:
    from steward.config import Settings
    from steward.metrics import metrics_urls
    from steward.store.eventstore import EventStore

    every = metrics_urls(Settings())
    assert every == applied["metrics"]
    urls = serving_metrics(every)  # of a ledger or scheduler and its standby, the one holding the lease
    scraped = {name: scrape(url) for name, url in urls.items()}
    for name, fams in scraped.items():
        info = fams["steward_build_info"]
        assert [s.labels["process"] for s in info] == [name.removesuffix("-2")]  # a standby is its service
        assert value(fams["process_resident_memory_bytes"], "process_resident_memory_bytes") > 0
    families = {name.removesuffix("-2"): fams for name, fams in scraped.items()}

    ledger = families["ledger"]
    assert value(ledger["steward_ledger_events"], "steward_ledger_events_total", type="JobSubmitted") >= 1
    assert value(ledger["steward_ledger_events"], "steward_ledger_events_total", type="JobStarted") >= 1
    assert value(ledger["steward_admission_wait_seconds"], "steward_admission_wait_seconds_count",
                 **{"class": "batch"}) >= 1
    head = EventStore.from_url(Settings().resolved_store_url).head()
    assert 0 < value(ledger["steward_event_store_head"], "steward_event_store_head") <= head
    lag = ledger["steward_ledger_lag_messages"]
    assert lag and all(s.value >= 0 for s in lag)

    scheduler = families["scheduler"]
    assert value(scheduler["steward_scheduler_cycle_seconds"], "steward_scheduler_cycle_seconds_count") >= 1

    api = families["api"]
    assert value(api["steward_api_request_seconds"], "steward_api_request_seconds_count",
                 operation_type="mutation", operation="submitJob", outcome="ok") >= 1
    from steward.api.readmodel import ReadModel

    nodes = ReadModel(EventStore.from_url(Settings().resolved_store_url)).view().nodes
    gpus = {s.labels["state"]: s.value for s in api["steward_cluster_gpus"]}
    assert set(gpus) == {"funded", "unfunded", "foreign", "free", "draining", "down"}
    assert sum(gpus.values()) == sum(int(n["gpus"]) for n in nodes) > 0
    assert api["steward_entitled_share"], "no allocation figures"
    assert value(api["steward_entitled_share"], "steward_entitled_share", allocation=PROJECT, is_project="true") > 0

    executor = families["executor"]
    assert [s.labels["executor"] for s in executor["steward_executor_jobs"]] == ["local"]


def promlint_binary() -> str:
    """The linter `make tools` builds (`infra/tools.sh install-promlint`); missing, the test fails."""
    cand = os.environ.get("STEWARD_PROMLINT") or str(REPO / ".venv" / "tools" / "bin" / "steward-promlint")
    assert os.access(cand, os.X_OK), f"{cand} is missing: run `bash infra/tools.sh install-promlint` (`make tools`)"
    return cand


def test_every_metrics_endpoint_passes_the_promtool_linter(followed: dict[str, Any], applied: dict[str, Any]) -> None:
    """Each process's answer, after real work, has no problem `promtool check metrics` would report (names,
    units, suffixes, help texts): the linter reads every endpoint and exits 0 only when it found none."""
    from steward.config import Settings
    from steward.metrics import metrics_urls

    every = metrics_urls(Settings())
    urls = serving_metrics(every)  # of a ledger or scheduler and its standby, the one holding the lease
    assert {"api", "worker", "executor"} <= set(urls), sorted(urls)
    # the ledger's lag gauges are computed at scrape time: they must be in the answer the linter reads
    assert "steward_ledger_lag_messages" in httpx.get(active_of(every, "ledger"), timeout=30).text
    active_of(every, "scheduler")
    proc = subprocess.run([promlint_binary(), *urls.values()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"promlint exit {proc.returncode}:\n{proc.stdout}{proc.stderr}"


def test_the_linter_reports_what_promtool_would() -> None:
    """The linter is not a stub: an exposition with a counter lacking `_total` and a non-base unit fails."""
    bad = "# HELP x_milliseconds a\n# TYPE x_milliseconds counter\nx_milliseconds 1\n"
    proc = subprocess.run([promlint_binary()], input=bad, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc
    assert 'counter metrics should have "_total" suffix' in proc.stdout
    assert 'use base unit "seconds" instead of "milliseconds"' in proc.stdout


def test_the_stacks_logs_are_out_of_a_jobs_reach(applied: dict[str, Any]) -> None:
    """Every service of the real stack logs in a folder of its OS user's alone (mode 0700): Steward's
    processes, Kafka and Temporal in the run folder's logs/, PostgreSQL (user postgres) in postgres/logs/.
    A project's job user (as the executor runs jobs) can read none of them."""
    import pwd
    import stat

    from steward.executor.isolation import ensure_user

    folders = {TEST_RUN_DIR / "logs": os.geteuid(), TEST_RUN_DIR / "postgres" / "logs": pwd.getpwnam("postgres").pw_uid}
    for folder, owner in folders.items():
        st = os.stat(folder)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (owner, 0o700), folder
    logs = [TEST_RUN_DIR / "logs" / f"{n}.log" for n in ("api", "ledger", "executor", "kafka", "temporal")]
    logs.append(TEST_RUN_DIR / "postgres" / "logs" / "postgres.log")
    assert all(p.stat().st_size > 0 for p in logs)
    user = ensure_user("obs-logs-probe")
    for path in logs:
        proc = subprocess.run(["runuser", "-u", user.name, "--", "cat", str(path)], capture_output=True, text=True,
                              timeout=30, cwd="/")
        assert proc.returncode != 0 and "Permission denied" in proc.stderr and not proc.stdout, (path, proc)


def test_up_restart_replaces_steward_processes_and_keeps_services_and_data(followed: dict[str, Any],
                                                                          applied: dict[str, Any]) -> None:
    """`steward up --restart` (an upgrade): new processes, the same services and store; work goes on."""
    from steward.config import Settings
    from steward.infra.processes import OWN_PROCESSES, Paths, read_pid
    from steward.store.eventstore import EventStore

    paths = Paths(TEST_RUN_DIR)
    services = {name: (TEST_RUN_DIR / "pids" / f"{name}.pid").read_text() for name in ("kafka", "temporal")}
    before = {name: read_pid(paths, name) for name in OWN_PROCESSES}
    head = EventStore.from_url(Settings().resolved_store_url).head()
    out = json.loads(steward("up", "--restart", "--output", "json", timeout=300).stdout)
    assert sorted(out["restarted"]) == sorted(OWN_PROCESSES)
    after = {name: read_pid(paths, name) for name in OWN_PROCESSES}
    assert all(after[n] is not None and after[n] != before[n] for n in OWN_PROCESSES), (before, after)
    assert {name: (TEST_RUN_DIR / "pids" / f"{name}.pid").read_text() for name in services} == services
    assert EventStore.from_url(Settings().resolved_store_url).head() >= head
    job_id, _ = submit(applied, f"test-restart-{uuid.uuid4().hex[:8]}", ["true"])
    assert wait_for_state(job_id, {"COMPLETED", "FAILED"})["state"] == "COMPLETED"

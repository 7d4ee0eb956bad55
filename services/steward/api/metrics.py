"""The API's metrics (docs/metrics.md), served at `GET /metrics` on the API's own port:

- `steward_api_request_seconds`: each GraphQL operation the schema executes, by type, root field and
  outcome (a Strawberry extension);
- the cluster and fairness gauges (`steward_pending_jobs`, `steward_running_jobs`, `steward_cluster_gpus`,
  `steward_entitled_share`, `steward_owed_gpu_seconds`, `steward_delivered_gpu_seconds`,
  `steward_owed_delivered_ratio`), computed at each scrape from the read model: the same projections and
  the same figures (`steward.api.figures`) the UI and the `allocations` query show, cached by the read
  model for the head and a few seconds. Every replica answers the same values: aggregate them with `max`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from graphql import OperationDefinitionNode
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from strawberry.extensions import SchemaExtension

from steward.api.figures import DEFAULT_WINDOW_S, RUNNING, WAITING
from steward.api.readmodel import ReadModel
from steward.domain.nodes import winding_down
from steward.metrics import build_info

log = logging.getLogger("steward.api")

REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15)
UNAUTHORISED = frozenset({"UNAUTHENTICATED", "FORBIDDEN"})
# codes of a server's fault: every other code is the client's (a typed user error, parse, validation)
FAULTS = frozenset({"INTERNAL_SERVER_ERROR", "OUTCOME_TIMEOUT", "LAGGING"})
UNPARSED = frozenset({"GRAPHQL_VALIDATION_FAILED", "GRAPHQL_PARSE_FAILED"})
DOWN_STATES = frozenset({"down", "unhealthy", "drained"})

_requests: Histogram | None = None


def requests_histogram(registry: CollectorRegistry = REGISTRY) -> Histogram:
    global _requests
    if _requests is None:
        _requests = Histogram("steward_api_request_seconds", "GraphQL request latency.",
                              ["operation_type", "operation", "outcome"], buckets=REQUEST_BUCKETS,
                              registry=registry)
        build_info("api", registry)
    return _requests


def root_field(document: Any, operation_name: str | None) -> str:
    """The first root field of the executed operation ("-" when there is none to name)."""
    for definition in getattr(document, "definitions", ()) or ():
        if isinstance(definition, OperationDefinitionNode) and (
                operation_name is None or (definition.name and definition.name.value == operation_name)):
            for selection in definition.selection_set.selections:
                name = getattr(selection, "name", None)
                if name is not None:
                    return str(name.value)
    return "-"


def _code(error: Any) -> Any:
    return (getattr(error, "extensions", None) or {}).get("code")


def client_error(error: Any) -> bool:
    """An error of the client's making: a typed user error (its code, not a fault's), or an error before
    execution (parse, validation, a variable's coercion: no path, no code). A masked fault has no code
    and a path."""
    code = _code(error)
    return code not in FAULTS if code is not None else not getattr(error, "path", None)


def outcome_of(errors: Iterable[Any] | None, data: Any, refusal: str | None = None) -> str:
    """The request metric's outcome (docs/metrics.md): `unauthorised` (no or a refused identity, a role or
    scope refusal), `rejected` (refused for what it asked: invalid input, a document that does not parse
    or validate, a domain rule's refusal), `error` (a fault of the server) or `ok`. `refusal` is what a
    mutation's answer said when it refused as data (`steward.api.fields`)."""
    errors = list(errors or ())
    if errors:
        if any(_code(e) in UNAUTHORISED for e in errors):
            return "unauthorised"
        return "rejected" if all(client_error(e) for e in errors) else "error"
    if refusal is not None:
        return refusal
    return "ok"


def valid(errors: Iterable[Any] | None) -> bool:
    """Did the document parse and validate (so its root field is a name of the schema)?"""
    return not any(not getattr(e, "path", None) and _code(e) in (None, *UNPARSED) for e in (errors or ()))


class RequestMetrics(SchemaExtension):
    """Times every operation the schema runs (answers from the API's result cache never reach it) and
    logs each mutation under the request's correlation id."""

    def on_operation(self) -> Iterator[None]:
        started = time.perf_counter()
        yield
        ctx = self.execution_context
        seconds = time.perf_counter() - started
        result = ctx.result
        errors = getattr(result, "errors", None) if result is not None else ctx.pre_execution_errors
        context = ctx.context
        outcome = outcome_of(errors, getattr(result, "data", None), getattr(context, "refusal", None))
        try:
            kind = ctx.operation_type.value
        except Exception:  # the document did not parse: no operation type
            kind = "query"
        # only fields of the schema become label values: a document that failed validation may name anything
        field = root_field(ctx.graphql_document, ctx.operation_name) if valid(errors) else "-"
        requests_histogram().labels(kind, field, outcome).observe(seconds)
        if kind == "mutation":
            log.info("mutation %s %s in %.0f ms", field, outcome, seconds * 1000,
                     extra={"operation": field, "outcome": outcome})


class ClusterCollector(Collector):
    """The cluster and fairness gauges, from the read model at each scrape."""

    def __init__(self, read: ReadModel, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.read = read
        self.window_s = window_s

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        try:
            snap = self.read.view()
            figures = self.read.figures(self.window_s)
        except Exception as err:  # the store is away: leave the series out of this scrape
            log.warning("metrics: the read model is not readable (%s: %s)", type(err).__name__, err)
            return
        yield from job_gauges(snap.active_jobs)
        yield cluster_gpus(snap.nodes, snap.active_jobs)
        yield from fairness_gauges(figures)


def job_gauges(jobs: Iterable[dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
    pending: dict[tuple[str, str], list[int]] = {}
    running: dict[tuple[str, str, str], int] = {}
    for job in jobs:
        if job["state"] in WAITING:
            counts = pending.setdefault((job["project"], job["job_class"]), [0, 0])
            counts[0] += 1
            counts[1] += int(job["gpus"])
        elif job["state"] in RUNNING:
            key = (job["project"], job["job_class"], "funded" if job["funded"] else "unfunded")
            running[key] = running.get(key, 0) + 1
    jobs_g = GaugeMetricFamily("steward_pending_jobs", "Jobs waiting to start.", labels=["allocation", "class"])
    gpus_g = GaugeMetricFamily("steward_pending_gpus", "GPUs the pending jobs ask for.",
                               labels=["allocation", "class"])
    for (allocation, cls), (n, gpus) in sorted(pending.items()):
        jobs_g.add_metric([allocation, cls], n)
        gpus_g.add_metric([allocation, cls], gpus)
    run_g = GaugeMetricFamily("steward_running_jobs", "Running jobs.", labels=["allocation", "class", "occupancy"])
    for key, n in sorted(running.items()):
        run_g.add_metric(list(key), n)
    yield jobs_g
    yield gpus_g
    yield run_g


def _assigned(assignments: Any) -> Iterator[tuple[str, int]]:
    """GPUs held per node, from the jobs projection's `assignments` (node id -> GPU indices)."""
    for node, indices in (assignments or {}).items():
        yield str(node), len(indices)


def cluster_gpus(nodes: Iterable[dict[str, Any]], jobs: Iterable[dict[str, Any]]) -> GaugeMetricFamily:
    """GPUs by state: funded / unfunded (occupied on ready nodes), foreign (held by work another scheduler
    placed, e.g. jobs submitted to Slurm outside Steward), free, draining, down; sums to capacity."""
    held: dict[str, dict[str, int]] = {}
    for job in jobs:
        if job["state"] in RUNNING:
            kind = "funded" if job["funded"] else "unfunded"
            for node_id, n in _assigned(job["assignments"]):
                per = held.setdefault(node_id, {})
                per[kind] = per.get(kind, 0) + n
    totals = {"funded": 0, "unfunded": 0, "foreign": 0, "free": 0, "draining": 0, "down": 0}
    for node in nodes:
        gpus, state = int(node["gpus"]), str(node["state"])
        if state in DOWN_STATES:
            totals["down"] += gpus
        elif winding_down(state):  # draining or retiring (domain.nodes, ADR 0091)
            totals["draining"] += gpus
        else:
            per = held.get(str(node["node_id"]), {})
            funded, unfunded = per.get("funded", 0), per.get("unfunded", 0)
            totals["funded"] += funded
            totals["unfunded"] += unfunded
            left = max(0, gpus - funded - unfunded)
            foreign = min(left, int(node.get("foreign_gpus") or 0))
            totals["foreign"] += foreign
            totals["free"] += left - foreign
    family = GaugeMetricFamily("steward_cluster_gpus", "GPUs of registered nodes by state.", labels=["state"])
    for state, n in totals.items():
        family.add_metric([state], n)
    return family


def fairness_gauges(figures: Iterable[Any]) -> Iterator[GaugeMetricFamily]:
    """Per allocation of the tree, every level; `is_project` ("true" for leaves) lets a cluster-wide sum
    count each GPU-hour once (sum over the projects)."""
    labels = ["allocation", "is_project"]
    share = GaugeMetricFamily("steward_entitled_share", "The allocation's claim on the cluster (0..1).",
                              labels=labels)
    owed = GaugeMetricFamily("steward_owed_gpu_seconds", "GPU-seconds owed over the usage window.", labels=labels)
    delivered = GaugeMetricFamily("steward_delivered_gpu_seconds", "GPU-seconds delivered over the usage window.",
                                  labels=labels)
    ratio = GaugeMetricFamily("steward_owed_delivered_ratio", "Delivered / owed over the usage window.",
                              labels=labels)
    for f in figures:
        key = [f.name, "true" if f.is_project else "false"]
        share.add_metric(key, f.entitlement)
        owed.add_metric(key, f.owed)
        delivered.add_metric(key, f.delivered)
        if f.owed > 0:
            ratio.add_metric(key, f.delivered / f.owed)
    yield share
    yield owed
    yield delivered
    yield ratio


class _Global(Collector):
    """The process-wide registry (request histogram, build info, process_* metrics) inside a per-app one."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def endpoint(read: ReadModel) -> Any:
    """The `/metrics` handler of one app: the process's metrics plus that app's cluster gauges."""
    requests_histogram()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Global())
    registry.register(ClusterCollector(read))

    async def metrics(_: Request) -> Response:
        body = await asyncio.to_thread(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return metrics

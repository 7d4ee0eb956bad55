"""Prometheus metrics: where each process serves them, and what every process exports (docs/metrics.md).

The API serves `/metrics` on its own HTTP port (`steward.api.metrics`). The ledger, scheduler, worker
and executor each serve it from a small HTTP server on their metrics port: `STEWARD_METRICS_PORT` when
set (one process per pod in Kubernetes: 9464), else the API port + 1464 (9464 next to the default API
port 8000); `steward up` starts its processes on that base port + `PORT_OFFSETS[name]`, so one machine
runs them all. `STEWARD_METRICS_PORT=off` turns the server off. It binds `STEWARD_METRICS_HOST`
(127.0.0.1 by default, like every server of the stack). The same server answers `/ready`: 200, or 503 with
the reasons while the process is not ready (its Kafka clients still wait for the broker at their start:
ADR 0064); every other path answers the metrics.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from steward.config import Settings

log = logging.getLogger("steward.metrics")

DEFAULT_PORT = 9464
PORT_OFFSETS = {"ledger": 0, "scheduler": 1, "worker": 2, "executor": 3}
# the supervisor (`steward up` without --no-supervise; steward.infra.supervisor) serves its restart counts here
SUPERVISOR_OFFSET = 4
# the standbys of `steward up --standbys` (ADR 0060) serve `steward_leader` here
STANDBY_OFFSETS = {"ledger-2": 5, "scheduler-2": 6}
SERVED_BY_API = "api"


class MetricsSettingError(ValueError):
    """STEWARD_METRICS_PORT is neither a port number nor `off`."""


def base_port(settings: Settings, env: dict[str, str] | None = None) -> int | None:
    """The metrics port of a process started alone (None: off)."""
    raw = (env if env is not None else os.environ).get("STEWARD_METRICS_PORT", "").strip()
    if raw.lower() == "off":
        return None
    if not raw:
        return settings.api_port + (DEFAULT_PORT - 8000)
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise MetricsSettingError(f"STEWARD_METRICS_PORT must be a port number (1-65535) or 'off', got '{raw}'")
    return int(raw)


def stack_ports(settings: Settings, env: dict[str, str] | None = None) -> dict[str, int]:
    """The metrics port of each of Steward's processes as `steward up` starts them on one machine."""
    base = base_port(settings, env)
    if base is None:
        return {}
    return {name: base + offset for name, offset in PORT_OFFSETS.items()}


def supervisor_port(settings: Settings, env: dict[str, str] | None = None) -> int | None:
    """The supervisor's metrics port in a stack started by `steward up` (None: metrics off)."""
    base = base_port(settings, env)
    return None if base is None else base + SUPERVISOR_OFFSET


def standby_ports(settings: Settings, env: dict[str, str] | None = None) -> dict[str, int]:
    """The metrics port of each standby of `steward up --standbys` (ADR 0060)."""
    base = base_port(settings, env)
    return {} if base is None else {name: base + offset for name, offset in STANDBY_OFFSETS.items()}


def metrics_urls(settings: Settings, env: dict[str, str] | None = None) -> dict[str, str]:
    """Where to scrape each process of a stack started by `steward up` (the soak benchmark, tests)."""
    urls = {name: f"http://127.0.0.1:{port}/metrics" for name, port in stack_ports(settings, env).items()}
    urls[SERVED_BY_API] = f"http://{settings.api_host}:{settings.api_port}/metrics"
    return urls


def version() -> str:
    try:
        return importlib.metadata.version("steward")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def build_info(process: str, registry: CollectorRegistry = REGISTRY) -> Gauge:
    gauge = Gauge("steward_build_info", "Always 1; the labels say which version each process runs.",
                  ["version", "process"], registry=registry)
    gauge.labels(version=version(), process=process).set(1)
    return gauge


_not_ready: list[Callable[[], list[str]]] = []


def not_ready_when(check: Callable[[], list[str]]) -> None:
    """Register a readiness check: it returns why this process is not ready now (nothing: ready)."""
    _not_ready.append(check)


def readiness() -> list[str]:
    """Why this process is not ready now (empty: ready), from every registered check."""
    return [reason for check in _not_ready for reason in check()]


def _app(registry: CollectorRegistry) -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/ready":
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        reasons = readiness()
        body = json.dumps({"ready": not reasons, "reasons": reasons}).encode()
        start_response("503 Service Unavailable" if reasons else "200 OK",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes are not logged."""


def _start_server(host: str, port: int, registry: CollectorRegistry) -> None:
    """prometheus_client's `start_http_server`, with `/ready` beside the metrics."""
    server_class = type("MetricsServer", (ThreadingWSGIServer,),
                        {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
    httpd: ThreadingWSGIServer = make_server(host, port, _app(registry), server_class, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="metrics-server", daemon=True).start()


def serve(process: str, settings: Settings, registry: CollectorRegistry = REGISTRY) -> int | None:
    """Export `steward_build_info` and serve the registry (with the client's `process_*` metrics) on
    this process's metrics port; returns the port, or None when off or the port is taken (logged: the
    process does its work without metrics rather than not at all). Once per process and registry."""
    if id(registry) in _served:
        return _served[id(registry)]
    _served[id(registry)] = None
    build_info(process, registry)
    port = base_port(settings)
    if port is None:
        log.info("metrics server off (STEWARD_METRICS_PORT=off)")
        return None
    host = os.environ.get("STEWARD_METRICS_HOST", "127.0.0.1")
    try:
        _start_server(host, port, registry)
    except OSError as err:
        log.error("metrics not served: cannot listen on %s:%d (%s); set STEWARD_METRICS_PORT", host, port, err)
        return None
    log.info("metrics on http://%s:%d/metrics, readiness on /ready", host, port)
    _served[id(registry)] = port
    return port


_served: dict[int, int | None] = {}
_executor_gauges: dict[int, Gauge] = {}


def executor_jobs(executor_id: str, running: Callable[[], int], registry: CollectorRegistry = REGISTRY) -> Gauge:
    """`steward_executor_jobs`: the attempts an executor runs now (the node agent's job processes, the Slurm
    executor's Slurm jobs, the Kubernetes executor's pods; read at each scrape)."""
    gauge = _executor_gauges.get(id(registry))
    if gauge is None:
        gauge = _executor_gauges[id(registry)] = Gauge(
            "steward_executor_jobs", "Attempts the executor is running now (node agent: job processes; Slurm: "
            "Slurm jobs; Kubernetes: pods).", ["executor"],
            registry=registry)
    gauge.labels(executor=executor_id).set_function(lambda: float(running()))
    return gauge

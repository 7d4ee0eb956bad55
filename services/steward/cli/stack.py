"""Operator commands: up, down, doctor, migrate, and `run NAME` (one of Steward's own processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import httpx
import typer

from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.cli.tokens import ensure_admin_token
from steward.config import Settings, get_settings
from steward.infra import doctor as doctor_checks
from steward.infra.processes import (
    DEMO_PROCESSES,
    OWN_PROCESSES,
    InfraError,
    Paths,
    infra_script,
    read_pid,
    start_own,
    stop_own,
    write_stack_env,
)
from steward.logs import configure as configure_logging


def _wait_for_api(settings: Settings, timeout: float = 60.0) -> None:
    url = f"http://{settings.api_host}:{settings.api_port}/healthz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    fail(f"the API did not answer at {url} within {timeout:.0f} s; see {settings.run_dir}/logs/api.log")


def bring_up(settings: Settings, postgres: bool = True, restart: bool = False) -> dict[str, Any]:
    """Start the real services, migrate the store, then Steward's own processes (idempotent: processes
    already running are kept, unless `restart`, which stops them first so that they run the code and
    settings installed now; the services and their data are kept either way)."""
    from steward.metrics import MetricsSettingError, stack_ports
    from steward.store.migrate import upgrade

    paths = Paths(settings.run_dir)
    from steward.ledger.service import LedgerSettingError, ledger_writer_mode

    try:
        metrics_ports = stack_ports(settings)
        ledger_writer_mode()  # checked before anything starts, as the ledger would refuse it
    except (MetricsSettingError, LedgerSettingError) as err:
        fail(str(err), 2)
    restarted = [name for name in reversed(OWN_PROCESSES) if restart and stop_own(name, paths)]
    infra_script("kafka", "start", settings=settings)
    infra_script("kafka", "topics", settings=settings)
    infra_script("temporal", "start", settings=settings)
    values = {"STEWARD_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
              "STEWARD_TEMPORAL_ADDRESS": settings.temporal_address}
    if postgres:
        infra_script("postgres", "start", settings=settings)
        app_url, owner_url = settings.postgres_urls()
        values |= {"STEWARD_STORE_URL": app_url, "STEWARD_STORE_OWNER_URL": owner_url}
    else:
        values |= {"STEWARD_STORE_URL": settings.resolved_store_url}
    write_stack_env(paths, values)
    upgrade(values.get("STEWARD_STORE_OWNER_URL", values["STEWARD_STORE_URL"]))
    token_file = ensure_admin_token(settings, values["STEWARD_STORE_URL"])
    env = os.environ | values | {"STEWARD_RUN_DIR": str(settings.run_dir)}
    pids = {name: start_own(name, paths, env | metrics_env(name, metrics_ports)) for name in OWN_PROCESSES}
    _wait_for_api(settings)
    dead = [name for name in OWN_PROCESSES if read_pid(paths, name) is None]
    if dead:  # e.g. the API could not bind because another process holds its port
        logs = ", ".join(str(paths.log_file(name)) for name in dead)
        fail(f"{', '.join(dead)} exited right after starting; see {logs}")
    return {"run_dir": str(settings.run_dir), "store": "postgresql" if postgres else "sqlite",
            "api": settings.resolved_api_url, "processes": pids, "admin_token_file": str(token_file),
            "restarted": restarted[::-1],
            "metrics": {name: f"http://127.0.0.1:{port}/metrics" for name, port in metrics_ports.items()}
            | {"api": f"http://{settings.api_host}:{settings.api_port}/metrics"}}


def metrics_env(name: str, ports: dict[str, int]) -> dict[str, str]:
    """Each process serves its metrics on its own port of the stack's range (none when off); the API
    serves /metrics on its HTTP port."""
    if name in ports:
        return {"STEWARD_METRICS_PORT": str(ports[name])}
    return {} if name == "api" else {"STEWARD_METRICS_PORT": "off"}


def bring_down(settings: Settings, services: bool = True) -> dict[str, Any]:
    paths = Paths(settings.run_dir)
    stopped = [name for name in (*DEMO_PROCESSES, *reversed(OWN_PROCESSES)) if stop_own(name, paths)]
    if services:
        for name in ("temporal", "kafka", "postgres"):
            infra_script(name, "stop", settings=settings, check=False)
    paths.stack_env.unlink(missing_ok=True)
    return {"stopped": stopped, "services_stopped": services}


def run_process(name: str, settings: Settings) -> None:
    """Run one of Steward's processes in the foreground until SIGTERM/SIGINT."""
    configure_logging(name)
    stop = threading.Event()
    if name in ("ledger", "scheduler"):
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        if name == "ledger":
            from steward.ledger.service import LedgerSettingError, ledger_writer_mode, run_ledger

            try:
                ledger_writer_mode()
            except LedgerSettingError as err:
                fail(str(err), 2)
            run_ledger(settings, stop)
        else:
            from steward.scheduler.service import run_scheduler

            run_scheduler(settings, stop)
        return
    if name == "api":
        import importlib.util

        import uvicorn

        from steward.api.app import create_app
        from steward.api.settings import get_api_settings

        api = get_api_settings()
        ws = "websockets-sansio" if importlib.util.find_spec("websockets") else "auto"
        uvicorn.run(create_app(settings, api), host=settings.api_host, port=settings.api_port,
                    log_level="warning", lifespan="on", ws=ws,
                    ws_max_size=api.api_max_ws_message_bytes, ws_max_queue=8)
        return

    async def main() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        if name == "worker":
            from steward_workflows.worker import run_worker

            await run_worker(settings, done)
        else:
            from steward.executor.local import run_executor

            await run_executor(settings, done)

    asyncio.run(main())


def register(app: typer.Typer) -> None:
    @app.command()
    def up(
        postgres: bool = typer.Option(True, "--postgres/--sqlite", help="event store: PostgreSQL or SQLite"),
        restart: bool = typer.Option(False, "--restart",
                                     help="restart Steward's own processes (after an upgrade); services keep running"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Start Kafka, PostgreSQL, Temporal and Steward's processes (idempotent)."""
        settings = get_settings()
        try:
            result = bring_up(settings, postgres, restart)
        except InfraError as err:
            fail(str(err))
        emit(result, output)

    @app.command()
    def down(
        keep_services: bool = typer.Option(False, "--keep-services", help="stop only Steward's processes"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Stop Steward's processes and the services started by `up`."""
        emit(bring_down(get_settings(), not keep_services), output)

    @app.command()
    def doctor(json_out: bool = typer.Option(False, "--json", help="print JSON"),
               output: OutputFormat = OutputOption) -> None:
        """Check Kafka, PostgreSQL, Temporal and the store: ok, version, and a fix when not ok."""
        report = doctor_checks.run_all(get_settings())
        fmt = OutputFormat.json if json_out else output
        emit(report, fmt, [[k, "ok" if v["ok"] else "NOT OK", v.get("version") or "", v.get("fix") or ""]
                           for k, v in report.items()], ["part", "status", "version", "fix"])
        if not all(v["ok"] for v in report.values()):
            raise typer.Exit(1)

    @app.command()
    def migrate(url: str = typer.Option(None, help="the owner's store URL (default: from settings)")) -> None:
        """Apply the Alembic migrations to the store (as the schema owner)."""
        from steward.store.migrate import upgrade

        upgrade(url or get_settings().resolved_owner_url)
        typer.echo("store at the latest schema")

    @app.command("run", hidden=True)
    def run(name: str = typer.Argument(..., help=", ".join(OWN_PROCESSES))) -> None:
        """Run one of Steward's processes in the foreground."""
        if name not in OWN_PROCESSES:
            fail(f"unknown process '{name}'; one of {', '.join(OWN_PROCESSES)}", 2)
        run_process(name, get_settings())

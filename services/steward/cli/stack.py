"""Operator commands: up, down, doctor, migrate, and `run NAME` (one of Steward's own processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import typer

from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.cli.tokens import ensure_admin_token, ensure_token
from steward.config import Settings, get_settings
from steward.executor.attempts import jobs_left_running
from steward.executor.settings import ClusterSettingError, ExecutorSettings
from steward.infra import doctor as doctor_checks
from steward.infra.processes import (
    COMPONENT_OF,
    DEMO_PROCESSES,
    OWN_PROCESSES,
    STANDBYS,
    SUPERVISOR,
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


EXECUTOR_KINDS = ("local", "slurm", "kubernetes")


def slurm_values(settings: Settings) -> dict[str, str]:
    """The executor's environment for `--executor slurm`: an existing cluster's slurm.conf when one is named
    (STEWARD_SLURM_CONF or SLURM_CONF; docs/operator-guide.md "Steward on Slurm"), else the project's own
    cluster (infra/slurm.sh), started now."""
    conf = os.environ.get("STEWARD_SLURM_CONF") or os.environ.get("SLURM_CONF", "")
    if not conf:
        infra_script("slurm", "start", settings=settings)
        conf = str(settings.run_dir / "slurm" / "slurm.conf")
    elif not os.path.isfile(conf):
        fail(f"the Slurm configuration {conf} does not exist (STEWARD_SLURM_CONF or SLURM_CONF)", 2)
    return {"STEWARD_EXECUTOR_KIND": "slurm", "SLURM_CONF": conf, "STEWARD_SLURM_CONF": conf}


def kubernetes_values(settings: Settings) -> dict[str, str]:
    """The executor's environment for `--executor kubernetes`: an existing cluster's kubeconfig when one is named
    (STEWARD_K8S_KUBECONFIG or KUBECONFIG; docs/operator-guide.md "Steward on Kubernetes"), else the project's
    own API server with kwok GPU nodes (infra/k8s.sh), started now."""
    conf = os.environ.get("STEWARD_K8S_KUBECONFIG") or os.environ.get("KUBECONFIG", "")
    if not conf:
        infra_script("k8s", "start", settings=settings)
        conf = str(settings.run_dir / "k8s" / "kubeconfig")
    elif not os.path.isfile(conf):
        fail(f"the kubeconfig {conf} does not exist (STEWARD_K8S_KUBECONFIG or KUBECONFIG)", 2)
    # the executor reads the recorded namespace mappings and the queue through the API, with a read-only token
    # of its own (ADR 0054; minted once the store is migrated)
    return {"STEWARD_EXECUTOR_KIND": "kubernetes", "STEWARD_K8S_KUBECONFIG": conf,
            "STEWARD_K8S_API_URL": settings.resolved_api_url,
            "STEWARD_K8S_API_TOKEN_FILE": str(kubernetes_token_file(settings))}


def cluster_values(executor: str, cluster: str) -> dict[str, str]:
    """The executor's cluster (`--cluster`, ADR 0085), checked before anything starts: a cluster's name, for a
    Slurm or Kubernetes executor only (a node agent's nodes are named by `steward cluster apply`). Without
    `--cluster`, a STEWARD_EXECUTOR_CLUSTER of the environment is checked the same way."""
    if cluster and executor == "local":
        fail("--cluster names the cluster of a Slurm or Kubernetes executor's nodes; a node agent's nodes are "
             "named by `steward cluster apply` (a `clusters:` section)", 2)
    options = ExecutorSettings(cluster=cluster) if cluster else ExecutorSettings()
    try:
        name = options.checked_cluster() if executor != "local" else ""
    except ClusterSettingError as err:
        fail(str(err).replace("STEWARD_EXECUTOR_CLUSTER", "--cluster") if cluster else str(err), 2)
    return {"STEWARD_EXECUTOR_CLUSTER": name} if cluster else {}


def kubernetes_token_file(settings: Settings) -> Path:
    """The Kubernetes executor's API token (an auditor's: it reads, never writes) in the run folder."""
    return settings.run_dir / "secrets" / "k8s-executor-token"


def bring_up(settings: Settings, postgres: bool = True, restart: bool = False,
             executor: str = "local", api_replicas: int = 1, supervise: bool = True,
             standbys: bool = False, cluster: str = "") -> dict[str, Any]:
    """Start the real services, migrate the store, then Steward's own processes (idempotent: processes
    already running are kept, unless `restart`, which stops them first so that they run the code and
    settings installed now; the services and their data are kept either way). `executor`: what runs the
    jobs, this machine ("local"), a Slurm cluster ("slurm") or a Kubernetes cluster ("kubernetes").
    `supervise`: start the supervisor last, which restarts any of them that dies (steward.infra.supervisor;
    without it a supervisor left by an earlier `up` is stopped). `standbys`: a second ledger and scheduler
    (`ledger-2`, `scheduler-2`) standing by to take over (ADR 0060; without it those of an earlier `up` stop).
    `cluster`: the cluster a Slurm or Kubernetes executor registers its nodes in (ADR 0085; empty: each node keeps
    the one the ledger records)."""
    if executor not in EXECUTOR_KINDS:
        fail(f"unknown executor {executor!r}: choose one of {', '.join(EXECUTOR_KINDS)}", 2)
    named = cluster_values(executor, cluster)
    # lazy: start-up: `steward up` only (the other commands of the CLI load neither Prometheus nor Alembic)
    from steward.metrics import MetricsSettingError, stack_ports, standby_ports, supervisor_port
    from steward.store.migrate import upgrade

    paths = Paths(settings.run_dir)
    # lazy: start-up: the ledger's module (SQLAlchemy, Kafka) only to check its setting before starting it
    from steward.ledger.service import LedgerSettingError, ledger_writer_mode, topic_refresh_s

    try:
        metrics_ports = stack_ports(settings)
        ledger_writer_mode()  # checked before anything starts, as the ledger would refuse it
        topic_refresh_s()
    except (MetricsSettingError, LedgerSettingError) as err:
        fail(str(err), 2)
    if restart or not supervise:  # first: it would start again what a restart stops
        stop_own(SUPERVISOR, paths)
    restarted = [name for name in (*STANDBYS, *reversed(OWN_PROCESSES)) if restart and stop_own(name, paths)]
    if not standbys:
        for name in STANDBYS:
            stop_own(name, paths)
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
    if executor == "slurm":
        values |= slurm_values(settings) | named
    elif executor == "kubernetes":
        values |= kubernetes_values(settings) | named
    write_stack_env(paths, values)
    upgrade(values.get("STEWARD_STORE_OWNER_URL", values["STEWARD_STORE_URL"]))
    token_file = ensure_admin_token(settings, values["STEWARD_STORE_URL"])
    if executor == "kubernetes":
        ensure_token(values["STEWARD_STORE_URL"], kubernetes_token_file(settings), "auditor", "k8s-executor")
    env = os.environ | values | {"STEWARD_RUN_DIR": str(settings.run_dir), "STEWARD_API_REPLICAS": str(api_replicas)}
    pids = {name: start_own(name, paths, env | metrics_env(name, metrics_ports)) for name in OWN_PROCESSES}
    pids |= start_api_replicas(paths, env, api_replicas, restart)
    if standbys:
        ports = standby_ports(settings)
        pids |= {name: start_own(name, paths, env | metrics_env(name, ports)) for name in STANDBYS}
        metrics_ports = metrics_ports | ports
    _wait_for_api(settings)
    dead = [name for name in pids if read_pid(paths, name) is None]
    if dead:  # e.g. the API could not bind because another process holds its port
        logs = ", ".join(str(paths.log_file(name)) for name in dead)
        fail(f"{', '.join(dead)} exited right after starting; see {logs}")
    if supervise:
        port = supervisor_port(settings)
        pids[SUPERVISOR] = start_own(SUPERVISOR, paths, env | {"STEWARD_METRICS_PORT": str(port) if port else "off"})
        if port:
            metrics_ports = metrics_ports | {SUPERVISOR: port}
    return {"run_dir": str(settings.run_dir), "store": "postgresql" if postgres else "sqlite",
            "api": settings.resolved_api_url, "processes": pids, "admin_token_file": str(token_file),
            "restarted": restarted[::-1],
            "metrics": {name: f"http://127.0.0.1:{port}/metrics" for name, port in metrics_ports.items()}
            | {"api": f"http://{settings.api_host}:{settings.api_port}/metrics"}}


def api_replicas_running(paths: Paths) -> list[str]:
    """The API replicas beside `api` that an earlier `up --api-replicas` started (`api-2`, `api-3`, ...)."""
    names = [p.stem for p in paths.pids.glob("api-*.pid") if p.stem.removeprefix("api-").isdigit()]
    return sorted(names, key=lambda n: int(n.removeprefix("api-")))


def start_api_replicas(paths: Paths, env: dict[str, str], replicas: int, restart: bool = False) -> dict[str, int]:
    """API replicas 2..`replicas` beside `api`, on its address: every API process of the stack binds the
    port with SO_REUSEPORT when STEWARD_API_REPLICAS > 1 and the kernel spreads the connections among them
    (`serve_api`; ADR 0047). Replicas beyond `replicas` left by an earlier `up` are stopped (all of them
    on `restart`, as `api` was)."""
    if replicas < 1:
        fail(f"--api-replicas must be at least 1, got {replicas}", 2)
    for name in api_replicas_running(paths):
        if restart or int(name.removeprefix("api-")) > replicas:
            stop_own(name, paths)
    return {f"api-{k}": start_own(f"api-{k}", paths, env | metrics_env("api", {}))
            for k in range(2, replicas + 1)}


def is_api(name: str) -> bool:
    """`api` or one of its replicas (`api-2`, ...)."""
    return name == "api" or (name.startswith("api-") and name.removeprefix("api-").isdigit())


def serve_api(settings: Settings) -> None:
    """The API in the foreground; with STEWARD_API_REPLICAS > 1, on a socket bound with SO_REUSEPORT so that
    the stack's replicas share one address (a stray API of another stack on the same port would then
    share it too, so a single API binds exclusively: its start fails if the port is taken)."""
    # lazy: start-up: each process of the stack loads only its own service
    import importlib.util
    import socket

    import uvicorn

    from steward.api.app import create_app
    from steward.api.settings import get_api_settings

    api = get_api_settings()
    ws = "websockets-sansio" if importlib.util.find_spec("websockets") else "auto"
    config = uvicorn.Config(create_app(settings, api), host=settings.api_host, port=settings.api_port,
                            log_level="warning", lifespan="on", ws=ws,
                            ws_max_size=api.api_max_ws_message_bytes, ws_max_queue=8)
    replicas = os.environ.get("STEWARD_API_REPLICAS", "1")
    if not replicas.isdigit() or int(replicas) <= 1:
        uvicorn.Server(config).run()
        return
    family = socket.AF_INET6 if ":" in settings.api_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((settings.api_host, settings.api_port))
    except OSError as err:
        fail(f"the API cannot bind {settings.api_host}:{settings.api_port}: {err.strerror}")
    uvicorn.Server(config).run(sockets=[sock])


def metrics_env(name: str, ports: dict[str, int]) -> dict[str, str]:
    """Each process serves its metrics on its own port of the stack's range (none when off); the API
    serves /metrics on its HTTP port."""
    if name in ports:
        return {"STEWARD_METRICS_PORT": str(ports[name])}
    return {} if name == "api" else {"STEWARD_METRICS_PORT": "off"}


def bring_down(settings: Settings, services: bool = True) -> dict[str, Any]:
    """Stop the supervisor (first: it would restart the others), the demo's processes, Steward's own and,
    unless told otherwise, the services; and say which job processes it leaves running: the node agent's
    jobs outlive it by design (it re-attaches to them when it starts again, and fences those whose run
    ended meanwhile; ADR 0058)."""
    paths = Paths(settings.run_dir)
    stopped = [name for name in (SUPERVISOR, *DEMO_PROCESSES, *api_replicas_running(paths), *STANDBYS,
                                 *reversed(OWN_PROCESSES))
               if stop_own(name, paths)]
    if services:
        # slurm.sh and k8s.sh stop only the cluster they started
        for name in ("temporal", "kafka", "postgres", "slurm", "k8s"):
            infra_script(name, "stop", settings=settings, check=False)
    paths.stack_env.unlink(missing_ok=True)
    left = jobs_left_running(settings.run_dir)
    result: dict[str, Any] = {"stopped": stopped, "services_stopped": services, "jobs_left_running": left}
    if left:
        result["note"] = (f"{len(left)} job process(es) of the node agent still run (listed in jobs_left_running): "
                          "the agent re-attaches to them at its next start and stops those whose run ended; "
                          "to end them now: kill -TERM -<pid> (each leads its own process group)")
    return result


def run_process(name: str, settings: Settings) -> None:
    """Run one of Steward's processes in the foreground until SIGTERM/SIGINT, as its component (its Kafka
    principal and command topic, ADR 0036) unless STEWARD_COMPONENT names another (tests run a ledger on
    topics of their own as the operator): a process can authenticate only as a principal whose password
    file it can read, so naming a component grants nothing."""
    configure_logging(name)
    if not os.environ.get("STEWARD_COMPONENT"):
        settings = settings.model_copy(update={"component": COMPONENT_OF.get("api" if is_api(name) else name, "none")})
    stop = threading.Event()
    if name == SUPERVISOR:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        # lazy: start-up: each process of the stack loads only its own service
        from steward.infra.supervisor import run_supervisor

        run_supervisor(settings, stop)
        return
    role = STANDBYS.get(name, name)  # a standby runs as its role (ADR 0060)
    if role in ("ledger", "scheduler"):
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        # each is a candidate for its role's lease: the active, or a standby while another holds it (ADR 0060)
        if role == "ledger":
            # lazy: start-up: each process of the stack loads only its own service
            from steward.ledger.service import (
                LedgerSettingError,
                ledger_writer_mode,
                run_ledger_candidate,
                topic_refresh_s,
            )

            try:
                ledger_writer_mode()
                topic_refresh_s()
            except LedgerSettingError as err:
                fail(str(err), 2)
            run_ledger_candidate(settings, stop)
        else:
            # lazy: start-up: each process of the stack loads only its own service
            from steward.scheduler.service import run_scheduler_candidate

            run_scheduler_candidate(settings, stop)
        return
    if is_api(name):
        serve_api(settings)
        return

    async def main() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, done.set)
        if name == "worker":
            # lazy: start-up: each process of the stack loads only its own service
            from steward_workflows.worker import run_worker

            await run_worker(settings, done)
        elif ExecutorSettings().kind == "slurm":
            # lazy: start-up: each process of the stack loads only its own service
            from steward.executor.slurm import run_slurm_executor

            await run_slurm_executor(settings, done)
        elif ExecutorSettings().kind == "kubernetes":
            # lazy: start-up: each process of the stack loads only its own service
            from steward.executor.kubernetes import run_kubernetes_executor

            await run_kubernetes_executor(settings, done)
        else:
            # lazy: start-up: each process of the stack loads only its own service
            from steward.executor.local import run_executor

            await run_executor(settings, done)

    asyncio.run(main())


def register(app: typer.Typer) -> None:
    @app.command()
    def up(
        postgres: bool = typer.Option(True, "--postgres/--sqlite", help="event store: PostgreSQL or SQLite"),
        restart: bool = typer.Option(False, "--restart",
                                     help="restart Steward's own processes (after an upgrade); services keep running"),
        executor: str = typer.Option("local", "--executor",
                                     help="what runs the jobs: local (this machine), slurm (the cluster "
                                          "STEWARD_SLURM_CONF names, else the project's own, infra/slurm.sh) or "
                                          "kubernetes (the cluster STEWARD_K8S_KUBECONFIG or KUBECONFIG names, "
                                          "else the project's own, infra/k8s.sh)"),
        api_replicas: int = typer.Option(1, "--api-replicas", min=1, max=32,
                                         help="API processes sharing the API's address (SO_REUSEPORT)"),
        supervise: bool = typer.Option(True, "--supervise/--no-supervise",
                                       help="restart any of Steward's processes that dies, with backoff"),
        standbys: bool = typer.Option(False, "--standbys/--no-standbys",
                                      help="a standby ledger and scheduler (ledger-2, scheduler-2) that take over "
                                           "within 5 s of the active one's death (off by default)"),
        cluster: str = typer.Option("", "--cluster",
                                    help="with --executor slurm or kubernetes: the cluster its nodes are "
                                         "registered in (ADR 0085; default: each node keeps the cluster Steward "
                                         "records for it, the default cluster for a new one)"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Start Kafka, PostgreSQL, Temporal and Steward's processes (idempotent), supervised."""
        settings = get_settings()
        try:
            result = bring_up(settings, postgres, restart, executor, api_replicas, supervise, standbys, cluster)
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
        # lazy: start-up: Alembic only for `steward migrate`
        from steward.store.migrate import upgrade

        upgrade(url or get_settings().resolved_owner_url)
        typer.echo("store at the latest schema")

    @app.command("run", hidden=True)
    def run(name: str = typer.Argument(..., help=", ".join((*OWN_PROCESSES, *STANDBYS, SUPERVISOR)))) -> None:
        """Run one of Steward's processes in the foreground."""
        if name not in (*OWN_PROCESSES, *STANDBYS, SUPERVISOR) and not is_api(name):
            fail(f"unknown process '{name}'; one of {', '.join((*OWN_PROCESSES, *STANDBYS, SUPERVISOR))}", 2)
        run_process(name, get_settings())

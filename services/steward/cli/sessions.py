"""Contract commands: interactive sessions (`session open|restore|show`) and `preempt` (admins; managers
for jobs in their subtree), both through the API, and the simulated executor (`executor sim`).
Registered by cli/main.py."""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from steward.cli import readable
from steward.cli.client import GraphQLClient
from steward.cli.jobs import (
    JOB_FIELDS,
    OPEN_SESSION,
    RESTORE_SESSION,
    ClusterOption,
    GpuModelOption,
    accepts_input,
    echo_outlook,
    refusal,
)
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings
from steward.domain.commands import DEFAULT_GRACE_S

SESSION_EVENTS = ("JobSubmitted", "JobPlaced", "JobStarted", "SessionOpened", "SessionWarned", "SessionIdle",
                  "SessionActive", "ProtectionRevoked", "SessionCapReached", "CheckpointSaved", "JobPreempted",
                  "SessionRestored", "JobCompleted", "JobFailed", "JobCancelled", "JobLost", "JobRequeued",
                  "SessionAddressPublished")

JOB_EVENTS = """query($id: ID!) { job(id: $id) { id state attempt assignments
  protectedUntil sessionCapAt sessionWarningsAt sessionAddress
  events { position type payload recordedAt } } }"""


PREEMPT = f"""mutation($id: ID!, $reason: String!, $grace: Float!, $requeue: Boolean!, $attempt: BigInt) {{
  requestPreemption(job: $id, reason: $reason, graceS: $grace, requeue: $requeue, attempt: $attempt) {{
    __typename
    ... on Rejected {{ code reason }}
    ... on InvalidInput {{ field message }}
    ... on NotAuthorised {{ message }}
    ... on PreemptionRequested {{ attempt requestedAt graceS requeue position job {{ {JOB_FIELDS} }} }} }} }}"""


def register(app: typer.Typer) -> None:
    session_app = typer.Typer(no_args_is_help=True, help="Interactive sessions (researchers).")
    executor_app = typer.Typer(no_args_is_help=True, help="Executors (node agents).")
    app.add_typer(session_app, name="session")
    app.add_typer(executor_app, name="executor")

    @session_app.command("open", context_settings={"allow_interspersed_args": False})
    def session_open(
        command: list[str] = typer.Argument(..., help="the session's command, after --"),
        project: str = typer.Option(..., "--project", "-p"),
        gpus: int = typer.Option(1, "--gpus", "-g"),
        cap: float = typer.Option(8 * 3600, "--cap", help="protected time in seconds until the cap (at most 8 h)"),
        gpu_model: list[str] = GpuModelOption,
        cluster: list[str] = ClusterOption,
        output: OutputFormat = OutputOption,
    ) -> None:
        """Open an interactive session: protected until its cap, warned 30 and 5 minutes before it. Like
        `submit`, --gpu-model and --cluster say what it accepts (none: any)."""
        if gpus < 1:
            fail(f"--gpus must be at least 1, got {gpus}", 2)
        res = GraphQLClient(get_settings()).execute(OPEN_SESSION, {"input": {
            "project": project, "gpus": gpus, "command": command, "capS": cap} | accepts_input(gpu_model, cluster)}
        )["openSession"]
        if (why := refusal(res)) is not None:
            fail(f"session {why}", 2)
        job = res["job"]
        emit({**job, "outlook": res.get("outlook")}, output, [[job["id"], job["project"], job["state"], job["gpus"]]],
             ["id", "project", "state", "gpus"])
        if output is not OutputFormat.json:
            echo_outlook(res.get("outlook"))

    @session_app.command("restore")
    def session_restore(session_id: str = typer.Argument(..., help="the stopped session"),
                        output: OutputFormat = OutputOption) -> None:
        """Re-open a stopped session from its last checkpoint, on its previous node when that has room."""
        res = GraphQLClient(get_settings()).execute(RESTORE_SESSION, {"id": session_id})["restoreSession"]
        if (why := refusal(res)) is not None:
            fail(f"restore {why}", 2)
        job = res["job"]
        emit(job, output, [[session_id, job["id"], job["state"]]], ["session", "restored as", "state"])

    @session_app.command("show")
    def session_show(job_id: str = typer.Argument(...), output: OutputFormat = OutputOption) -> None:
        """A session's timeline: opened, warnings, idleness, cap, checkpoints, restores."""
        job = GraphQLClient(get_settings()).execute(JOB_EVENTS, {"id": job_id})["job"]
        if job is None:
            fail(f"no session '{job_id}'", 1)
        timeline = [e for e in job["events"] if e["type"] in SESSION_EVENTS]
        times = {k: job.get(k) for k in readable.CONTRACT_TIME_FIELDS}
        # how to reach it: what the current attempt published while it runs (ADR 0055), else nothing
        address = {"sessionAddress": job.get("sessionAddress")}
        if output is not OutputFormat.json:  # the current attempt's times as recorded, as local dates
            emit(readable.contract_times(times) | {"sessionAddress": address["sessionAddress"] or "-"}, output)
            typer.echo("")
        emit({"id": job["id"], "state": job["state"], "attempt": job["attempt"], **times, **address,
              "events": timeline},
             output,
             [[e["position"], e["type"], _summary(e["type"], e["payload"])] for e in timeline],
             ["position", "event", "detail"])

    @app.command("preempt")
    def preempt(
        job_id: str = typer.Argument(...),
        reason: str = typer.Option("operator request (steward preempt)", "--reason", "-r",
                                   help="why (recorded with the request)"),
        grace: float = typer.Option(DEFAULT_GRACE_S, help="seconds between the checkpoint request and the stop"),
        requeue: bool = typer.Option(True, "--requeue/--no-requeue"),
        attempt: int | None = typer.Option(None, "--attempt", min=1,
                                           help="only this attempt (refused once the job is at another one); "
                                                "without it, whichever attempt runs when the ledger decides"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Ask for a running job's preemption (admins; managers in their subtree): checkpoint, grace, stop,
        requeue. Refused while the job is inside its protection. Once per attempt: a retry with `--attempt`
        cannot stop the attempt that follows."""
        res = GraphQLClient(get_settings()).execute(
            PREEMPT, {"id": job_id, "reason": reason, "grace": grace, "requeue": requeue,
                      "attempt": attempt})["requestPreemption"]
        if (why := refusal(res)) is not None:
            fail(f"preemption {why}", 2)
        job = res["job"]
        emit(res, output, [[job["id"], res["attempt"], job["state"], res["requestedAt"], res["graceS"], res["requeue"],
                            res["position"]]],
             ["job", "attempt", "state", "requested at", "grace s", "requeue", "position"])

    @executor_app.command("sim")
    def executor_sim(
        executor_id: str = typer.Option("sim", "--id", help="serves task queue executor-<id>"),
        speed: float = typer.Option(60.0, help="virtual seconds per real second"),
        duration: float = typer.Option(3600.0, help="virtual seconds of a job that does not say"),
        nodes: int = typer.Option(0, help="register this many virtual nodes <id>-n<i> first"),
        gpus: int = typer.Option(8, help="GPUs per virtual node"),
    ) -> None:
        """Run a simulated executor in the foreground (load tests of the live stack)."""
        # lazy: start-up: the simulated executor (Temporal) loads only for `steward sim-executor`
        import signal

        from steward.executor.sim import run_sim_executor

        settings = get_settings().model_copy(update={"executor_id": executor_id, "component": "executor"})

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await run_sim_executor(settings, stop, speed, duration, nodes, gpus)

        asyncio.run(main())


def _summary(kind: str, p: dict[str, Any]) -> str:
    if kind == "SessionOpened":
        warnings = p.get("warnings_at") or []
        return (f"cap at {readable.local_time(p.get('cap_at'))}, warnings at "
                f"{', '.join(readable.local_time(w) for w in warnings) or '-'}")
    if kind == "SessionWarned":
        return f"{p.get('kind')}: {p.get('seconds_left')} s left"
    if kind in ("JobPreempted", "JobLost"):
        return f"{p.get('reason')} (exit {p.get('exit_code')})"
    if kind == "SessionRestored":
        return f"restored as {p.get('new_job_id')} from {p.get('checkpoint_path')}"
    if kind == "CheckpointSaved":
        return str(p.get("path"))
    if kind == "SessionAddressPublished":
        return f"attempt {p.get('attempt')} reachable at {p.get('address')}"
    if kind == "JobSubmitted" and p.get("restored_from"):
        return f"restored from {p['restored_from']}"
    return ""

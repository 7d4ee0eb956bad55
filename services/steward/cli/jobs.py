"""Researcher commands: submit, job show, jobs."""

from __future__ import annotations

import typer

from steward.cli.client import GraphQLClient
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings

JOB_FIELDS = """id project state gpus minRuntimeS resumable jobClass priority command submittedAt attempt
assignments funded startedAt endedAt exitCode"""

SUBMIT = f"""
mutation($input: SubmitJobInput!) {{
  submitJob(input: $input) {{
    __typename
    ... on JobAccepted {{ job {{ {JOB_FIELDS} }} }}
    ... on Rejected {{ code reason }}
    ... on InvalidInput {{ field message }}
    ... on NotAuthorised {{ message }}
  }}
}}"""

JOB = f"""query($id: String!) {{ job(id: $id) {{ {JOB_FIELDS}
  events {{ position streamId version type payload metadata recordedAt hash }} }} }}"""

JOBS = f"""query($state: String, $project: String, $limit: Int!) {{
  jobs(state: $state, project: $project, limit: $limit) {{ {JOB_FIELDS} }} }}"""


def register(app: typer.Typer) -> None:
    job_app = typer.Typer(no_args_is_help=True, help="One job.")
    app.add_typer(job_app, name="job")

    @app.command(context_settings={"allow_interspersed_args": False})
    def submit(
        command: list[str] = typer.Argument(..., help="the command to run, after --"),
        project: str = typer.Option(..., "--project", "-p", help="the project (allocation) that funds it"),
        gpus: int = typer.Option(1, "--gpus", "-g", help="GPUs it needs, all at once"),
        min_runtime: float = typer.Option(0, "--min-runtime", help="protection in seconds (0 = unfunded)"),
        resumable: bool = typer.Option(False, "--resumable/--not-resumable",
                                       help="it checkpoints and resumes"),
        job_class: str = typer.Option("batch", "--class", help="batch, debug or interactive"),
        priority: int = typer.Option(0, help="orders jobs inside one project only"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Submit a job: `steward submit --project P --gpus G --min-runtime S -- COMMAND...`."""
        if gpus < 1:
            fail(f"--gpus must be at least 1, got {gpus}", 2)
        if min_runtime < 0:
            fail(f"--min-runtime must be 0 or more seconds, got {min_runtime:g}", 2)
        variables = {"input": {"project": project, "gpus": gpus, "minRuntimeS": min_runtime,
                               "command": command, "resumable": resumable, "jobClass": job_class,
                               "priority": priority}}
        res = GraphQLClient(get_settings()).execute(SUBMIT, variables)["submitJob"]
        kind = res["__typename"]
        if kind == "Rejected":
            fail(f"submission rejected ({res['code']}): {res['reason']}", 2)
        if kind in ("InvalidInput", "NotAuthorised"):
            fail(f"submission refused: {res['message']}", 2)
        job = res["job"]
        emit(job, output, [[job["id"], job["project"], job["state"], job["gpus"]]],
             ["id", "project", "state", "gpus"])

    @job_app.command("show")
    def job_show(job_id: str = typer.Argument(...), output: OutputFormat = OutputOption) -> None:
        """A job's state and its events in order."""
        job = GraphQLClient(get_settings()).execute(JOB, {"id": job_id})["job"]
        if job is None:
            fail(f"no job '{job_id}' (or not visible to you); list yours with `steward jobs`", 1)
        if output is OutputFormat.json:
            emit(job, output)
            return
        emit({k: v for k, v in job.items() if k != "events"}, output)
        typer.echo("")
        emit(None, output, [[e["position"], e["type"], e["metadata"].get("actor", "")] for e in job["events"]],
             ["position", "event", "actor"])

    @app.command("jobs")
    def jobs_list(
        state: str = typer.Option(None, help="QUEUED, RUNNING, COMPLETED, ..."),
        project: str = typer.Option(None),
        limit: int = typer.Option(50),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Jobs, newest first."""
        rows = GraphQLClient(get_settings()).execute(
            JOBS, {"state": state, "project": project, "limit": limit})["jobs"]
        emit(rows, output, [[j["id"], j["project"], j["state"], j["gpus"], j["jobClass"]] for j in rows],
             ["id", "project", "state", "gpus", "class"])

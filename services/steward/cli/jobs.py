"""Researcher commands: submit, jobs, job show, why, cancel, queue (and session open|restore)."""

from __future__ import annotations

import math
from typing import Any

import typer

from steward.cli import readable
from steward.cli.client import GraphQLClient
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings
from steward.domain.identity import person

JOB_FIELDS = """id project state gpus minRuntimeS resumable jobClass priority command submittedAt attempt
assignments funded startedAt endedAt exitCode protectedUntil sessionCapAt sessionWarningsAt projectName
sessionAddress"""

PAYLOAD = """
    __typename
    ... on Rejected {{ code reason }}
    ... on InvalidInput {{ field message }}
    ... on NotAuthorised {{ message }}
    ... on {ok} {{ job {{ {fields} }} }}"""

OUTLOOK_FIELDS = """funded reason fundedByLane protectionS askedProtectionS project allocation inUseGpus entitledGpus
  message
  qualification { qualified reason quotaGpus inUseGpus aheadGpus }"""

SUBMIT = f"""mutation($input: SubmitJobInput!) {{ submitJob(input: $input) {{
{PAYLOAD.format(ok="JobAccepted", fields=JOB_FIELDS)} ... on JobAccepted {{ outlook {{ {OUTLOOK_FIELDS} }} }} }} }}"""

PREVIEW = f"""query($input: SubmitJobInput!) {{ submitOutlook(input: $input) {{ __typename
    ... on InvalidInput {{ field message }}
    ... on NotAuthorised {{ message }}
    ... on SubmitOutlook {{ {OUTLOOK_FIELDS} }} }} }}"""

CANCEL = f"""mutation($id: ID!, $reason: String!) {{ cancelJob(id: $id, reason: $reason) {{
{PAYLOAD.format(ok="JobCancelled", fields=JOB_FIELDS)} }} }}"""

OPEN_SESSION = f"""mutation($input: OpenSessionInput!) {{ openSession(input: $input) {{
{PAYLOAD.format(ok="SessionOpened", fields=JOB_FIELDS)}
    ... on SessionOpened {{ outlook {{ {OUTLOOK_FIELDS} }} }} }} }}"""

RESTORE_SESSION = f"""mutation($id: ID!) {{ restoreSession(id: $id) {{
{PAYLOAD.format(ok="SessionRestored", fields=JOB_FIELDS)} }} }}"""

JOB = f"""query($id: ID!) {{ job(id: $id) {{ {JOB_FIELDS} owner {{ subject name }}
  events {{ position streamId version type payload metadata recordedAt hash }}
  decisions {{ position type recordedAt actor evidence }} }} }}"""

JOBS = f"""query($first: Int!, $after: String, $filter: JobFilter) {{
  jobs(first: $first, after: $after, filter: $filter) {{
    edges {{ node {{ {JOB_FIELDS} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"""

WHY_FIELDS = ("jobId reason text source blockingGpus blockingScope blockingUntil position positionInProject "
              "positionInClusters evidence")
WHY = f"""query($id: ID!) {{ job(id: $id) {{ id state owner {{ subject name }} }}
  whyPending(job: $id) {{ {WHY_FIELDS} }} whyPreempted(job: $id) {{ {WHY_FIELDS} }} }}"""

QUEUE = f"""query($first: Int!, $project: String, $cluster: String) {{
  queue(first: $first, project: $project, cluster: $cluster) {{
  waiting waitingGpus entries {{ position mine positionInProject positionInClusters positionInCluster reason text
    blockingGpus job {{ {JOB_FIELDS} }} }} }} }}"""


def refusal(res: dict[str, Any]) -> str | None:
    kind = res["__typename"]
    if kind == "Rejected":
        return f"rejected ({res['code']}): {res['reason']}"
    if kind == "InvalidInput":
        return f"invalid input{' (' + res['field'] + ')' if res.get('field') else ''}: {res['message']}"
    if kind == "NotAuthorised":
        return f"not authorised: {res['message']}"
    return None


def echo_outlook(outlook: dict[str, Any] | None) -> None:
    """The submit preview under a table: one line per point (funded or unfunded and why; debug quota)."""
    if outlook:
        for line in outlook["message"].splitlines():
            typer.echo(line)


def qualification_line(q: dict[str, Any]) -> str:
    """A debug job's qualification as "why pending" carries it (evidence `debug_quota`), in one line."""
    verdict = "qualified" if q.get("qualified") else f"not qualified ({q.get('reason')})"
    return (f"debug quota: {verdict}: quota {q.get('quota_gpus')} GPUs, {q.get('in_use_gpus')} in use, "
            f"{q.get('ahead_gpus')} waiting ahead")


def project_cell(job: dict[str, Any]) -> str:
    """The job's project as people call it, with its id when the two differ: `Vision Lab (a1)`."""
    name = job.get("projectName") or job["project"]
    return name if name == job["project"] else f"{name} ({job['project']})"


def _job_row(job: dict[str, Any]) -> list[Any]:
    return [job["id"], project_cell(job), job["state"], job["gpus"], job["jobClass"]]


def fetch_jobs(client: GraphQLClient, limit: int, flt: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while len(out) < limit:
        page = client.execute(JOBS, {"first": min(500, limit - len(out)), "after": after, "filter": flt})["jobs"]
        out.extend(e["node"] for e in page["edges"])
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    return out


def names_of(values: list[str]) -> list[str]:
    """`--gpu-model A --gpu-model B,C` as ["A", "B", "C"] (each once, in the order given)."""
    out: list[str] = []
    for value in values:
        for name in value.split(","):
            if name.strip() and name.strip() not in out:
                out.append(name.strip())
    return out


# What a job or a session accepts (`submit`, `session open`): repeatable or a comma list; none: any
GpuModelOption: Any = typer.Option([], "--gpu-model",
                                   help="a GPU model it accepts (repeatable or a comma list; none: any)")
ClusterOption: Any = typer.Option([], "--cluster", help="a cluster it accepts (repeatable or a comma list; none: any)")


def accepts_input(gpu_model: list[str], cluster: list[str]) -> dict[str, list[str]]:
    """The `gpuModels` and `clusters` of a SubmitJobInput or OpenSessionInput, each only when it names some."""
    models, clusters = names_of(gpu_model), names_of(cluster)
    return ({"gpuModels": models} if models else {}) | ({"clusters": clusters} if clusters else {})


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
        gpu_model: list[str] = GpuModelOption,
        cluster: list[str] = ClusterOption,
        preview: bool = typer.Option(False, "--preview",
                                     help="only say what it would get now (funded or not, and why); record nothing"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Submit a job: `steward submit --project P --gpus G --min-runtime S -- COMMAND...`. The answer says
        whether it runs funded (protected for its min runtime) or unfunded, and why; for debug work whether
        it is inside its allocation's debug quota."""
        if gpus < 1:
            fail(f"--gpus must be at least 1, got {gpus}", 2)
        if not min_runtime >= 0 or math.isinf(min_runtime):  # nan fails the comparison
            fail(f"--min-runtime must be 0 or more seconds (a finite number), got {min_runtime:g}", 2)
        variables: dict[str, Any] = {"input": {
            "project": project, "gpus": gpus, "minRuntimeS": min_runtime, "command": command, "resumable": resumable,
            "jobClass": job_class, "priority": priority} | accepts_input(gpu_model, cluster)}
        client = GraphQLClient(get_settings())
        if preview:
            found = client.execute(PREVIEW, variables)["submitOutlook"]
            if (why := refusal(found)) is not None:
                fail(f"preview {why}", 2)
            found.pop("__typename", None)
            emit(found, output, [[line] for line in found["message"].splitlines()], ["outlook"])
            return
        res = client.execute(SUBMIT, variables)["submitJob"]
        if (why := refusal(res)) is not None:
            fail(f"submission {why}", 2)
        job = res["job"]
        emit({**job, "outlook": res.get("outlook")}, output, [[job["id"], job["project"], job["state"], job["gpus"]]],
             ["id", "project", "state", "gpus"])
        if output is not OutputFormat.json:
            echo_outlook(res.get("outlook"))

    @job_app.command("show")
    def job_show(job_id: str = typer.Argument(...), output: OutputFormat = OutputOption) -> None:
        """A job's state, its events in order and the evidence of its decisions."""
        job = GraphQLClient(get_settings()).execute(JOB, {"id": job_id})["job"]
        if job is None:
            fail(f"no job '{job_id}' (or not visible to you); list yours with `steward jobs`", 1)
        if output is OutputFormat.json:
            emit(job, output)
            return
        emit(readable.contract_times({k: v for k, v in job.items() if k not in ("events", "decisions")}), output)
        typer.echo("")
        emit(None, output, [[e["position"], e["type"],
                             person(e["metadata"].get("actor", ""), e["metadata"].get("actor_name"))]
                            for e in job["events"]], ["position", "event", "actor"])

    @app.command("jobs")
    def jobs_list(
        state: list[str] = typer.Option([], help="QUEUED, RUNNING, COMPLETED, ... (repeatable)"),
        project: str = typer.Option(None),
        job_class: str = typer.Option(None, "--class", help="batch, debug or interactive"),
        limit: int = typer.Option(50, help="at most this many, newest first"),
        mine: bool = typer.Option(False, "--mine", help="only the jobs you submitted"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Jobs you may see, newest first."""
        if limit < 1:
            fail(f"--limit must be at least 1, got {limit}", 2)
        flt = {"states": state or None, "project": project, "jobClass": job_class, "mine": mine}
        rows = fetch_jobs(GraphQLClient(get_settings()), limit, flt)
        emit(rows, output, [_job_row(j) for j in rows], ["id", "project", "state", "gpus", "class"])

    @app.command("why")
    def why(job_id: str = typer.Argument(...), output: OutputFormat = OutputOption) -> None:
        """Why a job waits (or why it was preempted), in words and with the evidence."""
        data = GraphQLClient(get_settings()).execute(WHY, {"id": job_id})
        if data["job"] is None:
            fail(f"no job '{job_id}' (or not visible to you); list yours with `steward jobs`", 1)
        pending, preempted = data["whyPending"], data["whyPreempted"]
        main = pending if pending["reason"] != "not_waiting" else preempted
        if output is OutputFormat.json:
            emit({"job": data["job"], "whyPending": pending, "whyPreempted": preempted}, output)
            return
        typer.echo(f"{job_id} ({data['job']['state']}): {main['text']}")
        if data["job"].get("owner"):
            typer.echo(f"submitted by: {person(data['job']['owner']['subject'], data['job']['owner']['name'])}")
        typer.echo(f"reason: {main['reason']} (from {main['source']})")
        quota = (main["evidence"] or {}).get("debug_quota")
        if isinstance(quota, dict):
            typer.echo(qualification_line(quota))
        if preempted["reason"] != "not_preempted" and main is not preempted:
            typer.echo(f"last preemption: {preempted['text']}")
        story = (preempted["evidence"] or {}).get("preemption")
        if isinstance(story, dict):
            for line in readable.preemption_lines(story):
                typer.echo(line)
        if main["evidence"]:
            emit(readable.readable_evidence(main["evidence"]), output)

    @app.command("cancel")
    def cancel(job_id: str = typer.Argument(...), reason: str = typer.Option("", help="recorded with it"),
               output: OutputFormat = OutputOption) -> None:
        """Cancel a job of one of your projects."""
        res = GraphQLClient(get_settings()).execute(CANCEL, {"id": job_id, "reason": reason})["cancelJob"]
        if (why := refusal(res)) is not None:
            fail(f"cancel {why}", 2)
        job = res["job"]
        emit(job, output, [_job_row(job)], ["id", "project", "state", "gpus", "class"])

    @app.command("queue")
    def queue(project: str = typer.Option(None),
              cluster: str = typer.Option(None, help="only the jobs that may run on this cluster, with their "
                                                     "position there (column `in cluster`)"),
              limit: int = typer.Option(100), output: OutputFormat = OutputOption) -> None:
        """The queue in scheduling order: your jobs in full, others' as positions only."""
        if not 1 <= limit <= 500:
            fail(f"--limit must be between 1 and 500, got {limit}", 2)
        q = GraphQLClient(get_settings()).execute(QUEUE, {"first": limit, "project": project,
                                                          "cluster": cluster})["queue"]
        rows = [[e["position"], e["positionInProject"] or "", e.get("positionInClusters") or "",
                 *([e.get("positionInCluster") or ""] if cluster else []),
                 e["job"]["id"] if e["job"] else "(another tenant)",
                 e["job"]["project"] if e["job"] else "", e["job"]["gpus"] if e["job"] else "", e["reason"] or ""]
                for e in q["entries"]]
        # "in clusters": the position among the jobs waiting for a cluster it accepts (ADR 0073); "in cluster":
        # among the jobs that may run on --cluster (GraphQL `queue(cluster:)`, as the UI's Queue screen shows it)
        emit(q, output, rows, ["position", "in project", "in clusters", *(["in cluster"] if cluster else []), "job",
                               "project", "gpus", "reason"])


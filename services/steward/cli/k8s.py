"""`steward k8s`: a Kubernetes cluster's namespaces and the projects their pods charge (issue 26, ADR 0054):
`steward k8s map NAMESPACE PROJECT --reason`, `steward k8s unmap NAMESPACE --reason` (admins, through the
ledger), `steward k8s mappings` (admins and auditors). `--executor` names the cluster: the id of the
Kubernetes executor that governs it (STEWARD_EXECUTOR_ID, as it is started)."""

from __future__ import annotations

import os

import typer

from steward.cli.client import GraphQLClient
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings

SHOW = """query($e: String!) { namespaceMappings(executor: $e) { namespace project position recordedAt setBy reason }
}"""

MAP = """
mutation($e: String!, $n: String!, $p: String!, $r: String!) {
  mapNamespace(executor: $e, namespace: $n, project: $p, reason: $r) {
    __typename
    ... on NamespaceMappingChanged { position namespace project }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


def _executor_default() -> str:
    return os.environ.get("STEWARD_EXECUTOR_ID", "") or "k8s"


ExecutorOption = typer.Option(None, "--executor",
                              help="the cluster: its Kubernetes executor's id (default: STEWARD_EXECUTOR_ID, else k8s)")


def _map(executor: str | None, namespace: str, project: str, reason: str, output: OutputFormat) -> None:
    res = GraphQLClient(get_settings()).execute(MAP, {"e": executor or _executor_default(), "n": namespace,
                                                      "p": project, "r": reason})["mapNamespace"]
    if res["__typename"] != "NamespaceMappingChanged":
        fail(f"namespace mapping refused: {res.get('reason') or res.get('message')}", 2)
    emit(res, output, [[res["namespace"], res["project"] or "(unmapped)", res["position"]]],
         ["namespace", "project", "position"])


def register(app: typer.Typer) -> None:
    k8s_app = typer.Typer(no_args_is_help=True, help="Kubernetes: which project each namespace charges (admins).")
    app.add_typer(k8s_app, name="k8s")

    @k8s_app.command("map")
    def map_namespace(
        namespace: str = typer.Argument(..., help="the Kubernetes namespace"),
        project: str = typer.Argument(..., help="the project (a leaf of the org tree) its pods charge"),
        reason: str = typer.Option(..., "--reason", help="why (recorded)"),
        executor: str | None = ExecutorOption,
        output: OutputFormat = OutputOption,
    ) -> None:
        """Map a namespace to a project: its pods charge that project only (a label naming another is refused)."""
        _map(executor, namespace, project, reason, output)

    @k8s_app.command("unmap")
    def unmap_namespace(
        namespace: str = typer.Argument(..., help="the Kubernetes namespace"),
        reason: str = typer.Option(..., "--reason", help="why (recorded)"),
        executor: str | None = ExecutorOption,
        output: OutputFormat = OutputOption,
    ) -> None:
        """Unmap a namespace: its pods charge the project their `steward.io/project` label names."""
        _map(executor, namespace, "", reason, output)

    @k8s_app.command("mappings")
    def mappings(executor: str | None = ExecutorOption, output: OutputFormat = OutputOption) -> None:
        """The namespace mappings in force: who set each, when and why."""
        rows = GraphQLClient(get_settings()).execute(SHOW, {"e": executor or _executor_default()})["namespaceMappings"]
        emit(rows, output, [[r["namespace"], r["project"], r["setBy"], r["reason"]] for r in rows],
             ["namespace", "project", "set by", "reason"])

"""The `steward` command: one composition root for every role's commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from steward.cli import jobs, stack
from steward.cli.client import GraphQLClient
from steward.cli.output import CliError, OutputFormat, OutputOption, emit, fail
from steward.cli.scenario_file import (
    ScenarioFileError,
    check_locally,
    cluster_commands,
    load_yaml,
    tree_commands,
)
from steward.config import get_settings
from steward.domain.state import AllocationNode, LedgerState

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Steward: fair-share governance for shared GPU clusters.")
tree_app = typer.Typer(no_args_is_help=True, help="The allocation tree (managers).")
cluster_app = typer.Typer(no_args_is_help=True, help="Nodes and topology (operators).")
app.add_typer(tree_app, name="tree")
app.add_typer(cluster_app, name="cluster")
stack.register(app)
jobs.register(app)

SET_ALLOCATIONS = """
mutation($parent: String!, $shares: [ShareInput!]!, $reason: String!) {
  setAllocations(parent: $parent, shares: $shares, reason: $reason) {
    __typename
    ... on AllocationsChanged { parent position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""

REGISTER_NODE = """
mutation($input: RegisterNodeInput!) {
  registerNode(input: $input) {
    __typename
    ... on NodeRegistered { id position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


def _refusal(result: dict[str, Any]) -> str | None:
    kind = result["__typename"]
    if kind in ("Rejected",):
        return f"{result['code']}: {result['reason']}"
    if kind in ("InvalidInput", "NotAuthorised"):
        return str(result["message"])
    return None


def _current_allocations(client: GraphQLClient) -> LedgerState:
    rows = client.execute("{ allocations { name parent share } }")["allocations"]
    return LedgerState(allocations={r["name"]: AllocationNode(r["name"], r["parent"], r["share"]) for r in rows})


@tree_app.command("apply")
def tree_apply(
    file: Path = typer.Argument(..., help="a scenario YAML with a 'tree:' section"),
    reason: str = typer.Option("applied from file", help="recorded with every allocation change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Record the allocations of a scenario's `tree:` section (validated before anything is sent)."""
    try:
        commands = tree_commands(load_yaml(file), f"{reason} ({file.name})")
    except ScenarioFileError as err:
        fail(str(err), 2)
    client = GraphQLClient(get_settings())
    try:
        check_locally(_current_allocations(client), commands)
    except ScenarioFileError as err:
        fail(f"{file}: {err}", 2)
    results = []
    for cmd in commands:
        shares = [{"child": c, "share": s} for c, s in cmd.shares.items()]
        res = client.execute(SET_ALLOCATIONS, {"parent": cmd.parent, "shares": shares,
                                               "reason": cmd.reason})["setAllocations"]
        if (why := _refusal(res)) is not None:
            fail(f"allocations under '{cmd.parent}' refused: {why}")
        results.append({"parent": cmd.parent, "shares": cmd.shares, "position": res["position"]})
    emit({"applied": results}, output,
         [[r["parent"], ", ".join(f"{c}={s:g}" for c, s in r["shares"].items()), r["position"]] for r in results],
         ["parent", "shares", "position"])


@tree_app.command("show")
def tree_show(output: OutputFormat = OutputOption) -> None:
    """The allocation tree with shares and entitlements."""
    rows = GraphQLClient(get_settings()).execute("{ allocations { name parent share entitlement } }")
    allocs = rows["allocations"]
    emit(allocs, output, [[a["name"], a["parent"], f"{a['share']:.3f}", f"{a['entitlement']:.4f}"]
                          for a in allocs], ["name", "parent", "share", "entitlement"])


@cluster_app.command("apply")
def cluster_apply(
    file: Path = typer.Argument(..., help="a scenario YAML with a 'cluster:' section"),
    executor: str = typer.Option("local", help="the executor that runs the nodes' jobs"),
    output: OutputFormat = OutputOption,
) -> None:
    """Register the nodes (with their topology path) of a scenario's `cluster:` section."""
    try:
        commands = cluster_commands(load_yaml(file), executor)
        check_locally(LedgerState(), commands)
    except ScenarioFileError as err:
        fail(str(err), 2)
    client = GraphQLClient(get_settings())
    done = []
    for cmd in commands:
        res = client.execute(REGISTER_NODE, {"input": {
            "id": cmd.node_id, "gpus": cmd.gpus, "gpuModel": cmd.gpu_model, "path": cmd.path,
            "executor": cmd.executor}})["registerNode"]
        if (why := _refusal(res)) is not None:
            fail(f"node '{cmd.node_id}' refused: {why}")
        done.append({"id": cmd.node_id, "gpus": cmd.gpus, "path": cmd.path})
    emit({"registered": done}, output, [[c.node_id, c.gpus, "/".join(c.path)] for c in commands],
         ["node", "gpus", "path"])


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def bench(ctx: typer.Context, name: str = typer.Argument(..., help="cycle, sim, ...")) -> None:
    """Run a benchmark (`steward bench NAME --help`); prints JSON."""
    import importlib

    try:
        module = importlib.import_module(f"steward.bench.{name}")
    except ModuleNotFoundError:
        fail(f"unknown benchmark '{name}'", 2)
    code = module.main(list(ctx.args))
    raise typer.Exit(code or 0)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sim(ctx: typer.Context) -> None:
    """Run the trace-driven simulator (`steward sim --help`)."""
    from steward.sim import main as sim_main  # type: ignore[attr-defined,unused-ignore]

    raise typer.Exit(sim_main(list(ctx.args)) or 0)


def main() -> None:
    try:
        app(standalone_mode=False)
    except CliError as err:
        sys.stderr.write(f"steward: {err.message}\n")
        sys.exit(err.code)
    except typer.Exit as done:
        sys.exit(done.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("steward: aborted\n")
        sys.exit(130)
    except Exception as err:  # a click usage error or a bug: one line, no traceback
        import click

        if isinstance(err, click.ClickException):
            err.show()
            sys.exit(err.exit_code)
        sys.stderr.write(f"steward: internal error: {err.__class__.__name__}: {err}\n")
        if "--debug" in sys.argv:
            raise
        sys.exit(1)


if __name__ == "__main__":
    main()

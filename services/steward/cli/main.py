"""The `steward` command: one composition root for every role's commands."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import typer

from steward.cli import audit, jobs, k8s, login, notify, operate, readable, sessions, stack, tokens
from steward.cli.client import GraphQLClient
from steward.cli.output import CliError, OutputFormat, OutputOption, emit, fail
from steward.cli.scenario_file import (
    ScenarioFileError,
    check_locally,
    cluster_file,
    load_yaml,
    prune_plan,
    tree_commands,
)
from steward.config import get_settings
from steward.domain import budget
from steward.domain.display_names import display_name_problem
from steward.domain.ids import id_problem, shown
from steward.domain.state import AllocationNode, LedgerState

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Steward: fair-share governance for shared GPU clusters.")
tree_app = typer.Typer(no_args_is_help=True, help="The allocation tree (managers).")
cluster_app = typer.Typer(no_args_is_help=True, help="Nodes and topology (operators).")
app.add_typer(tree_app, name="tree")
app.add_typer(cluster_app, name="cluster")
report_app = typer.Typer(no_args_is_help=True, help="Reports (managers, auditors).")
app.add_typer(report_app, name="report")
stack.register(app)
tokens.register(app)
operate.register(app)


jobs.register(app)
sessions.register(app)
audit.register(app)
login.register(app)
k8s.register(app)
notify.register(app)

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
    return jobs.refusal(result)


def _current_allocations(client: GraphQLClient) -> LedgerState:
    rows = client.execute("{ allocations { name displayName parent share } }")["allocations"]
    return LedgerState(allocations={r["name"]: AllocationNode(r["name"], r["parent"], r["share"], None,
                                                              r["displayName"] if r["displayName"] != r["name"]
                                                              else None) for r in rows})


@tree_app.command("apply")
def tree_apply(
    file: Path = typer.Argument(..., help="a scenario YAML with a 'tree:' section"),
    reason: str = typer.Option("applied from file", help="recorded with every allocation change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Record the allocations of a scenario's `tree:` section (validated before anything is sent)."""
    try:
        commands = tree_commands(load_yaml(file), f"{reason} ({file.name})", file.name)
    except ScenarioFileError as err:
        fail(str(err), 2)
    client = GraphQLClient(get_settings())
    try:
        check_locally(_current_allocations(client), commands)
    except ScenarioFileError as err:
        fail(f"{file}: {err}", 2)
    results = []
    for cmd in commands:
        shares = [{"child": c, "share": s} | ({"debugQuotaGpus": cmd.debug_quotas[c]} if c in cmd.debug_quotas else {})
                  | ({"displayName": cmd.display_names[c]} if c in cmd.display_names else {})
                  | ({"pin": cmd.pins[c]} if c in cmd.pins else {})
                  for c, s in cmd.shares.items()]
        res = client.execute(SET_ALLOCATIONS, {"parent": cmd.parent, "shares": shares,
                                               "reason": cmd.reason})["setAllocations"]
        if (why := _refusal(res)) is not None:
            fail(f"allocations under '{cmd.parent}' {why}")
        results.append({"parent": cmd.parent, "shares": cmd.shares, "debug_quotas": cmd.debug_quotas,
                        "position": res["position"]})
    emit({"applied": results}, output,
         [[r["parent"], ", ".join(f"{c}={s:g}" for c, s in r["shares"].items()),
           ", ".join(f"{c}={q}" for c, q in r["debug_quotas"].items()) or "-", r["position"]] for r in results],
         ["parent", "shares", "debug quotas", "position"])


TREE = """query($window: Float!) { allocations(windowS: $window) { name displayName parent depth share entitlement
  isProject
  entitledInWindow usageInWindow demandInWindow owed delivered deliveredOverOwed overDelivered
  windowStart windowEnd window burn runningGpus waitingJobs pin pinnedTo
  debugQuotaGpus { gpus setGpus isDefault setOn } } }"""

SET_DEBUG_QUOTA = """mutation($allocation: String!, $gpus: Int, $reason: String!) {
  setDebugQuota(allocation: $allocation, gpus: $gpus, reason: $reason) {
    __typename
    ... on DebugQuotaChanged { allocation gpus position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


def quota_text(q: dict[str, Any] | None) -> str:
    """An allocation's debug quota in one cell: the GPUs in force, and where they come from."""
    if not q:
        return "-"
    if q["isDefault"]:
        return f"{q['gpus']} (default)"
    if q["setGpus"] is not None:
        return f"{q['gpus']} (set)"
    return f"{q['gpus']} (from {q['setOn']})"


def pin_text(a: dict[str, Any]) -> str:
    """The cluster an allocation's jobs run on (ADR 0067): its own pin, or its ancestor's marked as inherited."""
    if a.get("pin"):
        return str(a["pin"])
    return f"{a['pinnedTo']} (inherited)" if a.get("pinnedTo") else "-"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def owed_ratio(x: float | None) -> str:
    """delivered ÷ owed as it is; above 1 marked as over-delivery (never capped)."""
    return "-" if x is None else f"{x:.2f}" + (" over" if x > 1.0 else "")


@tree_app.command("show")
def tree_show(window: float = typer.Option(7 * 24, "--window-hours", help="the usage window in hours"),
              output: OutputFormat = OutputOption) -> None:
    """The allocation tree you may see: shares, entitlements, owed vs delivered (GPU-hours, over the window
    it states) and burn."""
    if not 1 <= window <= 90 * 24:
        fail(f"--window-hours must be between 1 and 2160, got {window:g}", 2)
    allocs = GraphQLClient(get_settings()).execute(TREE, {"window": window * 3600})["allocations"]
    if output is not OutputFormat.json and allocs:
        sys.stdout.write(f"owed vs delivered over the {allocs[0]['window']} "
                         "(weighted GPU-hours; ratio above 1 = over-delivery; by cluster and model: tree split)\n")
    emit(allocs, output, [["  " * (a["depth"] - 1) + a["name"],
                           a["displayName"] if a["displayName"] != a["name"] else "-",
                           f"{a['share']:.3f}", f"{a['entitlement']:.4f}",
                           f"{a['owed'] / 3600:.1f}", f"{a['delivered'] / 3600:.1f}",
                           owed_ratio(a["deliveredOverOwed"]),
                           _ratio(a["burn"]), a["runningGpus"], a["waitingJobs"], quota_text(a.get("debugQuotaGpus")),
                           pin_text(a)]
                          for a in allocs],
         ["id", "display name", "share", "entitlement", "owed h", "delivered h", "ratio", "burn", "gpus", "waiting",
          "debug quota", "pinned to"])


SPLIT = """query($window: Float!) { allocations(windowS: $window) { name depth window
  split { cluster gpuModel owed delivered demand } } }"""


@tree_app.command("split")
def tree_split(allocation: str = typer.Argument(None, help="only this allocation (default: all you may see)"),
               window: float = typer.Option(7 * 24, "--window-hours", help="the usage window in hours"),
               output: OutputFormat = OutputOption) -> None:
    """Owed and delivered of each allocation by cluster and GPU model (weighted GPU-hours, ADR 0062): one row
    per allocation, cluster and model; the rows of an allocation sum to its figures in `tree show`."""
    if not 1 <= window <= 90 * 24:
        fail(f"--window-hours must be between 1 and 2160, got {window:g}", 2)
    allocs = GraphQLClient(get_settings()).execute(SPLIT, {"window": window * 3600})["allocations"]
    if allocation is not None and not any(a["name"] == allocation for a in allocs):
        fail(f"unknown allocation '{allocation}' (or not one you may see)", 2)
    rows = [{"allocation": a["name"], **p} for a in allocs if allocation in (None, a["name"]) for p in a["split"]]
    if output is not OutputFormat.json and allocs:
        sys.stdout.write(f"owed vs delivered by cluster and GPU model over the {allocs[0]['window']} "
                         "(weighted GPU-hours; ratio above 1 = over-delivery)\n")
    emit(rows, output, [[r["allocation"], r["cluster"] or "-", r["gpuModel"] or "-", f"{r['owed'] / 3600:.1f}",
                         f"{r['delivered'] / 3600:.1f}", owed_ratio(budget.ratio(r["delivered"], r["owed"]))]
                        for r in rows],
         ["allocation", "cluster", "gpu model", "owed h", "delivered h", "ratio"])


HISTORY = """query($under: String, $first: Int!) { allocationHistory(under: $under, first: $first) {
  position recordedAt actor reason parent allocation shareBefore shareAfter debugQuotaBefore debugQuotaAfter
  debugQuotaSet displayNameBefore displayNameAfter displayNameSet pinBefore pinAfter pinSet } }"""


@tree_app.command("history")
def tree_history(allocation: str = typer.Argument(None, help="only this allocation's subtree (default: all "
                                                  "you may see)"),
                 limit: int = typer.Option(100, "--limit", help="at most this many changes, newest first"),
                 json_flag: bool = typer.Option(False, "--json", help="print JSON"),
                 output: OutputFormat = OutputOption) -> None:
    """Who changed which share, debug quota, display name and pin, when (your local time), why, before -> after:
    newest first, your subtree only."""
    if not 1 <= limit <= 500:
        fail(f"--limit must be between 1 and 500, got {limit}", 2)
    rows = GraphQLClient(get_settings()).execute(HISTORY, {"under": allocation, "first": limit})["allocationHistory"]
    if not rows and not json_flag and output is not OutputFormat.json:
        where = f"under '{allocation}' " if allocation else ""
        typer.echo(f"no allocation changes {where}that you may see")
        return
    emit(rows, OutputFormat.json if json_flag else output, readable.history_rows(rows), readable.HISTORY_HEADERS)


BUDGET = """query($period: Float!, $periods: Int!, $position: BigInt, $at: Float) {
  budgetReport(periodS: $period, periods: $periods, position: $position, at: $at) {
  position asOf pinned head periodS csv periods { periodId label start end current recorded deliveredOfOwed
    allocations { name isProject owed delivered ratio overDelivered demand entitled } } } }"""


@report_app.command("budget")
def report_budget(period_hours: float = typer.Option(24, "--period-hours", help="the length of a period in hours"),
                  periods: int = typer.Option(7, "--periods", help="how many periods, the current one included"),
                  as_csv: bool = typer.Option(False, "--csv", help="print the report as CSV (GPU-hours)"),
                  position: int | None = typer.Option(None, "--position", help="as of this log position (time "
                                                      "travel: the log up to it, to the time it was recorded)"),
                  at: str | None = typer.Option(None, "--at", help="as of this time (epoch seconds or ISO 8601, "
                                                "UTC when no zone): the events recorded by then"),
                  output: OutputFormat = OutputOption) -> None:
    """Owed vs delivered per allocation and period (the same figures as the UI's budget report); with
    --position or --at, as of that moment of the log (the same answer whenever asked)."""
    if not 1 <= period_hours <= 90 * 24:
        fail(f"--period-hours must be between 1 and 2160, got {period_hours:g}", 2)
    if not 1 <= periods <= 90:
        fail(f"--periods must be between 1 and 90, got {periods}", 2)
    if position is not None and at is not None:
        fail("give --position or --at, not both", 2)
    if position is not None and position < 1:
        fail(f"--position must be 1 or more, got {position}", 2)
    rep = GraphQLClient(get_settings()).execute(BUDGET, {"period": period_hours * 3600, "periods": periods,
                                                         "position": position,
                                                         "at": None if at is None else audit.parse_time(at)})
    report = rep["budgetReport"]
    if as_csv:
        sys.stdout.write(report["csv"])
        return
    emit(report, output, [[p["label"] + (" (now)" if p["current"] else ""), a["name"], f"{a['owed'] / 3600:.1f}",
                           f"{a['delivered'] / 3600:.1f}", owed_ratio(a["ratio"])]
                          for p in report["periods"] for a in p["allocations"]],
         ["period", "allocation", "owed h", "delivered h", "ratio"])


@tree_app.command("quota")
def tree_quota(
    allocation: str = typer.Argument(..., help="the allocation (a child of a node you manage)"),
    gpus: str = typer.Argument(..., help="GPUs that may run debug work ahead of the fair-share order, or 'default'"),
    reason: str = typer.Option(..., "--reason", help="recorded with the change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Set an allocation's debug quota: `steward tree quota a1 4 --reason "..."` (`default`: back to the
    default that follows the share)."""
    value: int | None
    if gpus == "default":
        value = None
    else:
        try:
            value = int(gpus)
        except ValueError:
            fail(f"'{gpus}' is not a whole number of GPUs (or 'default')", 2)
        if value < 0:
            fail(f"a debug quota is 0 or more GPUs, got {value}", 2)
    res = GraphQLClient(get_settings()).execute(SET_DEBUG_QUOTA, {"allocation": allocation, "gpus": value,
                                                                  "reason": reason})["setDebugQuota"]
    if (why := _refusal(res)) is not None:
        fail(f"debug quota of '{allocation}' {why}", 2)
    emit(res, output, [[allocation, "default" if value is None else value, res["position"]]],
         ["allocation", "debug quota", "position"])


SET_DISPLAY_NAME = """mutation($allocation: String!, $name: String, $reason: String!) {
  setDisplayName(allocation: $allocation, name: $name, reason: $reason) {
    __typename
    ... on DisplayNameChanged { allocation displayName position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


@tree_app.command("name")
def tree_name(
    allocation: str = typer.Argument(..., help="the node (a child of a node you manage), by its id"),
    name: str = typer.Argument(None, help="what people call it (1 to 64 characters; quote spaces)"),
    clear: bool = typer.Option(False, "--clear", help="show it by its id again"),
    reason: str = typer.Option(..., "--reason", help="recorded with the change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Set a node's display name: `steward tree name a1 "Vision Lab" --reason "..."` (`--clear`: its id again).
    Its id does not change: commands, filters and search still take it."""
    if (name is None) == (not clear):
        fail("give a name, or --clear to show the id again (not both)", 2)
    if name is not None and (problem := display_name_problem(name)) is not None:
        fail(f"display name {shown(name)} {problem}", 2)
    res = GraphQLClient(get_settings()).execute(SET_DISPLAY_NAME, {"allocation": allocation, "name": name,
                                                                   "reason": reason})["setDisplayName"]
    if (why := _refusal(res)) is not None:
        fail(f"display name of '{allocation}' {why}", 2)
    emit(res, output, [[allocation, res["displayName"], res["position"]]], ["allocation", "display name", "position"])


SET_PIN = """mutation($allocation: String!, $cluster: String, $reason: String!) {
  setPin(allocation: $allocation, cluster: $cluster, reason: $reason) {
    __typename
    ... on PinChanged { allocation pin position }
    ... on Rejected { code reason }
    ... on InvalidInput { field message }
    ... on NotAuthorised { message }
  }
}"""


@tree_app.command("pin")
def tree_pin(
    allocation: str = typer.Argument(..., help="the node (a child of a node you manage), by its id"),
    cluster: str = typer.Argument(None, help="the cluster its jobs run on (a registered cluster's name)"),
    clear: bool = typer.Option(False, "--clear", help="unpin it: its jobs may run on any cluster again"),
    reason: str = typer.Option(..., "--reason", help="recorded with the change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Pin a node to a cluster (a lab's own hardware; ADR 0067): `steward tree pin vision ceres --reason "..."`
    (`--clear`: unpin). Its subtree's jobs run only there, a job asking for another cluster is refused, and it is
    owed at most what that cluster could deliver."""
    if (cluster is None) == (not clear):
        fail("give a cluster, or --clear to unpin (not both)", 2)
    if cluster is not None and (problem := id_problem(cluster)) is not None:
        fail(f"cluster name {shown(cluster)} {problem}", 2)
    res = GraphQLClient(get_settings()).execute(SET_PIN, {"allocation": allocation, "cluster": cluster,
                                                          "reason": reason})["setPin"]
    if (why := _refusal(res)) is not None:
        fail(f"pin of '{allocation}' {why}", 2)
    emit(res, output, [[allocation, res["pin"] or "(any cluster)", res["position"]]],
         ["allocation", "pinned to", "position"])


@app.command("allocate")
def allocate(
    parent: str = typer.Argument(..., help="the node whose children get shares"),
    shares: list[str] = typer.Argument(..., help="CHILD=SHARE pairs (a share is a fraction of the parent)"),
    reason: str = typer.Option(..., "--reason", help="recorded with the change"),
    output: OutputFormat = OutputOption,
) -> None:
    """Set the shares of a node's children: `steward allocate team-a p1=0.6 p2=0.4 --reason "..."`."""
    parsed = []
    for pair in shares:
        child, sep, value = pair.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = -1.0
        if not sep or not child or not 0.0 <= share <= 1.0:
            fail(f"'{pair}' is not CHILD=SHARE with a share between 0 and 1", 2)
        parsed.append({"child": child, "share": share})
    res = GraphQLClient(get_settings()).execute(SET_ALLOCATIONS, {"parent": parent, "shares": parsed,
                                                                  "reason": reason})["setAllocations"]
    if (why := _refusal(res)) is not None:
        fail(f"allocations under '{parent}' {why}", 2)
    emit(res, output, [[parent, ", ".join(f"{p['child']}={p['share']:g}" for p in parsed), res["position"]]],
         ["parent", "shares", "position"])


@app.command("whoami")
def whoami(output: OutputFormat = OutputOption) -> None:
    """Who the API takes you for: name, subject, role, scopes."""
    me = GraphQLClient(get_settings()).execute("{ me { subject name role scopes tokenId via capabilities } }")["me"]
    emit(me, output)


@cluster_app.command("apply")
def cluster_apply(
    file: Path = typer.Argument(..., help="a scenario YAML with a 'cluster:' (or 'clusters:') section"),
    executor: str = typer.Option("local", help="the executor that runs the nodes' jobs (of a cluster whose "
                                               "section names no 'executor:')"),
    prune: bool = typer.Option(False, "--prune", help="also retire the nodes of the file's clusters (and their "
                                                      "executors) that the file no longer lists (ADR 0078)"),
    yes: bool = typer.Option(False, "--yes", help="with --prune: retire without asking"),
    output: OutputFormat = OutputOption,
) -> None:
    """Register the nodes (with their topology path) of a scenario's `cluster:` section, or of each named
    cluster of its `clusters:` section, and set the weights of its `gpu_models:` section (ADR 0057). With
    `--prune`, say which registered nodes of those clusters the file no longer lists, then retire them."""
    try:
        data = load_yaml(file)
        commands, weights = cluster_file(data, executor, file.name)
        check_locally(LedgerState(), commands)
    except ScenarioFileError as err:
        fail(str(err), 2)
    client = GraphQLClient(get_settings())
    stale: list[dict[str, Any]] = []
    if prune:
        stale = prune_plan(commands, client.execute(operate.NODES)["nodes"])
        for node in stale:
            typer.echo(f"will retire {node['id']} (cluster {node['cluster']}, executor {node['executor']}, "
                       f"{node['gpus']} GPUs, {node['state']}): not in {file.name}", err=True)
        if stale and not yes and not typer.confirm(f"retire {len(stale)} node(s)?", err=True):
            fail("nothing applied: the retirement was not confirmed (--yes retires without asking)", 1)
    done = []
    for cmd in commands:
        node = {"id": cmd.node_id, "gpus": cmd.gpus, "gpuModel": cmd.gpu_model, "path": cmd.path,
                "executor": cmd.executor}
        if cmd.cluster:
            node["cluster"] = cmd.cluster
        res = client.execute(REGISTER_NODE, {"input": node})["registerNode"]
        if (why := _refusal(res)) is not None:
            fail(f"node '{cmd.node_id}' {why}")
        done.append({"id": cmd.node_id, "gpus": cmd.gpus, "path": cmd.path})
    if weights:
        asked = {"weights": [{"model": m, "weight": w} for m, w in weights.items()],
                 "reason": f"steward cluster apply {file.name}"}
        res = client.execute(operate.SET_WEIGHTS, asked)["setGpuModelWeights"]
        if (why := _refusal(res)) is not None:
            fail(f"GPU model weights {why}")
    retired, kept = [], []
    for node in stale:  # after the registrations: the capacity never dips below what the file lists
        res = client.execute(operate.RETIRE, {"id": node["id"], "reason": f"steward cluster apply --prune "
                                              f"{file.name}: not in the file", "whenEmpty": False})["retireNode"]
        if (why := _refusal(res)) is not None:
            kept.append({"id": node["id"], "why": why})
        else:
            retired.append(node["id"])
    if not prune:
        emit({"registered": done}, output, [[c.node_id, c.gpus, "/".join(c.path)] for c in commands],
             ["node", "gpus", "path"])
        return
    rows = [[c.node_id, c.gpus, "/".join(c.path), "registered"] for c in commands]
    rows += [[n, "", "", "retired"] for n in retired] + [[k["id"], "", "", f"kept: {k['why']}"] for k in kept]
    emit({"registered": done, "retired": retired, "kept": kept}, output, rows, ["node", "gpus", "path", "done"])
    if kept:
        fail(f"{len(kept)} node(s) not retired: " + "; ".join(f"{k['id']} {k['why']}" for k in kept))


# `bench` and `sim` parse their own options (argparse): Typer passes every argument through, `--help`
# included, so `steward sim --help` and `steward bench NAME --help` print the real options
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def benchmarks() -> list[str]:
    """The benchmarks `steward bench` runs: the modules of steward.bench with a `main` (found by name, not
    imported: the benchmarks sit above the CLI, ADR 0040)."""
    spec = importlib.util.find_spec("steward.bench")
    folder = Path(next(iter(spec.submodule_search_locations or []))) if spec is not None else None
    if folder is None:
        return []
    return sorted(f.stem for f in folder.glob("*.py") if "\ndef main(" in f.read_text())


@app.command(context_settings=PASS_THROUGH)
def bench(ctx: typer.Context, name: str = typer.Argument("", help="the benchmark (steward bench --help lists them)",
                                                          show_default=False)) -> None:
    """Run a benchmark (`steward bench NAME --help` shows its options); prints JSON."""
    if name in ("", "-h", "--help") or (not name and {"-h", "--help"} & set(ctx.args)):
        if not name and not {"-h", "--help"} & set(ctx.args):
            fail("name a benchmark: " + ", ".join(benchmarks()), 2)
        typer.echo("usage: steward bench NAME [OPTIONS]   (steward bench NAME --help: its options)\n\n"
                   "benchmarks: " + ", ".join(benchmarks()))
        raise typer.Exit(0)
    if name not in benchmarks():
        fail(f"unknown benchmark '{name}' (one of: {', '.join(benchmarks())})", 2)
    # lazy: each benchmark imports only what it runs (the stack, the simulator...), found by name
    module = importlib.import_module(f"steward.bench.{name}")
    code = module.main(list(ctx.args))
    raise typer.Exit(code or 0)


@app.command(context_settings=PASS_THROUGH)
def sim(ctx: typer.Context) -> None:
    """Run the trace-driven simulator (`steward sim --help` shows its options)."""
    # lazy: start-up: the simulator (policy core, scenario loader) only for `steward sim`
    from steward.sim import main as sim_main  # type: ignore[attr-defined,unused-ignore]

    raise typer.Exit(sim_main(list(ctx.args)) or 0)


def main() -> None:
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
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

        # typer >= 0.25 raises the errors of its own copy of click (typer._click), not click's
        usage = isinstance(err, click.ClickException) or (isinstance(err, typer.TyperException) and hasattr(
            err, "show") and isinstance(getattr(err, "exit_code", None), int))
        if usage:
            err.show()  # type: ignore[attr-defined]
            sys.exit(err.exit_code)  # type: ignore[attr-defined]
        sys.stderr.write(f"steward: internal error: {err.__class__.__name__}: {err}\n")
        if "--debug" in sys.argv:
            raise
        sys.exit(1)


if __name__ == "__main__":
    main()

"""Operator commands on the API: `node register|drain|resume|retire|list`, `policy set`, `gpu-models list|set`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from steward.cli.client import GraphQLClient
from steward.cli.jobs import refusal
from steward.cli.output import OutputFormat, OutputOption, emit, fail, read_text
from steward.config import get_settings
from steward.domain.clusters import require_node_gpus, weight_problem
from steward.domain.commands import RegisterNode
from steward.domain.errors import InvalidCommand

REGISTER = """mutation($input: RegisterNodeInput!) { registerNode(input: $input) {
  __typename ... on NodeRegistered { id position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

DRAIN = """mutation($id: String!, $reason: String!) { drainNode(id: $id, reason: $reason) {
  __typename ... on NodeDraining { id position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

SET_POLICY = """mutation($input: PolicyInput!) { setPolicy(input: $input) {
  __typename ... on PolicySet { position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

RESUME = """mutation($id: String!, $reason: String!) { resumeNode(id: $id, reason: $reason) {
  __typename ... on NodeResumed { id position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

RETIRE = """mutation($id: String!, $reason: String!, $whenEmpty: Boolean!) {
  retireNode(id: $id, reason: $reason, whenEmpty: $whenEmpty) {
  __typename ... on NodeRetired { id position pending jobs } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

NODES = "{ nodes { id gpus gpuModel cluster path executor state usedGpus foreignGpus freeGpus jobs otherJobs } }"

SET_WEIGHTS = """mutation($weights: [GpuModelWeightInput!]!, $reason: String!) {
  setGpuModelWeights(weights: $weights, reason: $reason) {
  __typename ... on PolicySet { position } ... on Rejected { code reason }
  ... on InvalidInput { field message } ... on NotAuthorised { message } } }"""

GPU_MODELS = "{ gpuModels { model weight gpus nodes clusters } }"


def parse_weights(pairs: list[str]) -> dict[str, float]:
    """`MODEL=WEIGHT` arguments (e.g. `H100=1 A100=0.55`) as a mapping; a malformed one is named."""
    out: dict[str, float] = {}
    for pair in pairs:
        model, sep, value = pair.partition("=")
        if not sep or not model.strip():
            raise ValueError(f"expected MODEL=WEIGHT (e.g. A100=0.55), got {pair!r}")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"the weight of {model.strip()!r} is not a number: {value!r}") from None
        if model.strip() in out:
            raise ValueError(f"the GPU model {model.strip()!r} is named twice")
        if (problem := weight_problem(model.strip(), weight)) is not None:
            raise ValueError(problem)
        out[model.strip()] = weight
    return out


def register(app: typer.Typer) -> None:
    node_app = typer.Typer(no_args_is_help=True, help="Cluster nodes (operators).")
    policy_app = typer.Typer(no_args_is_help=True, help="The scheduling policy (operators).")
    app.add_typer(node_app, name="node")
    app.add_typer(policy_app, name="policy")
    gpu_app = typer.Typer(no_args_is_help=True, help="GPU models and their weights (operators; ADR 0057).")
    app.add_typer(gpu_app, name="gpu-models")

    @gpu_app.command("list")
    def gpu_models_list(output: OutputFormat = OutputOption) -> None:
        """The GPU models of the registered nodes, the weight each is charged at (budget units per GPU-hour),
        their GPUs, nodes and clusters."""
        found = GraphQLClient(get_settings()).execute(GPU_MODELS)["gpuModels"]
        emit(found, output, [[m["model"], f"{m['weight']:g}", m["gpus"], m["nodes"], ",".join(m["clusters"])]
                             for m in found], ["model", "weight", "gpus", "nodes", "clusters"])

    @gpu_app.command("set")
    def gpu_models_set(
        weights: list[str] = typer.Argument(..., help="MODEL=WEIGHT, e.g. H100=1 A100=0.55 V100=0.25"),
        reason: str = typer.Option(..., "--reason"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Set the weight of GPU models: budget units per GPU-hour; the models not named keep theirs."""
        try:
            parsed = parse_weights(weights)
        except ValueError as err:
            fail(str(err), 2)
        res = GraphQLClient(get_settings()).execute(SET_WEIGHTS, {
            "weights": [{"model": m, "weight": w} for m, w in parsed.items()], "reason": reason})["setGpuModelWeights"]
        if (why := refusal(res)) is not None:
            fail(f"GPU model weights {why}", 2)
        emit(res, output)

    @node_app.command("register")
    def node_register(
        node_id: str = typer.Argument(...),
        gpus: int = typer.Option(..., "--gpus"),
        path: str = typer.Option(..., "--path", help="topology path, outermost first: zone/spine/block"),
        gpu_model: str = typer.Option("generic", "--gpu-model"),
        executor: str = typer.Option("local", "--executor"),
        cluster: str = typer.Option("", "--cluster", help="the named cluster it joins (default: the default one)"),
        output: OutputFormat = OutputOption,
    ) -> None:
        """Register a node with its GPUs and topology path."""
        if gpus < 1:
            fail(f"--gpus must be at least 1, got {gpus}", 2)
        parts = [p for p in path.split("/") if p]
        if not parts:
            fail("--path needs at least one element, e.g. zone-a/block-1", 2)
        try:  # the ledger's bound (ADR 0082), said before a count beyond GraphQL's Int is sent
            require_node_gpus(RegisterNode(node_id, gpus, gpu_model, parts, executor, cluster))
        except InvalidCommand as err:
            fail(err.message, 2)
        res = GraphQLClient(get_settings()).execute(REGISTER, {"input": {
            "id": node_id, "gpus": gpus, "gpuModel": gpu_model, "path": parts, "executor": executor,
            "cluster": cluster}})["registerNode"]
        if (why := refusal(res)) is not None:
            fail(f"node '{node_id}' {why}", 2)
        emit(res, output, [[res["id"], gpus, "/".join(parts), res["position"]]], ["node", "gpus", "path", "position"])

    @node_app.command("drain")
    def node_drain(node_id: str = typer.Argument(...), reason: str = typer.Option(..., "--reason"),
                   output: OutputFormat = OutputOption) -> None:
        """Drain a node: it takes no new work."""
        res = GraphQLClient(get_settings()).execute(DRAIN, {"id": node_id, "reason": reason})["drainNode"]
        if (why := refusal(res)) is not None:
            fail(f"drain of '{node_id}' {why}", 2)
        emit(res, output)

    @node_app.command("resume")
    def node_resume(node_id: str = typer.Argument(...), reason: str = typer.Option(..., "--reason"),
                    output: OutputFormat = OutputOption) -> None:
        """Resume a draining node: it takes new work again."""
        res = GraphQLClient(get_settings()).execute(RESUME, {"id": node_id, "reason": reason})["resumeNode"]
        if (why := refusal(res)) is not None:
            fail(f"resume of '{node_id}' {why}", 2)
        emit(res, output)

    @node_app.command("retire")
    def node_retire(node_id: str = typer.Argument(...), reason: str = typer.Option(..., "--reason"),
                    when_empty: bool = typer.Option(False, "--when-empty", help=(
                        "if attempts still run there: take no new work and retire it when the last one ends")),
                    output: OutputFormat = OutputOption) -> None:
        """Retire a node for good: never placed on again, its GPUs out of the capacity; refused while an attempt
        runs there (drain it first), unless --when-empty. Registering it again brings it back (ADRs 0078, 0081)."""
        res = GraphQLClient(get_settings()).execute(
            RETIRE, {"id": node_id, "reason": reason, "whenEmpty": when_empty})["retireNode"]
        if (why := refusal(res)) is not None:
            fail(f"retirement of '{node_id}' {why}", 2)
        if res.get("pending") and output != OutputFormat.json:
            typer.echo(f"node {node_id} is retiring: it takes no new work and is retired when "
                       f"{', '.join(res.get('jobs') or [])} end")
            return
        emit(res, output)

    @node_app.command("list")
    def node_list(output: OutputFormat = OutputOption) -> None:
        """Nodes with topology and occupancy."""
        nodes = GraphQLClient(get_settings()).execute(NODES)["nodes"]
        rows = [[n["id"], n["cluster"], n["gpuModel"], "/".join(n["path"]), n["state"], n["gpus"], n["usedGpus"],
                 n["foreignGpus"], n["freeGpus"]] for n in nodes]
        emit(nodes, output, rows, ["node", "cluster", "model", "path", "state", "gpus", "used", "foreign", "free"])

    @policy_app.command("set")
    def policy_set(file: Path = typer.Argument(..., help="a JSON file of policy settings"),
                   reason: str = typer.Option(..., "--reason"), output: OutputFormat = OutputOption) -> None:
        """Set the scheduling policy from a JSON file."""
        try:
            settings = json.loads(read_text(file, "the policy file"))
        except json.JSONDecodeError as err:
            fail(f"{file} is not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}", 2)
        if not isinstance(settings, dict):
            fail(f"{file}: expected a JSON object of settings", 2)
        res = GraphQLClient(get_settings()).execute(SET_POLICY, {"input": {"settings": settings,
                                                                           "reason": reason}})["setPolicy"]
        if (why := refusal(res)) is not None:
            fail(f"policy {why}", 2)
        emit(res, output)

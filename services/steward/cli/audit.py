"""`steward audit ...`: verify the log, export it, prove inclusion and consistency, replay the policy,
rebuild the projections, and travel in time. These commands read the store directly
(settings.resolved_store_url), as an auditor does on the operator's machine; `verify` and `state` also
go through the API with `--api` (the auditor's token, no access to the store needed: the API's `verify`
and `stateAt`)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings

if TYPE_CHECKING:
    from steward.store.eventstore import EventStore

audit_app = typer.Typer(no_args_is_help=True,
                        help="The audit trail: verify, export, prove, replay, rebuild, time travel.")


def _store() -> EventStore:
    from steward.store.eventstore import EventStore

    try:
        return EventStore.from_url(get_settings().resolved_store_url)
    except Exception as err:  # a bad URL or a missing driver: one line
        fail(f"cannot open the store: {err}")


def _fmt(output: OutputFormat, json_flag: bool) -> OutputFormat:
    return OutputFormat.json if json_flag else output


def _guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run an audit operation; database and lookup errors become one line on stderr."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return fn(*args, **kwargs)
    except LookupError as err:
        fail(str(err.args[0] if err.args else err))
    except (SQLAlchemyError, ValueError, OSError) as err:
        fail(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")


def parse_time(value: str) -> float:
    """Epoch seconds, or an ISO 8601 time (UTC when it names no zone)."""
    try:
        return float(value)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        fail(f"--at '{value}' is neither epoch seconds nor an ISO 8601 time (e.g. 2025-01-31T12:00:00Z)", 2)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _key(public_key: Path | None) -> Any:
    if public_key is None:
        return None
    from steward.audit.verifier import load_public_key

    try:
        return load_public_key(public_key.read_text())
    except (OSError, ValueError) as err:
        fail(f"cannot read the public key {public_key}: {err}", 2)


@audit_app.command("verify")
def verify_cmd(
    start: int = typer.Option(1, "--from", help="first position to check"),
    to: int = typer.Option(None, "--to", help="last position to check (default: the head)"),
    public_key: Path = typer.Option(None, "--public-key", help="check checkpoints against this pinned key (PEM)"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    api: bool = typer.Option(False, "--api", help="ask the API (your token) instead of reading the store"),
    output: OutputFormat = OutputOption,
) -> None:
    """Recompute every hash and link; report ok, events, head, or the first bad position and what is wrong."""
    if api:
        if public_key is not None:
            fail("--public-key checks signed checkpoints in the store; without --api", 2)
        report = _verify_via_api(start, to)
    else:
        from steward.audit.verify import verify

        report = _guard(verify, _store(), start, to, _key(public_key))
    rows = [["ok", report["ok"]], ["events", report["events"]], ["head", report["head"]],
            ["checkpoints checked", report["checkpoints_checked"]]]
    if not report["ok"]:
        rows += [["first bad position", report["first_bad_position"]], ["problem", report["problem"]],
                 ["detail", report["detail"]]]
    emit(report, _fmt(output, json_flag), rows, ["check", "result"])
    if not report["ok"]:
        fail(f"the log does not verify: {report['problem']} at position {report['first_bad_position']}")


@audit_app.command("export")
def export_cmd(
    start: int = typer.Option(1, "--from", help="first position"),
    to: int = typer.Option(None, "--to", help="last position (default: the head)"),
    ndjson: bool = typer.Option(False, "--ndjson", help="one JSON object per line (header, events, checkpoints)"),
    json_flag: bool = typer.Option(False, "--json", help="one JSON document (the default)"),
    out: Path = typer.Option(None, "--out", help="write to this file instead of standard output"),
    output: OutputFormat = typer.Option(OutputFormat.json, "--output", "-o",
                                        help="json (an export is JSON; --ndjson for lines)"),
) -> None:
    """Export events and signed checkpoints for the standalone verifier (`python -m steward.audit.verifier`)."""
    from steward.audit.export import as_document, write_ndjson

    if ndjson and json_flag:
        fail("choose one of --json and --ndjson", 2)
    store = _store()
    target = out.open("w", encoding="utf-8") if out else sys.stdout
    try:
        if ndjson:
            _guard(write_ndjson, store, target, start, to)
        else:
            target.write(json.dumps(_guard(as_document, store, start, to), sort_keys=True) + "\n")
    finally:
        if out:
            target.close()


@audit_app.command("checkpoint")
def checkpoint_cmd(output: OutputFormat = OutputOption) -> None:
    """Sign a checkpoint (RFC 6962 Merkle root) over every event recorded so far."""
    from steward.audit.checkpoints import key_path, latest_checkpoint, load_or_create_key, make_checkpoint

    store = _store()
    key = _guard(load_or_create_key, key_path(get_settings().run_dir))
    cp = _guard(make_checkpoint, store, key) or _guard(latest_checkpoint, store)
    if cp is None:
        fail("the log is empty: nothing to checkpoint")
    data = {k: cp[k] for k in ("tree_size", "root", "head_hash", "created_at", "key_id", "signature")}
    emit(data, output)


@audit_app.command("key")
def key_cmd(output: OutputFormat = OutputOption) -> None:
    """Print the checkpoint signing key's public half (PEM), for auditors to pin."""
    from steward.audit.checkpoints import key_path, load_or_create_key

    key = _guard(load_or_create_key, key_path(get_settings().run_dir))
    if output is OutputFormat.json:
        emit({"key_id": key.key_id, "public_key_pem": key.public_pem()}, output)
    else:
        sys.stdout.write(key.public_pem())


@audit_app.command("prove")
def prove_cmd(
    position: int = typer.Option(None, "--position", help="inclusion proof for the event at this position"),
    tree_size: int = typer.Option(None, "--tree-size", help="against the checkpoint of this size"),
    first: int = typer.Option(None, "--first", help="consistency proof from the checkpoint of this size ..."),
    second: int = typer.Option(None, "--second", help="... to the checkpoint of this size"),
    output: OutputFormat = OutputOption,
) -> None:
    """An inclusion proof (--position) or a consistency proof (--first M --second N), as JSON."""
    from steward.audit.checkpoints import consistency_proof, inclusion_proof

    store = _store()
    if position is not None:
        proof = _guard(inclusion_proof, store, position, tree_size)
    elif first is not None and second is not None:
        proof = _guard(consistency_proof, store, first, second)
    else:
        fail("give --position N, or --first M --second N", 2)
    emit(proof, OutputFormat.json if output is OutputFormat.table else output)


@audit_app.command("check-proof")
def check_proof_cmd(
    proof: Path = typer.Argument(..., help="a proof written by `steward audit prove`"),
    public_key: Path = typer.Option(None, "--public-key", help="the pinned checkpoint key (PEM)"),
    output: OutputFormat = OutputOption,
) -> None:
    """Check an inclusion or consistency proof (no database needed)."""
    from steward.audit.verifier import verify_proof

    try:
        data = json.loads(proof.read_text())
    except (OSError, ValueError) as err:
        fail(f"cannot read the proof {proof}: {err}", 2)
    ok, why = verify_proof(data, _key(public_key))
    emit({"ok": ok, "detail": why}, output)
    if not ok:
        fail(f"the proof does not verify: {why}")


@audit_app.command("replay")
def replay_cmd(output: OutputFormat = OutputOption,
               json_flag: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Re-run the policy over the log; confirm every recorded decision is reproduced."""
    from steward.audit.replay import replay

    report = _guard(replay, _store())
    emit(report, _fmt(output, json_flag), [[k, report[k]] for k in
                                           ("ok", "events", "decisions", "reproduced", "different", "unreplayable")],
         ["check", "result"])
    if not report["ok"]:
        fail(f"replay differs: {report['different']} decision(s) not reproduced, "
             f"{report['unreplayable']} not replayable")


@audit_app.command("rebuild")
def rebuild_cmd(
    replace: bool = typer.Option(False, "--replace", help="when they differ, replace the live rows by the rebuilt"),
    full: bool = typer.Option(False, "--full", help="fold from the first event (and record the snapshot it "
                              "proves), instead of from the newest snapshot a full rebuild checked"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    output: OutputFormat = OutputOption,
) -> None:
    """Rebuild the projections from the log and compare per-table checksums with the live ones."""
    from steward.audit.rebuild import rebuild

    report = _guard(rebuild, _store(), replace, full)
    emit(report, _fmt(output, json_flag),
         [[n, t["rows"], t["live_rows"], t["checksum"][:16], "equal" if t["equal"] else "DIFFERENT"]
          for n, t in report["tables"].items()], ["table", "rows", "live rows", "checksum", "result"])
    if not report["ok"]:
        differ = ", ".join(n for n, t in report["tables"].items() if not t["equal"])
        fail(f"the live projections differ from the log: {differ}"
             + (" (replaced by the rebuilt rows)" if report["replaced"] else ""))


@audit_app.command("snapshot")
def snapshot_cmd(every: int = typer.Option(1_000, help="one snapshot (a delta of the changed jobs) every this many "
                                           "events"),
                 base_every: int = typer.Option(100_000, "--base-every", help="a base (the whole state) at the "
                                                "first snapshot this many events after the last base"),
                 output: OutputFormat = OutputOption) -> None:
    """Save projection snapshots up to the head (they make rebuilds and time travel fast)."""
    from steward.audit.snapshots import take_snapshots

    if every < 1 or base_every < 1:
        fail("--every and --base-every must be at least 1", 2)
    emit({"saved": _guard(take_snapshots, _store(), every, None, base_every)}, output)


@audit_app.command("state")
def state_cmd(
    at: str = typer.Option(..., "--at", help="a time: epoch seconds or ISO 8601"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    api: bool = typer.Option(False, "--api", help="ask the API (your token) instead of reading the store"),
    output: OutputFormat = OutputOption,
) -> None:
    """The projections (allocations, nodes, jobs) as they were at a past time."""
    if api:
        _state_via_api(parse_time(at), _fmt(output, json_flag))
        return
    from steward.audit.snapshots import state_at

    proj, info = _guard(state_at, _store(), parse_time(at))
    fmt = _fmt(output, json_flag)
    if fmt is OutputFormat.json:  # every row, as documented (builds every job)
        rows = proj.rows()
        emit({**info, "allocations": rows["proj_allocations"], "nodes": rows["proj_nodes"],
              "jobs": rows["proj_jobs"]}, fmt)
        return
    counts = proj.job_counts()  # the table needs the counts only: no job is built
    emit(info, fmt,
         [["position", info["position"]], ["allocations", len(proj.allocations)], ["nodes", len(proj.nodes)],
          ["jobs", sum(counts.values())], *[[f"jobs {s}", n] for s, n in counts.items()]], ["what", "value"])


VERIFY = """query($from: BigInt!, $to: BigInt) { verify(fromPosition: $from, toPosition: $to) {
  fromPosition toPosition checked ok firstBadPosition problem } }"""

STATE_AT = """query($t: Float!) { stateAt(time: $t, jobsFirst: 500) { position recordedAt
  allocations { name parent share } nodes { id gpus gpuModel path state } jobCounts { state count }
  jobs { id project state gpus attempt } jobsTruncated } }"""


def _verify_via_api(start: int, to: int | None) -> dict[str, Any]:
    """The API's `verify` (the same verifier, run by the API on the store), in this command's report shape."""
    from steward.cli.client import GraphQLClient

    v = GraphQLClient(get_settings()).execute(VERIFY, {"from": start, "to": to})["verify"]
    return {"ok": v["ok"], "events": v["checked"], "head": v["toPosition"], "checkpoints_checked": None,
            "first_bad_position": v["firstBadPosition"], "problem": v["problem"], "detail": "", "via": "api"}


def _state_via_api(at: float, output: OutputFormat) -> None:
    from steward.cli.client import GraphQLClient

    st = GraphQLClient(get_settings()).execute(STATE_AT, {"t": at})["stateAt"]
    emit(st, output, [["position", st["position"]], ["allocations", len(st["allocations"])],
                      ["nodes", len(st["nodes"])], *[[f"jobs {c['state']}", c["count"]] for c in st["jobCounts"]]],
         ["what", "value"])


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")

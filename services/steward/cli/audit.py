"""`steward audit ...`: verify the log, export it, prove inclusion and consistency, replay the policy,
rebuild the projections, and travel in time. These commands read the store directly
(settings.resolved_store_url), as an auditor does on the operator's machine; `verify` and `state` also
go through the API with `--api` (the auditor's token, no access to the store needed: the API's `verify`
and `stateAt`)."""

from __future__ import annotations

import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from steward.audit.checkpoints import (
    consistency_proof,
    inclusion_proof,
    key_path,
    latest_checkpoint,
    load_or_create_key,
    make_checkpoint,
)
from steward.audit.export import as_document, write_ndjson
from steward.audit.rebuild import rebuild
from steward.audit.replay import records_from_export, replay, replay_records
from steward.audit.snapshots import state_at, state_at_position, take_snapshots
from steward.audit.verify import range_problem, verify
from steward.cli.output import OutputFormat, OutputOption, emit, fail
from steward.config import get_settings
from steward.store.eventstore import EventStore
from steward.store.verifier import load_public_key, verify_proof

if TYPE_CHECKING:
    from steward.store.eventstore import EventStore

audit_app = typer.Typer(no_args_is_help=True,
                        help="The audit trail: verify, export, prove, replay, rebuild, time travel.")


def _store() -> EventStore:
    # lazy: start-up: alembic (the migrations' check) loads only for the audit commands that open a store
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from steward.store.migrate import store_problem

    url = get_settings().resolved_store_url
    try:
        problem = store_problem(url)
        store = EventStore.from_url(url)
    except ArgumentError:  # not echoed: a URL may hold a password
        fail("the store URL (STEWARD_STORE_URL) is not a database URL: sqlite:///PATH or "
             "postgresql://USER@HOST:PORT/DB", 2)
    except SQLAlchemyError as err:  # a server that cannot be reached
        fail(f"cannot open the store: {type(err).__name__}: {str(err).splitlines()[0]}")
    except Exception as err:  # a bad URL or a missing driver: one line
        fail(f"cannot open the store: {err}")
    if problem is not None:
        fail(problem, 2)
    return store


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
        seconds = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            fail(f"--at '{value}' is not a time (epoch seconds are a finite number)", 2)
        return seconds
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

    try:
        return load_public_key(public_key.read_text())
    except (OSError, ValueError) as err:
        fail(f"cannot read the public key {public_key}: {err}", 2)


@audit_app.command("verify")
def verify_cmd(
    start: int = typer.Option(1, "--from", help="first position to check"),
    to: int = typer.Option(None, "--to", help="last position to check (default: the head)"),
    public_key: Path = typer.Option(None, "--public-key", help="check checkpoints against this pinned key (PEM)"),
    independent: bool = typer.Option(False, "--independent", help="recompute every hash on this machine, not in "
                                     "PostgreSQL"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    api: bool = typer.Option(False, "--api", help="ask the API (your token) instead of reading the store"),
    output: OutputFormat = OutputOption,
) -> None:
    """Recompute every hash and link; report ok, events, head, or the first bad position and what is wrong."""
    if (problem := range_problem(start, to)) is not None:
        fail(problem, 2)
    if api:
        if public_key is not None or independent:
            fail(f"{'--public-key' if public_key is not None else '--independent'} reads the store; "
                 "without --api", 2)
        report = _verify_via_api(start, to)
    else:
        store = _store()
        if (problem := range_problem(start, to, _guard(store.head))) is not None:
            fail(problem, 2)
        report = _guard(verify, store, start, to, _key(public_key), independent=independent)
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
    """Export events and signed checkpoints for the standalone verifier (`python -m steward.store.verifier`)."""
    if ndjson and json_flag:
        fail("choose one of --json and --ndjson", 2)
    if (problem := range_problem(start, to)) is not None:
        fail(problem, 2)
    store = _store()
    if (problem := range_problem(start, to, _guard(store.head))) is not None:
        fail(problem, 2)
    try:
        target = out.open("w", encoding="utf-8") if out else sys.stdout
    except OSError as err:
        fail(f"--out {out}: cannot write ({err.strerror or err})", 2)
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
    second: int = typer.Option(None, "--second", help="... to the checkpoint of this size (default: the newest)"),
    output: OutputFormat = OutputOption,
) -> None:
    """An inclusion proof (--position) or a consistency proof (--first M [--second N]), as JSON."""
    store = _store()
    if position is not None:
        proof = _guard(inclusion_proof, store, position, tree_size)
    elif first is not None:
        if second is None:
            newest = _guard(latest_checkpoint, store)
            if newest is None:
                fail("no checkpoint is signed yet; run `steward audit checkpoint`")
            second = int(newest["tree_size"])
        if second < first:
            fail(f"--second {second} is smaller than --first {first}: a consistency proof goes from the older tree "
                 "to the newer", 2)
        proof = _guard(consistency_proof, store, first, second)
    else:
        fail("give --position N, or --first M [--second N]", 2)
    emit(proof, OutputFormat.json if output is OutputFormat.table else output)


@audit_app.command("check-proof")
def check_proof_cmd(
    proof: Path = typer.Argument(..., help="a proof written by `steward audit prove`"),
    public_key: Path = typer.Option(None, "--public-key", help="the pinned checkpoint key (PEM)"),
    output: OutputFormat = OutputOption,
) -> None:
    """Check an inclusion or consistency proof (no database needed)."""
    try:
        data = json.loads(proof.read_text())
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: JSON nested too deeply
        fail(f"cannot read the proof {proof}: {err}", 2)
    ok, why = verify_proof(data, _key(public_key))
    emit({"ok": ok, "detail": why}, output)
    if not ok:
        fail(f"the proof does not verify: {why}")


@audit_app.command("replay")
def replay_cmd(output: OutputFormat = OutputOption,
               json_flag: bool = typer.Option(False, "--json", help="print JSON"),
               export: Path = typer.Option(None, "--export", help="replay this export (`steward audit export`, "
                                           "from position 1; .gz allowed) instead of the store"),
               limit: int = typer.Option(20, "--limit", help="differences and unreplayable decisions listed "
                                         "(all are counted)")) -> None:
    """Re-run the policy over the log; confirm every recorded decision is reproduced, and list each one that
    is not (position, command, the first field that differs) or cannot be replayed (and why)."""
    if limit < 0:
        fail("--limit must be at least 0", 2)
    if export is not None:
        try:
            records = records_from_export(export)
        except (OSError, ValueError, RecursionError) as err:  # RecursionError: JSON nested too deeply
            fail(f"cannot replay {export}: {err}", 2)
        report = _guard(replay_records, records, limit)
    else:
        report = _guard(replay, _store(), limit)
    fmt = _fmt(output, json_flag)
    rows = [[k, report[k]] for k in ("ok", "events", "decisions", "reproduced", "different", "unreplayable")]
    rows += [[f"different at {d['position']}", f"{d['command']}: {d['first_difference']}"]
             for d in report["differences"]]
    rows += [[f"unreplayable at {u['position']}", f"{u['command']}: {u['reason']}"]
             for u in report["unreplayable_decisions"]]
    rows += [[f"unfolded at {u['position']}", f"{u['type']}: {u['reason']}"] for u in report["unfolded_events"]]
    rows += [["rules", f"{report['rules']} (reproduced per rules version: "
                       + ", ".join(f"v{v} {n}" for v, n in report["by_rules"].items()) + ")"]]
    rows += [[f"earlier rules at {e['position']}", f"{e['command']}: reproduced under rules v{e['rules']} (before "
              + ", ".join(e["changes"]) + "; the decision records no version)"]
             for e in report["under_earlier_rules_decisions"]]
    rows += [["decided otherwise today", report["decided_otherwise_today"]]]
    rows += [[f"otherwise today at {e['position']}", f"{e['command']}: made under rules v{e['rules']}; since: "
              + ", ".join(e["changes"]) + f"; {e['first_difference']}"]
             for e in report["decided_otherwise_today_decisions"]]
    unlisted = (report["different"] + report["unreplayable"] + report["unfolded"] - len(report["differences"])
                - len(report["unreplayable_decisions"]) - len(report["unfolded_events"]))
    if unlisted:
        rows.append(["not listed", f"{unlisted} more (raise --limit)"])
    emit(report, fmt, rows, ["check", "result"])
    if not report["ok"]:
        fail(f"replay differs: {report['different']} decision(s) not reproduced, "
             f"{report['unreplayable']} not replayable" + (f", {report['unfolded']} event(s) not folded"
                                                           if report["unfolded"] else ""))


@audit_app.command("rebuild")
def rebuild_cmd(
    replace: bool = typer.Option(False, "--replace", help="when they differ, replace the live rows by the rebuilt"),
    full: bool = typer.Option(False, "--full", help="fold from the first event (and record the snapshot it "
                              "proves), instead of from the newest snapshot a full rebuild checked"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    output: OutputFormat = OutputOption,
) -> None:
    """Rebuild the projections from the log and compare per-table checksums with the live ones."""
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
    if every < 1 or base_every < 1:
        fail("--every and --base-every must be at least 1", 2)
    emit({"saved": _guard(take_snapshots, _store(), every, None, base_every)}, output)


@audit_app.command("state")
def state_cmd(
    at: str = typer.Option(None, "--at", help="a time: epoch seconds or ISO 8601 (UTC unless it names a zone)"),
    position: int = typer.Option(None, "--position", help="a position of the log instead of a time"),
    json_flag: bool = typer.Option(False, "--json", help="print JSON"),
    api: bool = typer.Option(False, "--api", help="ask the API (your token) instead of reading the store"),
    output: OutputFormat = OutputOption,
) -> None:
    """The projections (allocations, nodes, jobs) as they were at a past time or position."""
    if (at is None) == (position is None):
        fail("give --at TIME or --position N", 2)
    if position is not None and position < 0:
        fail(f"--position must be 0 or more, got {position}", 2)
    if api:
        _state_via_api(None if at is None else parse_time(at), position, _fmt(output, json_flag))
        return

    store = _store()
    if at is not None:
        proj, info = _guard(state_at, store, parse_time(at))
    else:
        head = _guard(store.head)
        if position > head:
            fail(f"--position {position} is past the log's head ({head})", 2)
        proj = _guard(state_at_position, store, position)
        info = {"at": None, "position": position, "recorded_at": proj.recorded_at if position else None}
    fmt = _fmt(output, json_flag)
    if fmt is OutputFormat.json:  # every row, as documented (builds every job)
        rows = proj.rows()
        emit({**info, "allocations": rows["proj_allocations"], "nodes": rows["proj_nodes"],
              "jobs": rows["proj_jobs"]}, fmt)
        return
    counts = proj.job_counts()  # the table needs the counts only: no job is built
    when = [["recorded at", datetime.fromtimestamp(info["recorded_at"], UTC).isoformat(timespec="seconds")]] \
        if info.get("recorded_at") else []
    emit(info, fmt,
         [["position", info["position"]], *when, ["allocations", len(proj.allocations)], ["nodes", len(proj.nodes)],
          ["jobs", sum(counts.values())], *[[f"jobs {s}", n] for s, n in counts.items()]], ["what", "value"])


VERIFY = """query($from: BigInt!, $to: BigInt) { verify(fromPosition: $from, toPosition: $to) {
  fromPosition toPosition checked ok firstBadPosition problem truncated head } }"""

STATE_AT = """query($t: Float, $p: BigInt) { stateAt(time: $t, position: $p, jobsFirst: 500) { position recordedAt
  allocations { name parent share } nodes { id gpus gpuModel path state } jobCounts { state count }
  jobs { id project state gpus attempt } jobsTruncated } }"""


def _verify_via_api(start: int, to: int | None) -> dict[str, Any]:
    """The API's `verify` (the same verifier, run by the API on the store), in this command's report shape. One
    request checks at most the API's limit of positions; the next request goes on from the last position the
    answer checked, so the whole range is checked (and a problem ends the walk where it is)."""
    from steward.cli.client import GraphQLClient

    client = GraphQLClient(get_settings())
    checked = requests = 0
    position = start
    while True:
        v = client.execute(VERIFY, {"from": position, "to": to})["verify"]
        requests += 1
        checked += int(v["checked"])
        if not v["truncated"] or v["firstBadPosition"] is not None:
            break
        position = int(v["toPosition"]) + 1
    ok = bool(v["ok"])
    return {"ok": ok, "events": checked, "from": start, "to": v["toPosition"], "head": v["toPosition"],
            "checkpoints_checked": None, "first_bad_position": v["firstBadPosition"],
            "problem": None if ok else v["problem"], "detail": "", "via": "api", "requests": requests}


def _state_via_api(at: float | None, position: int | None, output: OutputFormat) -> None:
    from steward.cli.client import GraphQLClient

    st = GraphQLClient(get_settings()).execute(STATE_AT, {"t": at, "p": position})["stateAt"]
    emit(st, output, [["position", st["position"]], ["allocations", len(st["allocations"])],
                      ["nodes", len(st["nodes"])], *[[f"jobs {c['state']}", c["count"]] for c in st["jobCounts"]]],
         ["what", "value"])


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")

"""The ledger's work on each message of a batch, without IO: decode (or dead-letter) every message, then
decide each command on the state the ones before it left and fold its events into the projector. The
ledger (`steward.ledger.ledger.Ledger.prepare`) runs these for every message, between its store reads and
the encoding of the events, so the module is compiled with mypyc (ADR 0020)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from steward.bus.envelope import Envelope
from steward.bus.identity import Sender, refusal, sender_of_topic
from steward.domain.commands import Command
from steward.domain.decide import decide_or_reject
from steward.domain.decoding import command_from_dict
from steward.domain.errors import DomainError
from steward.domain.leadership import COMMAND_ROLES, stale_command
from steward.domain.recorded import carries_its_command
from steward.domain.rules_version import CURRENT as RULES
from steward.store.encoding import PendingAppend
from steward.store.projector import Key, Projector


@dataclass(frozen=True, slots=True)
class DeadLetter:
    raw: bytes | None
    error: str
    source: str


Decoded = tuple[str, Envelope, Command]  # (source, envelope, command)


Opened = tuple[str, bytes | None, Envelope | None, str]  # (source, raw, envelope or None, the error if None)


def open_envelopes(messages: Sequence[tuple[str, bytes | None]], max_message_bytes: int) -> list[Opened]:
    """Each message (source, raw bytes) as its envelope, or None with the problem: oversized (cut to its
    first 4 KiB), or not an envelope. Decoding's first half: the envelopes name the ids and keys the
    ledger asks the store about, which it asks before the commands are decoded (ADR 0023)."""
    out: list[Opened] = []
    for source, raw in messages:
        if raw is not None and len(raw) > max_message_bytes:
            # kept whole: its refusal records the digest of all of it (the dead-letter topic gets a cut)
            out.append((source, raw, None, f"oversized: {len(raw)} bytes, the limit is {max_message_bytes}"))
            continue
        try:
            out.append((source, raw, Envelope.decode(raw), ""))
        except (ValueError, DomainError) as err:
            out.append((source, raw, None, str(err)))
    return out


def decode_commands(opened: list[Opened]) -> tuple[list[Decoded], list[DeadLetter]]:
    """Decoding's second half: each opened envelope's command, or a dead letter naming the problem (not
    an envelope, oversized, or not a valid command), in the messages' order."""
    decoded: list[Decoded] = []
    dead: list[DeadLetter] = []
    for source, raw, env, error in opened:
        if env is None:
            dead.append(DeadLetter(raw, error, source))
            continue
        try:
            command = command_from_dict(env.type, env.payload)
        except (ValueError, DomainError) as err:
            dead.append(DeadLetter(raw, str(err), source))
            continue
        decoded.append((source, env, command))
    return decoded, dead


def decide_messages(proj: Projector, decoded: list[Decoded], seen: set[str], now: float,
                    position: int, prefix: str | None = None,
                    refused: list[DeadLetter] | None = None,
                    lease_epochs: dict[str, int | None] | None = None,
                    rules: int = RULES) -> tuple[list[PendingAppend], list[Key], int]:
    """Decide each command not `seen` yet (redelivered messages are skipped; `seen` gains the rest) on the
    projector's state, in order, folding its events into `proj` as positions after `position`. Returns the
    events per message with the message's metadata, the projection rows changed, and the last position.

    With a topic `prefix` (the ledger service), a command its topic's component may not issue, or whose
    actor that component may not vouch for, is not decided: it goes to `refused` with the reason
    (steward.bus.identity, ADR 0036; its `raw` is left for the caller to fill). So does a command of a role
    with a lease (`COMMAND_ROLES`: the scheduler) sent with an epoch older than the lease's in `lease_epochs`
    (read by the ledger for this batch): a paused active's late command (`steward.domain.leadership`, ADR 0065).
    `rules`: the rules version to decide under, today's but for a test that records a log as an older release's
    ledger did (ADR 0082's, whose nodes of more GPUs than the bound a log of then may hold)."""
    batch: list[PendingAppend] = []
    changed: list[Key] = []
    view = proj.view()
    senders: dict[str, Sender | None] = {}
    for source, env, command in decoded:
        mid = env.id
        if mid in seen:
            continue  # a redelivered message: recorded already
        if (view.used is not proj.used or view.allocations is not proj.allocations
                or view.nodes is not proj.nodes or view.policy is not proj.policy
                or view.jobs is not proj.jobs or view.namespaces is not proj.namespaces):
            view = proj.view()  # a new view only when the projector holds another object
        if prefix is not None:
            topic = source.rpartition("/")[0]
            if topic in senders:
                sender = senders[topic]
            else:
                sender = senders[topic] = sender_of_topic(prefix, topic)
            why = refusal(view, sender, command, env.meta.get("actor"), env.meta.get("role"))
            if not why and sender is not None and sender.component in COMMAND_ROLES:
                role = sender.component
                why = stale_command(role, env.meta.get("epoch"), (lease_epochs or {}).get(role))
            if why:
                if refused is not None:
                    refused.append(DeadLetter(None, why, source))
                continue
        seen.add(mid)
        events = decide_or_reject(view, command, now, rules)
        for ev in events:
            position += 1
            changed += proj.apply(ev, now, position)
        meta: dict[str, Any] = {**env.meta, "causation_id": mid, "command": env.type, "source": source,
                                "rules": rules}  # the rules it was decided under (replay, ADR 0038)
        if events and (events[0].type == "CommandRejected"
                       or not carries_its_command(command, [ev.payload for ev in events])):
            # the events do not give the command back (a rejection never does): the replay reads it here
            meta["input"] = env.payload
        batch.append(PendingAppend(events, meta, mid))
    return batch, changed, position


# ------------------------------------------------------------------ the batch's bookkeeping (Ledger.prepare)


def ids_and_new_keys(opened: list[Opened], versions: dict[str, int]) -> tuple[set[str], set[str]]:
    """The batch's message ids, and the keys (aggregates, whose streams most events go to) whose last
    version the ledger does not hold yet: what the dedup and version read asks the store for (also for
    an envelope whose command turns out invalid: an answer more, never a wrong one)."""
    ids: set[str] = set()
    keys: set[str] = set()
    for _, _, env, _ in opened:
        if env is None:
            continue
        ids.add(env.id)
        key = env.key
        if key not in versions:
            keys.add(key)
    return ids, keys


def in_flight_duplicates(ids: set[str], in_flight: list[set[str]]) -> set[str]:
    """The ids among `ids` that a batch prepared but not yet committed holds (the store cannot know them)."""
    seen: set[str] = set()
    for flight in in_flight:
        seen |= ids & flight
    return seen


def decided_a_duplicate(committed: set[str], batch: list[PendingAppend]) -> bool:
    """Whether a message the store holds as committed was decided anyway: the batch was decided before
    the store's answer came, on "not committed" (ADR 0023)."""
    if committed:
        for pending in batch:
            if pending.message_id in committed:
                return True
    return False


def merge_versions(versions: dict[str, int], found: dict[str, int]) -> None:
    """Add the versions read from the store to the ledger's cache, never over one it holds: the cache
    has the versions decided in batches not yet committed, which are newer than any committed one."""
    for stream, version in found.items():
        if stream not in versions:
            versions[stream] = version


def unknown_streams(batch: list[PendingAppend], versions: dict[str, int]) -> set[str]:
    """The streams events were decided for whose last version the ledger does not hold (an event for
    another aggregate than its command's key): read from the store before the events are numbered."""
    out: set[str] = set()
    for pending in batch:
        for ev in pending.events:
            if ev.stream not in versions:
                out.add(ev.stream)
    return out


def batch_versions(batch: list[PendingAppend], versions: dict[str, int]) -> dict[str, int]:
    """The last version of every stream the batch writes, as before the batch (`encode_events` numbers on)."""
    out: dict[str, int] = {}
    for pending in batch:
        for ev in pending.events:
            stream = ev.stream
            out[stream] = versions[stream]
    return out


def processed_messages(batch: list[PendingAppend], position: int) -> tuple[list[tuple[str, int | None]], set[str]]:
    """The dedup rows of the batch's messages (id, position of its first event or None when it has none),
    numbered after `position` as `encode_events` numbers them, and the set of those ids."""
    rows: list[tuple[str, int | None]] = []
    ids: set[str] = set()
    for pending in batch:
        count = len(pending.events)
        mid = pending.message_id
        if mid:
            rows.append((mid, position + 1 if count else None))
            ids.add(mid)
        position += count
    return rows, ids

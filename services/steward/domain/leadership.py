"""Who of an active process and its standbys may write (ADR 0060): the election rule and the fence, pure.

A role (the ledger, the scheduler) has one lease: the holder, a fencing epoch, when it expires (on the store's
clock) and whether the holder's connection to the store is still open. Each candidate, active or standby, reads
the lease and applies `step`; the store applies the resulting change only if the lease still has the epoch the
candidate read (compare and set), so two candidates never both win one epoch. Whatever an active writes carries
its epoch, and the store refuses a write whose epoch is not the lease's (`fenced`): an active that was paused
while a standby took over is refused at its first write, and steps down when it next reads the lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# seconds a lease lasts without renewal: a paused or cut-off active is replaced this long after its last renewal
LEASE_TTL_S = 3.0
# how often the active renews its lease (a third of the TTL: two renewals may fail before it expires)
RENEW_EVERY_S = 1.0
# how often a standby reads the lease (a dead active's connection closes at once: this is the takeover's wait)
POLL_EVERY_S = 0.25


@dataclass(frozen=True, slots=True)
class Lease:
    """A role's lease as the store holds it."""

    holder: str  # the candidate that holds it (host:pid:random, unique per process start)
    epoch: int  # raised by one at each change of holder; writes carry it
    expires_at: float  # on the store's clock
    holder_connected: bool  # the holder's lease connection to the store is still open


class Step(Enum):
    TAKE = "take"  # become the holder with epoch + 1 (or 1 when there is no lease yet)
    RENEW = "renew"  # the holder extends its lease
    WAIT = "wait"  # another candidate holds a live lease: stay a standby
    STEP_DOWN = "step_down"  # this candidate was active with an epoch that is no longer the lease's


def step(lease: Lease | None, me: str, my_epoch: int | None, now: float) -> Step:
    """What candidate `me` does on reading `lease` at `now`; `my_epoch` is the epoch it is active with (None:
    it is a standby)."""
    if my_epoch is not None and (lease is None or lease.epoch != my_epoch or lease.holder != me):
        return Step.STEP_DOWN
    if lease is None:
        return Step.TAKE
    if lease.holder == me:
        # active and still the lease's (an expired lease nobody took is renewed: the store still accepts its
        # epoch); a standby that finds its own name came back with a stale view: it takes a new epoch
        return Step.RENEW if my_epoch is not None else Step.TAKE
    if now >= lease.expires_at or not lease.holder_connected:
        return Step.TAKE
    return Step.WAIT


def next_epoch(lease: Lease | None) -> int:
    """The epoch a candidate that takes the lease writes with."""
    return 1 if lease is None else lease.epoch + 1


def fenced(write_epoch: int, lease_epoch: int | None) -> bool:
    """Whether the store refuses a write made with `write_epoch` while the lease has `lease_epoch` (None: no
    lease, as before standbys existed: a writer without an epoch is the only kind, and one with an epoch is
    refused, since its lease was removed)."""
    return lease_epoch != write_epoch


# roles with a lease whose writes are commands the ledger decides (the ledger's own writes are fenced in the store)
COMMAND_ROLES = frozenset({"scheduler"})
FENCED = "fenced: "  # how every refusal of a stale active's command begins (counted by the ledger's metrics)


def stale_command(role: str, sent_epoch: object, lease_epoch: int | None) -> str:
    """Why the ledger refuses a command `role`'s active sent with `sent_epoch` (the epoch its lease had when it
    decided, carried in the envelope) while the role's lease has `lease_epoch`: "" when it is decided as usual.

    A paused active resumed after its standby took over may publish what it decided before the pause; a command
    of an epoch older than the lease's is refused outright, whatever it says. A command without an epoch (a
    sender older than epochs, a log recorded before them) is not checked, nor is one when the role has no lease
    (nothing to be stale against); an epoch newer than the one read is the new active's, read a moment early."""
    if sent_epoch is None:
        return ""
    if isinstance(sent_epoch, bool) or not isinstance(sent_epoch, int) or sent_epoch < 1:
        return f"{FENCED}{role} epoch {sent_epoch!r} is not a lease epoch (a whole number from 1)"
    if lease_epoch is not None and sent_epoch < lease_epoch:
        return f"{FENCED}{role} epoch {sent_epoch}, lease at {lease_epoch}"
    return ""


def fenced_role(reason: str) -> str | None:
    """The role whose stale command a refusal's `reason` (`stale_command`'s) names; None for any other reason."""
    if not reason.startswith(FENCED):
        return None
    return reason[len(FENCED):].split(" ", 1)[0] or None

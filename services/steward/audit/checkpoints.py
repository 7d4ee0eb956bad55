"""Signed checkpoints: an RFC 6962 Merkle root over the event hashes, signed with Ed25519.

The signing key lives in the run folder (`<run_dir>/keys/checkpoint-ed25519.pem`, created on first
use, mode 0600) unless STEWARD_CHECKPOINT_KEY names another PEM file. Auditors pin the public key
(`steward audit key`) and check checkpoints and proofs against it.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    load_pem_private_key,
)
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from steward.store import schema
from steward.store.eventstore import EventStore
from steward.store.leases import Fence, fenced_transaction
from steward.store.verifier import (
    Frontier,
    checkpoint_message,
    consistency_path,
    inclusion_path,
    key_id,
    leaf_hash,
)


def key_path(run_dir: Path) -> Path:
    configured = os.environ.get("STEWARD_CHECKPOINT_KEY")
    return Path(configured) if configured else run_dir / "keys" / "checkpoint-ed25519.pem"


@dataclass(frozen=True)
class SigningKey:
    private: Ed25519PrivateKey

    @property
    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def key_id(self) -> str:
        return key_id(self.public_raw)

    def public_pem(self) -> str:
        return self.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo).decode()

    def sign(self, cp: dict[str, Any]) -> str:
        return base64.b64encode(self.private.sign(checkpoint_message(cp))).decode()


def load_or_create_key(path: Path) -> SigningKey:
    if path.exists():
        key = load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path} is not an Ed25519 private key")
        return SigningKey(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    signing = SigningKey(key)
    path.with_suffix(".pub.pem").write_text(signing.public_pem())
    return signing


def checkpoint_rows(store: EventStore) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        q = select(schema.checkpoints).order_by(schema.checkpoints.c.tree_size)
        rows = [dict(r._mapping) for r in conn.execute(q)]
        conn.rollback()
    return rows


def latest_checkpoint(store: EventStore) -> dict[str, Any] | None:
    rows = checkpoint_rows(store)
    return rows[-1] if rows else None


def make_checkpoint(store: EventStore, key: SigningKey, upto: int | None = None,
                    now: float | None = None, fence: Fence | None = None) -> dict[str, Any] | None:
    """Extend the latest checkpoint's tree with the events after it (to `upto`, default the head) and
    record a signed checkpoint; None when there is nothing new."""
    last = latest_checkpoint(store)
    frontier = Frontier.from_json(last["tree_size"], last["frontier"]) if last else Frontier()
    head_hash = last["head_hash"] if last else "0" * 64
    for row in store.rows(after=frontier.size, to=upto):
        if row.position != frontier.size + 1:
            raise ValueError(f"the log has a gap at position {frontier.size + 1}; run `steward audit verify`")
        frontier.append(leaf_hash(row.hash))
        head_hash = row.hash
    if (last and frontier.size == last["tree_size"]) or frontier.size == 0:
        return None
    cp: dict[str, Any] = {"tree_size": frontier.size, "root": frontier.root().hex(), "head_hash": head_hash,
                          "created_at": float(time.time() if now is None else now), "key_id": key.key_id}
    cp["signature"] = key.sign(cp)
    cp["public_key"] = base64.b64encode(key.public_raw).decode()
    cp["frontier"] = frontier.to_json()
    try:
        with fenced_transaction(store.engine, fence) as conn:  # the active ledger's (ADR 0097)
            conn.execute(schema.checkpoints.insert().values(**cp))
    except IntegrityError:
        return None  # another checkpointer recorded this size first
    return cp


def public_checkpoint(cp: dict[str, Any]) -> dict[str, Any]:
    return {k: cp[k] for k in ("tree_size", "root", "head_hash", "created_at", "key_id", "public_key",
                               "signature", "frontier")}


def leaves(store: EventStore, upto: int) -> list[bytes]:
    return [leaf_hash(r.hash) for r in store.rows(after=0, to=upto)]


def checkpoint_at_least(store: EventStore, size: int) -> dict[str, Any]:
    for cp in checkpoint_rows(store):
        if cp["tree_size"] >= size:
            return cp
    raise LookupError(f"no checkpoint covers position {size} yet; run `steward audit checkpoint`")


def checkpoint_of_size(store: EventStore, size: int) -> dict[str, Any]:
    """The signed checkpoint of exactly `size` events; a LookupError names the sizes nearest to it (the
    ledger signs one every 1,000 events or 30 seconds, so sizes are seldom round numbers)."""
    rows = checkpoint_rows(store)
    for cp in rows:
        if cp["tree_size"] == size:
            return cp
    if not rows:
        raise LookupError(f"no checkpoint of size {size}: none is signed yet; run `steward audit checkpoint`")
    below = [int(cp["tree_size"]) for cp in rows if cp["tree_size"] < size]
    above = [int(cp["tree_size"]) for cp in rows if cp["tree_size"] > size]
    near = ([f"{below[-1]}"] if below else []) + ([f"{above[0]}"] if above else [])
    raise LookupError(f"no checkpoint of size {size}; the nearest are of size {' and '.join(near)} "
                      f"({len(rows)} checkpoints, sizes {rows[0]['tree_size']} to {rows[-1]['tree_size']})")


def inclusion_proof(store: EventStore, position: int, tree_size: int | None = None) -> dict[str, Any]:
    """The event at `position`, its audit path, and the signed checkpoint the path leads to."""
    cp = checkpoint_of_size(store, tree_size) if tree_size else checkpoint_at_least(store, position)
    tree = leaves(store, cp["tree_size"])
    found = store.read(after=position - 1, limit=1)
    if not found or found[0].position != position:
        raise LookupError(f"no event at position {position}")
    event = found[0]
    return {"kind": "inclusion", "event": event.to_dict(), "checkpoint": public_checkpoint(cp),
            "path": [h.hex() for h in inclusion_path(tree, position - 1)]}


def consistency_proof(store: EventStore, first: int, second: int) -> dict[str, Any]:
    a, b = checkpoint_of_size(store, first), checkpoint_of_size(store, second)
    tree = leaves(store, b["tree_size"])
    return {"kind": "consistency", "first": public_checkpoint(a), "second": public_checkpoint(b),
            "path": [h.hex() for h in consistency_path(tree, a["tree_size"])]}

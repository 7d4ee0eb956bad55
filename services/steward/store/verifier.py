"""The standalone verifier: everything an auditor needs to check a Steward export, in one file.

It depends on the Python standard library and `cryptography` (Ed25519) only, so it can be copied out
of the repository and run on an auditor's machine against an export file alone:

    python verifier.py EXPORT.ndjson [--public-key KEY.pem] [--proof PROOF.json] [--json]

What it defines (and what the store and the audit commands import, so there is one definition):

- `canonical_json`: RFC 8785 (JSON Canonicalization Scheme) encoding.
- `event_hash`: each event's hash = SHA-256(previous hash, as 64 hex ASCII characters || RFC 8785 of
  the event body), where the body holds the payload only as its SHA-256 digest (a payload can be
  redacted without breaking the chain).
- RFC 6962 Merkle trees over the event hashes (leaf i = event at position i + 1): roots, inclusion
  and consistency proof checks, and Ed25519 signed checkpoints.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

GENESIS = "0" * 64
EXPORT_FORMAT = "steward-audit-export/1"
REDACTED_KEY = "$redacted_sha256"

# ------------------------------------------------------------------------------------ RFC 8785


def es6_number(x: float) -> str:
    """A double as ECMAScript's Number.prototype.toString prints it (RFC 8785 section 3.2.2.3)."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError("NaN and Infinity have no JSON form")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es6_number(-x)
    _sign, digits_t, exp = Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    assert isinstance(exp, int)
    k = len(digits)
    n = exp + len(digits_t)  # x = 0.d1d2...dk * 10^n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def _utf16_key(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _slow(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(es6_number(obj))
    elif isinstance(obj, str):
        out.append(json.dumps(obj, ensure_ascii=False))
    elif isinstance(obj, list | tuple):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _slow(item, out)
        out.append("]")
    elif isinstance(obj, dict):
        out.append("{")
        for i, key in enumerate(sorted(obj, key=_utf16_key)):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {key!r}")
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _slow(obj[key], out)
        out.append("}")
    else:
        raise TypeError(f"{type(obj).__name__} has no JSON form")


class _NeedsSlowPath(Exception):
    pass


def _normalise(obj: Any) -> Any:
    """Integral floats below 2**53 become ints (ES6 prints them so); anything json.dumps would print
    differently from RFC 8785 raises `_NeedsSlowPath` (exponent floats, huge integral floats, keys
    whose UTF-16 order may differ from code point order)."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        if obj != obj or obj in (math.inf, -math.inf) or "e" in repr(obj):
            raise _NeedsSlowPath
        if obj.is_integer():
            if abs(obj) < 2**53:
                return int(obj)
            raise _NeedsSlowPath
        return obj
    if t is dict:
        out = {}
        for k, v in obj.items():
            if type(k) is not str or not (k.isascii() or max(k) < "\ud800"):
                if not isinstance(k, str):
                    raise TypeError(f"JSON object keys must be strings, got {k!r}")
                raise _NeedsSlowPath
            tv = type(v)  # the plain values inline (most of a payload), the rest through the recursion
            out[k] = v if tv is str or tv is int or tv is bool or v is None else _normalise(v)
        return out
    if t is list or t is tuple:
        return [v if type(v) is str else _normalise(v) for v in obj]
    if isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float | dict | list | tuple):
        raise _NeedsSlowPath  # subclasses: the careful encoder
    raise TypeError(f"{type(obj).__name__} has no JSON form")


def canonical_text(obj: Any) -> str:
    """RFC 8785 canonical JSON as text (fast path through the C encoder when it agrees with RFC 8785)."""
    try:
        return json.dumps(_normalise(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except _NeedsSlowPath:
        out: list[str] = []
        _slow(obj, out)
        return "".join(out)


def canonical_json(obj: Any) -> bytes:
    return canonical_text(obj).encode("utf-8")


# ------------------------------------------------------------------------------------ event hash


def payload_digest(payload: Any) -> str:
    """SHA-256 of the payload's canonical form; a redacted payload carries the digest it replaced."""
    if isinstance(payload, dict) and len(payload) == 1 and REDACTED_KEY in payload:
        return str(payload[REDACTED_KEY])
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def _jstr(s: str) -> str:
    """A JSON string as RFC 8785 writes it (fast path for plain printable ASCII)."""
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    return json.dumps(s, ensure_ascii=False)


json_string = _jstr  # public: the ledger builds the same body text in `encode_events`


def event_body_text(*, position: int, stream_id: str, version: int, type: str, schema_version: int,
                    payload_sha256: str, metadata_text: str, message_id: str | None, recorded_at: float) -> str:
    """RFC 8785 of the event body, built directly (keys in sorted order). `metadata_text` must be the
    canonical text of the metadata."""
    mid = "null" if message_id is None else _jstr(message_id)
    return (
        f'{{"message_id":{mid},"metadata":{metadata_text},"payload_sha256":"{payload_sha256}",'
        f'"position":{int(position)},"recorded_at":"{float(recorded_at)!r}","schema_version":{int(schema_version)},'
        f'"stream_id":{_jstr(stream_id)},"type":{_jstr(type)},'
        f'"version":{int(version)}}}'
    )


def event_hash(prev_hash: str, *, position: int, stream_id: str, version: int, type: str, schema_version: int,
               payload: Any, metadata: Any, message_id: str | None, recorded_at: float) -> str:
    body = event_body_text(position=position, stream_id=stream_id, version=version, type=type,
                           schema_version=schema_version, payload_sha256=payload_digest(payload),
                           metadata_text=canonical_text(metadata), message_id=message_id,
                           recorded_at=recorded_at)
    return hashlib.sha256((prev_hash + body).encode("utf-8")).hexdigest()


def hash_of_event_dict(ev: dict[str, Any], prev_hash: str | None = None, position: int | None = None) -> str:
    """The hash of an exported event (as `to_dict` writes it), optionally at another position/prev."""
    return event_hash(
        ev["prev_hash"] if prev_hash is None else prev_hash,
        position=ev["position"] if position is None else position, stream_id=ev["stream_id"],
        version=ev["version"], type=ev["type"], schema_version=ev["schema_version"], payload=ev["payload"],
        metadata=ev["metadata"], message_id=ev.get("message_id"), recorded_at=ev["recorded_at"],
    )


# ------------------------------------------------------------------------------------ RFC 6962


def leaf_hash(event_hash_hex: str) -> bytes:
    return hashlib.sha256(b"\x00" + bytes.fromhex(event_hash_hex)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


EMPTY_ROOT = hashlib.sha256(b"").digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """MTH of RFC 6962 over leaf hashes (bottom-up, a lonely last node is promoted: same tree)."""
    if not leaves:
        return EMPTY_ROOT
    level = list(leaves)
    while len(level) > 1:
        nxt = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


@dataclass(slots=True)
class Frontier:
    """The compact range of a tree: roots of its perfect subtrees, largest first (to extend a tree
    leaf by leaf without keeping the leaves)."""

    size: int = 0
    nodes: list[tuple[int, bytes]] = field(default_factory=list)  # (height, hash)

    def append(self, leaf: bytes) -> None:
        self.size += 1
        height, h = 0, leaf
        while self.nodes and self.nodes[-1][0] == height:
            _, left = self.nodes.pop()
            h = node_hash(left, h)
            height += 1
        self.nodes.append((height, h))

    def root(self) -> bytes:
        if not self.nodes:
            return EMPTY_ROOT
        h = self.nodes[-1][1]
        for _, left in reversed(self.nodes[:-1]):
            h = node_hash(left, h)
        return h

    def ranges(self) -> list[tuple[int, int]]:
        """The leaf index range [start, end) of each subtree."""
        out, start = [], 0
        for height, _ in self.nodes:
            out.append((start, start + (1 << height)))
            start += 1 << height
        return out

    def to_json(self) -> list[list[Any]]:
        return [[h, v.hex()] for h, v in self.nodes]

    @staticmethod
    def from_json(size: int, data: Iterable[Sequence[Any]]) -> Frontier:
        return Frontier(size, [(int(h), bytes.fromhex(v)) for h, v in data])


def leaves_of(hashes: bytes) -> list[bytes]:
    """The RFC 6962 leaf of every event hash in `hashes`, the raw 32-byte digests end to end."""
    sha = hashlib.sha256
    return [sha(b"\x00" + hashes[i:i + 32]).digest() for i in range(0, len(hashes), 32)]


def roots_at(leaves: Sequence[bytes], sizes: Iterable[int]) -> dict[int, bytes]:
    """The root of the tree over the first n leaves, for every n in `sizes` (at most len(leaves)).

    One bottom-up pass, a level at a time, instead of a Python step per leaf: each prefix of n leaves is
    made of the perfect subtrees that the set bits of n name (the nodes a `Frontier` of size n holds), so
    the pass only picks those nodes up on its way to the top. Equal to `merkle_root(leaves[:n])`."""
    wanted = sorted({int(n) for n in sizes})
    if wanted and (wanted[0] < 0 or wanted[-1] > len(leaves)):
        raise ValueError(f"tree sizes must be within 0..{len(leaves)}, got {wanted[0]}..{wanted[-1]}")
    parts: dict[int, list[bytes]] = {n: [] for n in wanted if n}  # each prefix's subtrees, smallest first
    sha = hashlib.sha256
    level: Sequence[bytes] = leaves
    height = 0
    while parts and height < max(parts).bit_length():
        for n, nodes in parts.items():
            if n >> height & 1:  # the subtree of 2**height leaves that starts where n's higher bits end
                nodes.append(level[(n >> (height + 1)) << 1])
        level = [sha(b"\x01" + left + right).digest() for left, right in zip(level[0::2], level[1::2], strict=False)]
        height += 1
    roots = {0: EMPTY_ROOT} if 0 in wanted else {}
    for n, nodes in parts.items():
        h = nodes[0]
        for left in nodes[1:]:
            h = node_hash(left, h)
        roots[n] = h
    return roots


def _largest_power_of_two_below(n: int) -> int:
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_path(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """PATH(m, D[n]) of RFC 6962 section 2.1.1."""
    n = len(leaves)
    if n <= 1:
        return []
    k = _largest_power_of_two_below(n)
    if index < k:
        return [*inclusion_path(leaves[:k], index), merkle_root(leaves[k:])]
    return [*inclusion_path(leaves[k:], index - k), merkle_root(leaves[:k])]


def consistency_path(leaves: Sequence[bytes], m: int) -> list[bytes]:
    """PROOF(m, D[n]) of RFC 6962 section 2.1.2."""
    def sub(m: int, d: Sequence[bytes], complete: bool) -> list[bytes]:
        n = len(d)
        if m == n:
            return [] if complete else [merkle_root(d)]
        k = _largest_power_of_two_below(n)
        if m <= k:
            return [*sub(m, d[:k], complete), merkle_root(d[k:])]
        return [*sub(m - k, d[k:], False), merkle_root(d[:k])]

    if not 0 < m <= len(leaves):
        raise ValueError(f"consistency needs 0 < m <= n, got m={m}, n={len(leaves)}")
    return sub(m, leaves, True)


def verify_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes], root: bytes) -> bool:
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(m: int, n: int, path: Sequence[bytes], first: bytes, second: bytes) -> bool:
    """RFC 9162 section 2.1.4.2."""
    if m == n:
        return not path and first == second
    if not 0 < m < n or not path:
        return False
    proof = list(path)
    if m & (m - 1) == 0:  # m is a power of two: the first root is the first node
        proof.insert(0, first)
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first and sr == second


# ------------------------------------------------------------------------------------ checkpoints

CHECKPOINT_FIELDS = ("tree_size", "root", "head_hash", "created_at", "key_id")


def checkpoint_message(cp: dict[str, Any]) -> bytes:
    """The bytes an Ed25519 checkpoint signature covers."""
    return canonical_json({"kind": "steward-checkpoint/1", **{k: cp[k] for k in CHECKPOINT_FIELDS}})


def key_id(public_key_raw: bytes) -> str:
    return hashlib.sha256(public_key_raw).hexdigest()[:16]


def load_public_key(pem_or_b64: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    text = pem_or_b64.strip()
    if text.startswith("-----BEGIN"):
        key = load_pem_public_key(text.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("not an Ed25519 public key")
        return key
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(text))


def raw_public_key(key: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return bytes(key.public_bytes(Encoding.Raw, PublicFormat.Raw))


def checkpoint_signature_ok(cp: dict[str, Any], public_key: Any | None = None) -> bool:
    """True when `cp` is signed by `public_key` (or, without one, by the key it names)."""
    from cryptography.exceptions import InvalidSignature

    key = public_key or load_public_key(cp["public_key"])
    if key_id(raw_public_key(key)) != cp["key_id"]:
        return False
    try:
        key.verify(base64.b64decode(cp["signature"]), checkpoint_message(cp))
    except (InvalidSignature, ValueError):
        return False
    return True


# ------------------------------------------------------------------------------------ verification


@dataclass(slots=True)
class Problem:
    position: int
    kind: str  # altered | missing | reordered | forked | truncated | bad-signature
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "kind": self.kind, "detail": self.detail}


@dataclass(slots=True)
class ChainReport:
    events: int = 0
    first: int | None = None
    head: int = 0
    head_hash: str = GENESIS
    problems: list[Problem] = field(default_factory=list)
    leaves: list[bytes] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class Row:
    """One event as the chain check needs it: the canonical texts of payload and metadata."""

    position: int
    stream_id: str
    version: int
    type: str
    schema_version: int
    payload_text: str
    metadata_text: str
    message_id: str | None
    recorded_at: float
    prev_hash: str
    hash: str

    def computed(self, position: int | None = None, prev_hash: str | None = None) -> str:
        if self.payload_text.startswith('{"' + REDACTED_KEY + '":'):
            digest = payload_digest(json.loads(self.payload_text))
        else:
            digest = hashlib.sha256(self.payload_text.encode("utf-8")).hexdigest()
        body = event_body_text(
            position=self.position if position is None else position, stream_id=self.stream_id,
            version=self.version, type=self.type, schema_version=self.schema_version, payload_sha256=digest,
            metadata_text=self.metadata_text, message_id=self.message_id, recorded_at=self.recorded_at)
        prev = self.prev_hash if prev_hash is None else prev_hash
        return hashlib.sha256((prev + body).encode("utf-8")).hexdigest()


def row_from_event_dict(ev: dict[str, Any]) -> Row:
    return Row(ev["position"], ev["stream_id"], ev["version"], ev["type"], ev["schema_version"],
               canonical_text(ev["payload"]), canonical_text(ev["metadata"]), ev.get("message_id"),
               float(ev["recorded_at"]), ev["prev_hash"], ev["hash"])


MAX_PROBLEMS = 100


def check_chain(rows: Iterable[Row], *, anchor_position: int = 0, anchor_hash: str | None = GENESIS,
                keep_leaves: bool = False) -> ChainReport:
    """Recompute every hash and link. `anchor_*` is the event before the first row (genesis by
    default; None trusts the first row's prev_hash, as for a partial export).

    Classification of the first problem: a gap is `missing`; a row whose hash does not match its
    content is `reordered` when it matches at the position of another bad row, `altered` otherwise;
    a row whose hash matches but whose link does not is `forked` (it continues another history)."""
    rep = ChainReport(head=anchor_position, head_hash=anchor_hash or GENESIS)
    expected, prev = anchor_position + 1, anchor_hash
    bad: dict[int, Row] = {}
    own_hashes: dict[str, int] = {}
    for row in rows:
        if rep.first is None:
            rep.first = row.position
        rep.events += 1
        if row.position != expected and len(rep.problems) < MAX_PROBLEMS:
            missing = f"{expected}" if row.position == expected + 1 else f"{expected}..{row.position - 1}"
            rep.problems.append(Problem(expected, "missing", f"no event at position(s) {missing}"))
        computed = row.computed()
        if computed != row.hash:
            if len(bad) < MAX_PROBLEMS:
                bad[row.position] = row
                rep.problems.append(Problem(row.position, "altered", "the event's content does not match its hash"))
        elif prev is not None and row.prev_hash != prev and len(rep.problems) < MAX_PROBLEMS:
            before = own_hashes.get(row.prev_hash)
            where = f"position {before}" if before else "an event not in this log"
            rep.problems.append(Problem(row.position, "forked",
                                        f"the event is intact but chains to {where}, not to its predecessor"))
        if len(own_hashes) < 2_000_000:
            own_hashes[row.hash] = row.position
        if keep_leaves:
            rep.leaves.append(leaf_hash(row.hash))
        prev, expected = row.hash, row.position + 1
        rep.head, rep.head_hash = row.position, row.hash
    # rows that match at another bad row's position were moved, not changed
    for problem in rep.problems:
        if problem.kind != "altered":
            continue
        row = bad[problem.position]
        for other in bad:
            if other != row.position and row.computed(position=other) == row.hash:
                problem.kind = "reordered"
                problem.detail = f"the event recorded at position {other} is stored at position {row.position}"
                break
    rep.problems.sort(key=lambda p: (p.position, p.kind != "missing"))
    return rep


def check_checkpoints(checkpoints: Sequence[dict[str, Any]], leaves: Sequence[bytes], head: int,
                      public_key: Any | None = None, chain_ok: bool = True,
                      roots: Mapping[int, bytes] | None = None) -> list[Problem]:
    """Each checkpoint must be signed, and the log must still hold the tree it signed (one pass over
    the leaves, whatever the number of checkpoints). Roots are compared only over an intact chain
    (a broken chain is already named more precisely). `roots` are the leaves' roots at the checkpoints'
    sizes when the caller has them already (`roots_at`)."""
    problems: list[Problem] = []
    ordered = sorted(checkpoints, key=lambda c: c["tree_size"])
    if not chain_ok:
        roots = {}
    elif roots is None:
        roots = roots_at(leaves, [n for c in ordered if 0 <= (n := int(c["tree_size"])) <= min(head, len(leaves))])
    good = 0
    for cp in ordered:
        size = int(cp["tree_size"])
        if not checkpoint_signature_ok(cp, public_key):
            problems.append(Problem(size, "bad-signature", f"checkpoint of size {size} is not signed by the key"))
            continue
        if size > head:
            problems.append(Problem(head + 1, "truncated",
                                    f"a signed checkpoint covers {size} events, the log ends at {head}"))
            continue
        if size not in roots:
            continue
        if roots[size].hex() == cp["root"]:
            good = size
            continue
        signed = Frontier.from_json(size, cp.get("frontier") or [])
        start = 0
        for (lo, hi), (_, h) in zip(signed.ranges(), signed.nodes, strict=False):
            if merkle_root(leaves[lo:hi]) != h:
                start = lo
                break
        start = max(start, good)
        problems.append(Problem(start + 1, "forked",
                                f"the log differs from the signed checkpoint of size {size} from position "
                                f"{start + 1} on (a rewritten history)"))
        break  # later checkpoints differ for the same reason
    return problems


# ------------------------------------------------------------------------------------ exports


def read_export(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(header, events, checkpoints) of an export written with --json or --ndjson."""
    return parse_export(path.read_text(encoding="utf-8"))


def parse_export(text: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(header, events, checkpoints) of an export's text (--json or --ndjson)."""
    if text.lstrip().startswith("{") and '"kind"' not in text.split("\n", 1)[0]:
        data = json.loads(text)
        return data["header"], data["events"], data.get("checkpoints", [])
    header: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    checkpoints: list[dict[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        item = json.loads(line)
        kind = item.pop("kind")
        if kind == "header":
            header = item
        elif kind == "event":
            events.append(item)
        elif kind == "checkpoint":
            checkpoints.append(item)
    return header, events, checkpoints


def verify_proof(proof: Any, public_key: Any | None = None) -> tuple[bool, str]:
    """Check an inclusion proof (event + path + signed checkpoint) or a consistency proof. A file that is no
    proof, or a proof missing a field or holding one of the wrong type, does not verify, and the answer says
    which (it was a KeyError or an AttributeError out of the checker)."""
    if not isinstance(proof, dict):
        return False, f"not a proof: a JSON {type(proof).__name__}, expected an object with a 'kind'"
    try:
        return _verify_proof(proof, public_key)
    except KeyError as err:
        return False, f"a malformed {proof.get('kind')} proof: no field {err.args[0]!r}"
    except (TypeError, ValueError, AttributeError, IndexError) as err:
        return False, f"a malformed {proof.get('kind')} proof: {err}"


def _verify_proof(proof: dict[str, Any], public_key: Any | None) -> tuple[bool, str]:
    if proof.get("kind") == "inclusion":
        ev, cp = proof["event"], proof["checkpoint"]
        if not checkpoint_signature_ok(cp, public_key):
            return False, "the checkpoint's signature does not verify"
        if hash_of_event_dict(ev) != ev["hash"]:
            return False, "the event does not match its hash"
        ok = verify_inclusion(ev["position"] - 1, cp["tree_size"], leaf_hash(ev["hash"]),
                              [bytes.fromhex(p) for p in proof["path"]], bytes.fromhex(cp["root"]))
        return ok, (f"event {ev['position']} is in the signed tree of size {cp['tree_size']}" if ok
                    else "the inclusion path does not lead to the signed root")
    if proof.get("kind") == "consistency":
        first, second = proof["first"], proof["second"]
        for cp in (first, second):
            if not checkpoint_signature_ok(cp, public_key):
                return False, f"the checkpoint of size {cp['tree_size']} is not signed by the key"
        ok = verify_consistency(first["tree_size"], second["tree_size"], [bytes.fromhex(p) for p in proof["path"]],
                                bytes.fromhex(first["root"]), bytes.fromhex(second["root"]))
        return ok, (f"the tree of size {second['tree_size']} extends the tree of size {first['tree_size']}" if ok
                    else "the trees are not consistent (history was rewritten)")
    return False, f"unknown proof kind {proof.get('kind')!r}"


def verify_export(path: Path, public_key: Any | None = None) -> dict[str, Any]:
    header, events, checkpoints = read_export(path)
    events.sort(key=lambda e: e["position"])
    first = events[0]["position"] if events else int(header.get("from", 1))
    anchor_hash = GENESIS if first == 1 else None
    rep = check_chain((row_from_event_dict(e) for e in events), anchor_position=first - 1,
                      anchor_hash=anchor_hash, keep_leaves=first == 1)
    problems = list(rep.problems)
    checked = 0
    if first == 1:
        usable = [c for c in checkpoints if c["tree_size"] <= rep.head or rep.head >= int(header.get("head", 0))]
        problems += check_checkpoints(usable, rep.leaves, rep.head, public_key, chain_ok=rep.ok)
        checked = len(usable)
    problems.sort(key=lambda p: p.position)
    out: dict[str, Any] = {"ok": not problems, "events": rep.events, "from": first, "head": rep.head,
                           "head_hash": rep.head_hash, "checkpoints_checked": checked}
    if problems:
        out |= {"first_bad_position": problems[0].position, "problem": problems[0].kind,
                "detail": problems[0].detail, "problems": [p.to_dict() for p in problems[:20]]}
    return out


def iter_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as fh:
        yield from fh


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="steward-verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path, help="an export from `steward audit export`")
    parser.add_argument("--public-key", type=Path, help="the operator's Ed25519 public key (PEM); pin it")
    parser.add_argument("--proof", type=Path, action="append", default=[], help="an inclusion/consistency proof")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        key = load_public_key(args.public_key.read_text()) if args.public_key else None
        report = verify_export(args.export, key)
        report["proofs"] = []
        for p in args.proof:
            ok, why = verify_proof(json.loads(p.read_text()), key)
            report["proofs"].append({"file": str(p), "ok": ok, "detail": why})
            report["ok"] = report["ok"] and ok
    except (OSError, ValueError, KeyError, TypeError) as err:
        sys.stderr.write(f"steward-verify: {type(err).__name__}: {err}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        status = "OK" if report["ok"] else f"FAILED at {report.get('first_bad_position')}: {report.get('problem')}"
        sys.stdout.write(f"{status}  events={report['events']} head={report['head']} "
                         f"checkpoints={report['checkpoints_checked']}\n")
        for p in report["proofs"]:
            sys.stdout.write(f"proof {p['file']}: {'ok' if p['ok'] else 'FAILED'} - {p['detail']}\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

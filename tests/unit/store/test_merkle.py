"""RFC 6962 Merkle trees: roots, the compact range, inclusion and consistency proofs, for every size."""

from __future__ import annotations

import hashlib

import pytest

from steward.audit.verifier import (
    Frontier,
    consistency_path,
    inclusion_path,
    leaf_hash,
    merkle_root,
    node_hash,
    verify_consistency,
    verify_inclusion,
)


def mth(leaves: list[bytes]) -> bytes:
    """The recursive definition of RFC 6962 section 2.1."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


LEAVES = [leaf_hash(hashlib.sha256(str(i).encode()).hexdigest()) for i in range(33)]


@pytest.mark.parametrize("n", range(0, 34))
def test_roots_and_the_compact_range_agree_with_the_definition(n: int) -> None:
    frontier = Frontier()
    for leaf in LEAVES[:n]:
        frontier.append(leaf)
    assert merkle_root(LEAVES[:n]) == mth(LEAVES[:n]) == frontier.root()
    again = Frontier.from_json(n, frontier.to_json())
    assert again.root() == frontier.root() and sum(hi - lo for lo, hi in again.ranges()) == n


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 13, 33])
def test_every_leaf_has_an_inclusion_proof_and_a_wrong_leaf_has_none(n: int) -> None:
    root = merkle_root(LEAVES[:n])
    for i in range(n):
        path = inclusion_path(LEAVES[:n], i)
        assert verify_inclusion(i, n, LEAVES[i], path, root)
        assert not verify_inclusion(i, n, LEAVES[(i + 1) % 33], path, root)
        assert not verify_inclusion(n, n, LEAVES[i], path, root)


@pytest.mark.parametrize(("m", "n"), [(1, 2), (1, 33), (2, 3), (3, 7), (4, 8), (5, 13), (8, 33), (13, 13),
                                      (32, 33)])
def test_consistency_proofs_between_every_pair(m: int, n: int) -> None:
    first, second = merkle_root(LEAVES[:m]), merkle_root(LEAVES[:n])
    path = consistency_path(LEAVES[:n], m)
    assert verify_consistency(m, n, path, first, second)
    if m < n:
        forked = merkle_root([LEAVES[0], *LEAVES[2:m + 1]]) if m > 1 else LEAVES[5]
        assert not verify_consistency(m, n, path, forked, second)

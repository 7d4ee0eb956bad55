"""RFC 6962 Merkle trees: roots, the compact range, inclusion and consistency proofs, for every size."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.store.verifier import (
    Frontier,
    consistency_path,
    inclusion_path,
    leaf_hash,
    leaves_of,
    merkle_root,
    node_hash,
    roots_at,
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


def test_the_roots_of_every_prefix_in_one_pass_agree_with_the_definition() -> None:
    roots = roots_at(LEAVES, range(0, 34))
    assert roots == {n: mth(LEAVES[:n]) for n in range(0, 34)}
    assert roots_at(LEAVES[:20], [20, 7, 7, 16]) == {n: mth(LEAVES[:n]) for n in (7, 16, 20)}
    assert roots_at(LEAVES, []) == {}


@given(st.integers(0, 300).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(0, n), max_size=8))))
def test_roots_at_any_sizes_equal_the_roots_of_those_prefixes(case: tuple[int, list[int]]) -> None:
    n, sizes = case
    leaves = [leaf_hash(hashlib.sha256(str(i).encode()).hexdigest()) for i in range(n)]
    assert roots_at(leaves, sizes) == {size: merkle_root(leaves[:size]) for size in sizes}


@pytest.mark.parametrize("sizes", [[34], [-1], [3, 40]])
def test_roots_beyond_the_leaves_are_refused_by_name(sizes: list[int]) -> None:
    with pytest.raises(ValueError, match=r"tree sizes must be within 0\.\.33"):
        roots_at(LEAVES, sizes)


def test_leaves_from_raw_digests_equal_leaves_from_hex() -> None:
    hexes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5)]
    assert leaves_of(b"".join(bytes.fromhex(h) for h in hexes)) == [leaf_hash(h) for h in hexes]
    assert leaves_of(b"") == []


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

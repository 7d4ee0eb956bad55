"""Scalars of the GraphQL schema beyond the built-in ones.

GraphQL's `Int` is 32-bit signed: a value beyond 2^31 - 1 on output is a field error (the whole answer
fails), on input a validation error. Whatever can grow with the log or with the cluster is a `BigInt`
instead: positions and versions in the log, cursors' positions, counts of events, jobs or nodes, sums of
GPUs, positions in the queue. Each one is a JSON number, exact in every JSON client up to 2^53 - 1
(JavaScript's safe integers); as input, a number or a string of decimal digits. Fields that stay `Int` are
bounded by construction: tree depth (at most 8), schema versions, page sizes (`api_max_page`), and
per-request inputs such as a job's GPUs (the 32-bit input range is the bound).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NewType

import strawberry
from graphql import GraphQLError

MAX_SAFE = 2**53 - 1


def serialize_big_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"BigInt cannot represent {value!r}: not an integer")
    return int(value)


class BadBigInt(GraphQLError, ValueError):
    """A typed user error (BAD_USER_INPUT), so the message passes the error mask."""

    def __init__(self, message: str) -> None:
        super().__init__(message, extensions={"code": "BAD_USER_INPUT"})


def parse_big_int(value: Any) -> int:
    if isinstance(value, bool):
        raise BadBigInt("BigInt is an integer, not a boolean")
    digits = isinstance(value, str) and value.removeprefix("-").isdigit()
    if not (isinstance(value, int) or digits or (isinstance(value, float) and value.is_integer())):
        raise BadBigInt(f"BigInt is an integer (a number or a string of digits), got {value!r}")
    out = int(value)
    if abs(out) > MAX_SAFE:
        raise BadBigInt(f"BigInt is at most 2^53 - 1 in magnitude, got {value!r}")
    return out


if TYPE_CHECKING:
    BigInt = int
else:
    BigInt = strawberry.scalar(
        NewType("BigInt", int), serialize=serialize_big_int, parse_value=parse_big_int,
        description="An integer that may exceed 32 bits (positions in the log, counts, sums of GPUs): a JSON "
                    "number, exact up to 2^53 - 1; as input a number or a string of decimal digits.")

"""Typed wrappers of Strawberry's field decorators (their overloads with keyword arguments are untyped,
which would make every resolver untyped for mypy)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import strawberry

F = TypeVar("F", bound=Callable[..., Any])


def field(description: str) -> Callable[[F], F]:
    return cast(Callable[[F], F], strawberry.field(description=description))


def mutation(description: str) -> Callable[[F], F]:
    return cast(Callable[[F], F], strawberry.mutation(description=description))


def subscription(description: str) -> Callable[[F], F]:
    return cast(Callable[[F], F], strawberry.subscription(description=description))

"""Versioned event schemas and upcasters.

Every event type has one JSON Schema per version in `schema/events/<Type>/v<N>.json`; the domain writes
the version in `steward.domain.events.EVENT_TYPES`. Events stored at an older version are upcast on
read, one version at a time, by the functions registered here, so that `evolve` only ever sees the
current shape. Bumping a version = a new schema file + an upcaster from the previous version + a
stored example in tests/unit/store/histories/ (the test that every stored version still loads).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from steward.config import REPO_ROOT
from steward.domain.events import EVENT_TYPES

SCHEMA_DIR = REPO_ROOT / "schema" / "events"

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

# (event type, from version) -> function returning the payload at version + 1
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


class SchemaError(ValueError):
    """An event payload that does not match its type's schema at its version."""


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    def register(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn

    return register


@upcaster("AllocationsSet", 1)
def _allocations_set_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 adds the optional `debug_quotas`: a v1 payload sets no debug quota, and is a v2 payload as is."""
    return payload


@upcaster("AllocationsSet", 2)
def _allocations_set_v3(payload: dict[str, Any]) -> dict[str, Any]:
    """v3 adds the optional `display_names`: a v2 payload names no node, and is a v3 payload as is."""
    return payload


@upcaster("AllocationsSet", 3)
def _allocations_set_v4(payload: dict[str, Any]) -> dict[str, Any]:
    """v4 adds the optional `pins` (ADR 0067): a v3 payload pins no node, and is a v4 payload as is."""
    return payload


@upcaster("NodeRegistered", 1)
def _node_registered_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 adds the optional `state` (ADR 0082: the operator's state a registration kept): a v1 payload kept none
    (the node was ready after it), and is a v2 payload as is."""
    return payload


@upcaster("NodeRegistered", 2)
def _node_registered_v3(payload: dict[str, Any]) -> dict[str, Any]:
    """v3 adds the optional `foreign_gpus` (ADR 0091: the foreign load a registration kept): a v2 payload kept none
    (the node had none after it until its executor's next heartbeat), and is a v3 payload as is."""
    return payload


def current_version(event_type: str) -> int:
    return EVENT_TYPES.get(event_type, 1)


def upcast(event_type: str, version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` at `version` brought to the current version of `event_type`."""
    target = current_version(event_type)
    while version < target:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise SchemaError(f"no upcaster for {event_type} v{version} -> v{version + 1}")
        payload = step(dict(payload))
        version += 1
    return payload


def schema_path(event_type: str, version: int, root: Path = SCHEMA_DIR) -> Path:
    return root / event_type / f"v{version}.json"


@cache
def load_schema(event_type: str, version: int) -> dict[str, Any]:
    path = schema_path(event_type, version)
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise SchemaError(f"no schema for {event_type} v{version} ({path})") from None
    return doc


def stored_versions(root: Path = SCHEMA_DIR) -> dict[str, list[int]]:
    """Every (type, versions) that has a schema file."""
    out: dict[str, list[int]] = {}
    for path in sorted(root.glob("*/v*.json")):
        out.setdefault(path.parent.name, []).append(int(path.stem[1:]))
    return {k: sorted(v) for k, v in out.items()}


@cache
def _validator(event_type: str, version: int) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(load_schema(event_type, version))
    return cls(load_schema(event_type, version))


def validate(event_type: str, version: int, payload: dict[str, Any]) -> None:
    """Raise `SchemaError` naming the first violation."""
    errors = sorted(_validator(event_type, version).iter_errors(payload), key=lambda e: list(e.path))
    if errors:
        err = errors[0]
        where = "/".join(str(p) for p in err.path) or "(payload)"
        raise SchemaError(f"{event_type} v{version}: {where}: {err.message}")

"""Namespace mappings (steward.domain.namespaces; ADR 0054): what an admin's mapping may say, and the mapping
the recorded events leave."""

from __future__ import annotations

from typing import Any

import pytest

from steward.bus.identity import ALLOWED_COMMANDS
from steward.domain.commands import MapNamespace
from steward.domain.decide import decide_or_reject
from steward.domain.namespaces import in_force, stream_of
from steward.domain.state import AllocationNode, LedgerState

STATE = LedgerState(allocations={"physics": AllocationNode("physics", "cluster", 1.0, None),
                                 "vision": AllocationNode("vision", "physics", 0.5, None),
                                 "nlp": AllocationNode("nlp", "physics", 0.5, None)})


@pytest.mark.parametrize(("executor", "namespace", "project", "reason", "problem"), [
    ("k8s", "team-vision", "vision", "the vision team", None),
    ("k8s", "team-vision", "", "the team moved out", None),  # unmapped
    ("k8s", "a" * 63, "nlp", "long", None),
    ("k8s", "a" * 64, "nlp", "too long", "no Kubernetes namespace name"),
    ("k8s", "Team", "nlp", "upper case", "no Kubernetes namespace name"),
    ("k8s", "team_a", "nlp", "underscore", "no Kubernetes namespace name"),
    ("k8s", "-team", "nlp", "leading dash", "no Kubernetes namespace name"),
    ("k8s", "team-vision", "physics", "an inner node", "unknown project 'physics'"),
    ("k8s", "team-vision", "ghost", "no such", "unknown project 'ghost'"),
    ("k8s", "team-vision", "vision", "  ", "needs a reason"),
    ("", "team-vision", "vision", "no cluster", "executor id must not be empty"),
])
def test_what_a_namespace_mapping_may_say(executor: str, namespace: str, project: str, reason: str,
                                          problem: str | None) -> None:
    events = decide_or_reject(STATE, MapNamespace(executor_id=executor, namespace=namespace, project=project,
                                                  reason=reason), 0.0)
    if problem is None:
        assert [e.type for e in events] == ["NamespaceMapped"]
        assert events[0].stream == stream_of(executor)
        assert events[0].payload == {"executor_id": executor, "namespace": namespace, "project": project,
                                     "reason": reason}
    else:
        assert events[0].type == "CommandRejected" and problem in events[0].payload["reason"], events[0].payload


@pytest.mark.parametrize(("payloads", "expected"), [
    ([], {}),
    ([{"namespace": "a", "project": "vision"}], {"a": "vision"}),
    ([{"namespace": "a", "project": "vision"}, {"namespace": "a", "project": "nlp"}], {"a": "nlp"}),
    ([{"namespace": "a", "project": "vision"}, {"namespace": "b", "project": "nlp"},
      {"namespace": "a", "project": ""}], {"b": "nlp"}),
    ([{"namespace": "a", "project": ""}], {}),
])
def test_the_last_word_on_each_namespace_is_in_force(payloads: list[dict[str, Any]], expected: dict[str, str]) -> None:
    assert in_force(payloads) == expected


def test_only_the_api_maps_namespaces() -> None:
    """An admin's decision, vouched for by the API; an executor follows the mapping, it does not set it."""
    assert [c for c, allowed in ALLOWED_COMMANDS.items() if "MapNamespace" in allowed] == ["api"]

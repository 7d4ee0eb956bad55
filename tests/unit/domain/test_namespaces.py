"""Namespace mappings (steward.domain.namespaces; ADR 0054, ADR 0056): what an admin's mapping may say, the
mapping the recorded events leave, and the ledger's rule that a cluster's submission charges only the project
its namespace is mapped to."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.bus.identity import ALLOWED_COMMANDS
from steward.domain.commands import MapNamespace, SubmitJob
from steward.domain.decide import decide_or_reject
from steward.domain.events import Event
from steward.domain.namespaces import in_force, stream_of
from steward.domain.state import AllocationNode, LedgerState, evolve

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


def mapped(*mappings: tuple[str, str, str]) -> LedgerState:
    """STATE after these (executor, namespace, project) mappings were recorded, in order."""
    state = STATE
    for executor, namespace, project in mappings:
        (event,) = decide_or_reject(state, MapNamespace(executor, namespace, project, "r"), 0.0)
        assert event.type == "NamespaceMapped", event.payload
        state = evolve(state, event, 0.0)
    return state


def submit(project: str, executor: str = "k8s", namespace: str = "team-vision") -> SubmitJob:
    return SubmitJob(f"{executor}.{namespace or 'x'}.p", project, 1, 0.0, ["train"], from_executor=executor,
                     from_namespace=namespace)


# (name, mappings recorded, the submission, None when accepted else (code, words of the reason))
SUBMISSIONS: list[tuple[str, list[tuple[str, str, str]], SubmitJob, tuple[str, str] | None]] = [
    ("mapped to its project", [("k8s", "team-vision", "vision")], submit("vision"), None),
    ("unmapped", [], submit("vision"),
     ("namespace_not_mapped", "namespace team-vision of cluster k8s is not mapped to a project")),
    ("mapped to another project", [("k8s", "team-vision", "nlp")], submit("vision"),
     ("namespace_not_mapped", "namespace team-vision of cluster k8s charges project nlp, not vision")),
    ("mapped in another cluster only", [("other", "team-vision", "vision")], submit("vision"),
     ("namespace_not_mapped", "is not mapped to a project")),
    ("unmapped since", [("k8s", "team-vision", "vision"), ("k8s", "team-vision", "")], submit("vision"),
     ("namespace_not_mapped", "is not mapped to a project")),
    ("mapped again", [("k8s", "team-vision", "nlp"), ("k8s", "team-vision", "vision")], submit("vision"), None),
    ("a namespace without its cluster", [("k8s", "team-vision", "vision")], submit("vision", executor=""),
     ("namespace_not_mapped", "names both its cluster (executor) and its namespace")),
    ("a cluster without its namespace", [], submit("vision", namespace=""),
     ("namespace_not_mapped", "names both its cluster (executor) and its namespace")),
    ("the mapping is checked before the project", [], submit("ghost"),
     ("namespace_not_mapped", "is not mapped to a project")),
    ("a job through the API names no namespace", [],
     SubmitJob("j", "vision", 1, 0.0, ["train"]), None),
    ("a job through the API for an unknown project", [],
     SubmitJob("j", "ghost", 1, 0.0, ["train"]), ("unknown_project", "unknown project 'ghost'")),
]


@pytest.mark.parametrize(("name", "mappings", "command", "refused"), SUBMISSIONS, ids=[c[0] for c in SUBMISSIONS])
def test_a_clusters_submission_charges_only_its_namespaces_project(
        name: str, mappings: list[tuple[str, str, str]], command: SubmitJob, refused: tuple[str, str] | None) -> None:
    (event,) = decide_or_reject(mapped(*mappings), command, 5.0)
    if refused is None:
        assert event.type == "JobSubmitted", event.payload
        assert event.payload["project"] == command.project and event.payload["submitted_at"] == 5.0
        assert "from_namespace" not in event.payload and "from_executor" not in event.payload  # JobSubmitted v1
        return
    assert event.type == "CommandRejected" and event.stream == f"job-{command.job_id}"
    assert (event.payload["code"], event.payload["command"]) == (refused[0], "SubmitJob")
    assert refused[1] in event.payload["reason"], event.payload["reason"]


_NAMESPACES = st.sampled_from(["a", "b", "c"])
_PROJECTS = st.sampled_from(["vision", "nlp", ""])


@given(st.lists(st.tuples(st.sampled_from(["k8s", "other"]), _NAMESPACES, _PROJECTS), max_size=12),
       _NAMESPACES, st.sampled_from(["vision", "nlp"]))
def test_a_submission_is_accepted_exactly_when_the_last_word_on_its_namespace_is_its_project(
        mappings: list[tuple[str, str, str]], namespace: str, project: str) -> None:
    """Whatever the admins recorded, in whichever order: the ledger accepts a cluster's submission if and only if
    the last mapping recorded for its namespace, in its cluster, names the project it charges."""
    state = mapped(*mappings)
    last = in_force([{"namespace": n, "project": p} for e, n, p in mappings if e == "k8s"])
    assert {n: p for (e, n), p in state.namespaces.items() if e == "k8s"} == last
    (event,) = decide_or_reject(state, submit(project, namespace=namespace), 0.0)
    assert (event.type == "JobSubmitted") == (last.get(namespace) == project)


def test_the_mappings_fold_into_the_ledgers_state() -> None:
    state = evolve(STATE, Event("k8s-namespaces-k8s", "NamespaceMapped", {
        "executor_id": "k8s", "namespace": "a", "project": "vision", "reason": "r"}), 0.0)
    assert state.namespaces == {("k8s", "a"): "vision"}
    state = evolve(state, Event("k8s-namespaces-k8s", "NamespaceMapped", {
        "executor_id": "k8s", "namespace": "a", "project": "", "reason": "r"}), 0.0)
    assert state.namespaces == {}

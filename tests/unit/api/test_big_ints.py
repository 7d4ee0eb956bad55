"""No answer fails because a number outgrew GraphQL's 32-bit `Int` (a schemathesis run once hit one on
output): whatever grows with the log or the cluster is a `BigInt`; the `Int`s left are bounded, and
adding an unbounded one fails the first test here until it is classified."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from graphql import GraphQLInputObjectType, GraphQLObjectType, get_named_type

from steward.api.scalars import MAX_SAFE, parse_big_int
from steward.api.schema import schema
from steward.domain.commands import CancelJob, DrainNode, RegisterNode, SubmitJob
from tests.unit.api.harness import Server, serve

BEYOND_32_BITS = 2**31  # the first value GraphQL's Int cannot carry

# Every Int left in the schema, and why it cannot exceed 2^31 - 1.
BOUNDED = {
    "Allocation.depth": "tree depth, at most 8 (policy max_tree_depth)",
    "Domain.depth": "topology depth: the length of a node's path",
    "Event.schemaVersion": "schema versions of an event type: a handful",
    "OpenSessionInput.gpus": "input: the 32-bit range is the bound",
    "RegisterNodeInput.gpus": "input: the 32-bit range is the bound",
    "SubmitJobInput.gpus": "input: the 32-bit range is the bound",
    "SubmitJobInput.priority": "input: the 32-bit range is the bound",
    "Query.jobs(first)": "page size, at most api_max_page",
    "Query.sessions(first)": "page size, at most api_max_page",
    "Query.queue(first)": "page size, at most api_max_page",
    "Query.auditEvents(first)": "page size, at most api_max_page",
    "Query.accessDenials(first)": "page size, at most api_max_page",
    "Query.allocationHistory(first)": "page size, at most api_max_page",
    "Query.stateAt(jobsFirst)": "page size, at most api_max_page",
    "Query.failedDeliveries(first)": "page size, at most api_max_page",
    "FailedDelivery.attempts": "a delivery's attempts, at most the notifier's max_attempts (8)",
    "GroupMappingChanged.rules": "rules of one group mapping, at most domain.identity.MAX_RULES",
    "WhatIfAllocation.depth": "tree depth, at most 8 (policy max_tree_depth)",
    "WhatIfPreview.jobs": "jobs replayed, at most maxJobs",
    "WhatIfPreview.preemptionsBefore": "preemptions in a replay of at most maxJobs jobs",
    "WhatIfPreview.preemptionsAfter": "preemptions in a replay of at most maxJobs jobs",
    "WhatIfWaits.jobs": "jobs of a replay, at most maxJobs",
    "Query.overview(points)": "input: the 32-bit range is the bound",
    "Query.overview(utcOffsetS)": "input: the 32-bit range is the bound",
    "Query.overview(pastPeriods)": "input: the 32-bit range is the bound",
    "Query.whatIf(maxJobs)": "input: the 32-bit range is the bound",
    "Query.budgetReport(periods)": "input: at most 90 periods (MAX_REPORT_PERIODS)",
    "ShareInput.debugQuotaGpus": "input: the 32-bit range is the bound",
    "Mutation.setDebugQuota(gpus)": "input: the 32-bit range is the bound",
    "DebugQuota.gpus": "one allocation's quota: set through the bounded inputs, or a default of at most the cluster",
    "DebugQuota.setGpus": "GPUs set through the bounded inputs",
    "DebugQuotaChanged.gpus": "GPUs set through the bounded inputs",
    "DebugQualification.quotaGpus": "the allocation's quota (DebugQuota.gpus)",
    "DebugQualification.inUseGpus": "GPUs of one allocation's running debug work: at most the cluster's GPUs",
    "DebugQualification.aheadGpus": "GPUs of one allocation's waiting debug jobs, each of at most lane_max_gpus",
}
# The overview's and the what-if's unbounded numbers (log positions, sums of GPUs, counts of jobs or
# preemptions) are BigInt: held here so that turning one back into Int fails.
BIG = ("Overview.position", "Overview.capacityGpus", "ClassWait.jobs", "ClassWait.started", "ClassWait.waiting",
       "DayCount.count", "WhatIfPreview.capacityGpus")


def int_fields() -> set[str]:
    out = set()
    for name, t in schema._schema.type_map.items():
        if name.startswith("__") or not isinstance(t, GraphQLObjectType | GraphQLInputObjectType):
            continue
        for fname, f in t.fields.items():
            if get_named_type(f.type).name == "Int":
                out.add(f"{name}.{fname}")
            for arg, a in (getattr(f, "args", None) or {}).items():
                if get_named_type(a.type).name == "Int":
                    out.add(f"{name}.{fname}({arg})")
    return out


def test_every_int_left_in_the_schema_is_bounded() -> None:
    unclassified = int_fields() - set(BOUNDED)
    assert not unclassified, f"Int fields that may outgrow 32 bits: make them BigInt or bound them: {unclassified}"


def test_the_overview_and_what_if_numbers_that_grow_are_big_ints() -> None:
    types = schema._schema.type_map
    for name in BIG:
        type_name, field_name = name.split(".")
        t = types[type_name]
        assert isinstance(t, GraphQLObjectType)
        assert get_named_type(t.fields[field_name].type).name == "BigInt", name


@pytest.mark.parametrize(("value", "expected"), [(5, 5), ("6000000000", 6_000_000_000), (7.0, 7), ("-3", -3)])
def test_big_int_inputs(value: object, expected: int) -> None:
    assert parse_big_int(value) == expected


@pytest.mark.parametrize("value", [True, "12a", 1.5, MAX_SAFE + 1, None])
def test_big_int_refuses_what_is_not_an_exact_integer(value: object) -> None:
    with pytest.raises(ValueError, match="BigInt"):
        parse_big_int(value)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(Path(tmp_path_factory.mktemp("bigints"))) as s:
        # recorded behind the API by a ledger of rules 3 (a log written before ADR 0082, which bounds a node at
        # 1,024 GPUs: today's ledger refuses these nodes, test_registering_beyond_the_bound_is_refused_with_the_reason,
        # but a log of then holds them and every answer must still carry them).
        # A third huge node, drained: the giant job fits the registered nodes (else it is refused at submit)
        # but not the ready ones, so its blocking GPUs are beyond 32 bits too
        s.record([RegisterNode("huge-1", 2**31 - 1, "h100", ["zone-z", "huge-1"]),
                  RegisterNode("huge-2", 2**31 - 1, "h100", ["zone-z", "huge-2"]),
                  RegisterNode("huge-3", 2**31 - 1, "h100", ["zone-z", "huge-3"]), DrainNode("huge-3", "spare"),
                  SubmitJob("giant", "a1", 3 * 2**31, 0, ["true"], priority=2**40)], rules=3)
        # the overview runs to the time the log's head was recorded, counting what was recorded before it
        # (ADR 0075): the log moves on past the registrations
        time.sleep(0.01)
        s.record([CancelJob("no-such-job", "the log moves on")])
        yield s


def test_sums_of_gpus_beyond_32_bits_are_answered(server: Server) -> None:
    t = server.tokens["admin"]
    body = server.gql("""{ topology { path gpus freeGpus nodes } nodes { id gpus freeGpus }
        queue { waitingGpus entries { blockingGpus job { id gpus priority } } }
        allocations { name waitingGpus } jobCounts { state count } }""", token=t)
    assert not body.get("errors"), body
    d = body["data"]
    root = next(x for x in d["topology"] if x["path"] == [])
    assert root["gpus"] == 3 * (2**31 - 1) + 16 > BEYOND_32_BITS
    assert {n["id"]: n["gpus"] for n in d["nodes"]}["huge-1"] == 2**31 - 1
    giant = next(e for e in d["queue"]["entries"] if e["job"]["id"] == "giant")
    assert giant["job"] == {"id": "giant", "gpus": 3 * 2**31, "priority": 2**40}
    assert giant["blockingGpus"] >= BEYOND_32_BITS - 16
    assert d["queue"]["waitingGpus"] > 3 * 2**31
    assert next(a for a in d["allocations"] if a["name"] == "a1")["waitingGpus"] > 3 * 2**31


def test_the_overview_answers_a_capacity_beyond_32_bits(server: Server) -> None:
    body = server.gql("""{ overview { position capacityGpus waits { jobClass jobs started waiting }
        preemptionsPerDay { day count } } }""", token=server.tokens["admin"])
    assert not body.get("errors"), body
    d = body["data"]["overview"]
    assert d["capacityGpus"] == 3 * (2**31 - 1) + 16 > BEYOND_32_BITS
    assert d["position"] == server.store.head()


def test_positions_beyond_32_bits_are_accepted_as_arguments(server: Server) -> None:
    t = server.tokens["auditor"]
    body = server.gql("{ stateAt(position: 6000000000) { position } verify(toPosition: 5) { ok toPosition } }",
                      token=t)
    assert not body.get("errors"), body
    assert body["data"]["stateAt"]["position"] == server.store.head()
    body = server.gql("query($p: BigInt!) { stateAt(position: $p) { position } }", {"p": "6000000000"}, t)
    assert body["data"]["stateAt"]["position"] == server.store.head()


@pytest.mark.parametrize("literal", ["9007199254740992", "1.5", "true", '"12a"'])
def test_an_out_of_range_big_int_is_a_typed_user_error_not_a_masked_fault(server: Server, literal: str) -> None:
    body = server.gql(f"{{ stateAt(position: {literal}) {{ position }} }}", token=server.tokens["admin"])
    (err,) = body["errors"]
    assert err["message"] != "internal error (it was logged)" and "BigInt" in err["message"], err
    body = server.gql("query($p: BigInt!) { stateAt(position: $p) { position } }", {"p": 2**53}, server.tokens["admin"])
    assert "at most 2^53 - 1" in body["errors"][0]["message"]


@pytest.mark.parametrize("gpus", [1_025, 80_000, 2**31 - 1])
def test_registering_beyond_the_bound_is_refused_with_the_reason(server: Server, gpus: int) -> None:
    """ADR 0082: the ledger refuses a node of more than 1,024 GPUs (the mutation answers its reason, nothing is
    registered); the huge nodes above come from a log of before."""
    head = server.store.head()
    body = server.gql("""mutation($g: Int!) { registerNode(input: {id: "typo", gpus: $g, gpuModel: "h100",
        path: ["zone-z", "typo"]}) { __typename ... on Rejected { code reason } } }""", {"g": gpus},
                      server.tokens["admin"])
    assert not body.get("errors"), body
    answer = body["data"]["registerNode"]
    assert answer["__typename"] == "Rejected" and "a node has at most 1,024 GPUs" in answer["reason"], answer
    assert f"{gpus:,} GPUs" in answer["reason"]
    nodes = server.gql("{ nodes { id } }", token=server.tokens["admin"])["data"]["nodes"]
    assert "typo" not in {n["id"] for n in nodes} and server.store.head() == head + 1  # the refusal, recorded

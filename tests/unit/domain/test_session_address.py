"""A session publishes how to reach it (issue 24; ADR 0055): `ReportSessionAddress` -> `SessionAddressPublished`,
the rule of an address (`steward.domain.sessions.session_address_problem`), and that an address never outlives
the attempt that published it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.commands import (
    PlaceJob,
    ReportJobExited,
    ReportJobLost,
    ReportJobPreempted,
    ReportJobStarted,
    ReportSessionAddress,
    RequestPreemption,
)
from steward.domain.decide import decide, decide_or_reject
from steward.domain.errors import InvalidCommand, InvalidTransition
from steward.domain.sessions import SESSION_ADDRESS_SCHEMES, session_address_problem
from steward.store.upcasting import validate
from tests.unit.domain.builders import apply, running
from tests.unit.domain.test_sessions_nodes_periods import session

GOOD = ["http://gpu-07.lab.example:8888/lab", "https://10.0.3.7/", "ws://node-1:6006", "ssh://gpu-07:2222",
        "gpu-07.lab.example:8888", "10.0.3.7:22", "[::1]:8888", "http://[fe80::1]:8080/tree", "vnc://n0:5901",
        "HTTP://Node-1:80/"]


@pytest.mark.parametrize("address", GOOD)
def test_urls_and_host_ports_are_addresses(address: str) -> None:
    assert session_address_problem(address) is None


BAD = [
    ("empty", "", "is empty"),
    ("a javascript link", "javascript:alert(1)", "URL .* or host:port"),
    ("another scheme", "file:///etc/passwd", "scheme 'file'"),
    ("a token in the query", "http://n0:8888/lab?token=abc", "query or fragment"),
    ("a fragment", "http://n0:8888/#secret", "query or fragment"),
    ("an empty fragment (found by the property below)", "http://n0:8888/#", "query or fragment"),
    ("an empty query", "http://n0:8888/lab?", "query or fragment"),
    ("user and password", "http://me:pw@n0:8888/", "user or password"),
    ("no port", "gpu-07", "URL .* or host:port"),
    ("port 0", "gpu-07:0", "port from 1 to 65535"),
    ("port too big", "gpu-07:70000", "port"),
    ("spaces", "http://n0:8888/a b", "printable ASCII"),
    ("two lines", "n0:8888\nn1:8888", "printable ASCII"),
    ("non-ASCII", "http://gpü:80/", "printable ASCII"),
    ("bad host", "bad_host!:8080", "no host name"),
    ("bad IPv6", "[zz::1]:80", "no IPv6"),
    ("too long", "http://n0:80/" + "a" * 300, "limit is 300"),
    ("no host", "http:///path", "names no host"),
]


@pytest.mark.parametrize(("case", "address", "problem"), BAD, ids=[c[0] for c in BAD])
def test_bad_addresses_are_refused_naming_the_problem(case: str, address: str, problem: str) -> None:
    found = session_address_problem(address)
    assert found is not None and re.search(problem, found), found


def test_a_running_session_publishes_its_address_once() -> None:
    state = session(at=0.0)
    (event,) = decide(state, ReportSessionAddress("j1", 1, "http://n0:8888/lab", 5.0), 6.0)
    assert event.type == "SessionAddressPublished"
    assert event.payload == {"job_id": "j1", "attempt": 1, "address": "http://n0:8888/lab", "published_at": 5.0,
                             "reported_at": 6.0}
    validate("SessionAddressPublished", 1, event.payload)
    state = apply(state, ReportSessionAddress("j1", 1, "http://n0:8888/lab", 5.0), now=6.0)
    assert state.jobs["j1"].session_address == "http://n0:8888/lab"
    assert decide(state, ReportSessionAddress("j1", 1, "http://n0:8888/lab", 7.0), 8.0) == []  # no news
    state = apply(state, ReportSessionAddress("j1", 1, "n0:9999"), now=9.0)  # a new address replaces it
    assert state.jobs["j1"].session_address == "n0:9999"


REFUSED = [
    ("a batch job", lambda: running(at=0.0), ReportSessionAddress("j1", 1, "n0:8888"), InvalidTransition,
     "not an interactive session"),
    ("an earlier attempt", lambda: session(at=0.0), ReportSessionAddress("j1", 0, "n0:8888"), InvalidTransition,
     "attempt 1, report is for 0"),
    ("a bad address", lambda: session(at=0.0), ReportSessionAddress("j1", 1, "javascript:alert(1)"), InvalidCommand,
     "session address"),
]


@pytest.mark.parametrize(("case", "state", "command", "error", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_reports(case: str, state: object, command: ReportSessionAddress, error: type[Exception],
                         message: str) -> None:
    s = state()  # type: ignore[operator]
    with pytest.raises(error, match=message):
        decide(s, command, 10.0)
    (event,) = decide_or_reject(s, command, 10.0)
    assert event.type == "CommandRejected"


def _published(at: float = 0.0) -> object:
    return apply(session(at=at), ReportSessionAddress("j1", 1, "http://n0:8888/lab", at + 1), now=at + 1)


def test_the_address_goes_with_the_attempt_that_published_it() -> None:
    """Stale addresses from an earlier attempt never show: the address is cleared when the attempt ends
    (preempted, lost, stopped at its cap, finished) and a new placement starts without one."""
    state = _published()
    state = apply(state, RequestPreemption("j1", "operator", grace_s=1.0), now=100.0)
    state = apply(state, ReportJobPreempted("j1", 1, "operator", 0), now=101.0)
    assert state.jobs["j1"].session_address is None
    state = apply(state, PlaceJob("j1", {"n0": [0]}, funded=True), now=102.0)
    assert state.jobs["j1"].attempt == 2 and state.jobs["j1"].session_address is None
    state = apply(state, ReportJobStarted("j1", 2, 99, 103.0), now=103.0)
    with pytest.raises(InvalidTransition, match="attempt 2, report is for 1"):
        decide(state, ReportSessionAddress("j1", 1, "http://n0:8888/lab"), 104.0)

    lost = apply(_published(), ReportJobLost("j1", 1, "executor silent"), now=50.0)
    assert lost.jobs["j1"].session_address is None
    ended = apply(_published(), ReportJobExited("j1", 1, 0), now=50.0)
    assert ended.jobs["j1"].state == "COMPLETED" and ended.jobs["j1"].session_address is None


@given(st.text(max_size=40), st.sampled_from(SESSION_ADDRESS_SCHEMES))
def test_an_accepted_address_is_one_printable_word_without_credentials(path: str, scheme: str) -> None:
    for address in (f"{scheme}://n0:8888/{path}", path):
        if session_address_problem(address) is None:
            assert address.isascii() and address.isprintable() and " " not in address
            assert "?" not in address and "#" not in address and "@" not in address.split("/")[2 if "://" in
                                                                                             address else 0]

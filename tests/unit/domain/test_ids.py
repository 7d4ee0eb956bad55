"""Ids are not paths (issue 21): one pattern for the names Steward gives things, checked by the ledger's
decoder where a name is born (so a command produced straight onto Kafka cannot bypass the API), names
recorded before the rule still replay, and every path built from a name stays under its root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steward.domain.commands import CancelJob, SubmitJob
from steward.domain.commands import command_from_dict as replay_decoder
from steward.domain.decoding import command_from_dict as ledger_decoder
from steward.domain.errors import InvalidCommand
from steward.domain.ids import ID_MAX_LENGTH, id_problem
from steward.paths import UnsafePath, is_under, under

HOSTILE = [
    ("parent", "../../../../../x"),
    ("dot dot", ".."),
    ("dot", "."),
    ("hidden", ".ssh"),
    ("absolute", "/etc/passwd"),
    ("separator", "a/b"),
    ("backslash", "a\\b"),
    ("newline", "job\nfake log line"),
    ("carriage return", "job\r"),
    ("NUL", "job\x00"),
    ("right-to-left override", "job\u202egpj.exe"),
    ("zero width space", "job\u200b"),
    ("non-ASCII letter", "jöb"),
    ("space", "my job"),
    ("leading dash (an option)", "-rf"),
    ("empty", ""),
    ("too long", "j" * (ID_MAX_LENGTH + 1)),
]

ACCEPTED = ["j1", "g00042", "p00000", "7f04ca", "103959", "lease-3-17", "s-0a1b2c3d4e5f", "node-007", "a.b_c-d",
            "J" * ID_MAX_LENGTH]


@pytest.mark.parametrize(("name", "value"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_ids_are_named_and_refused(name: str, value: str) -> None:
    assert id_problem(value) is not None


@pytest.mark.parametrize("value", ACCEPTED)
def test_the_ids_of_the_demo_the_traces_and_the_generated_scenarios_are_accepted(value: str) -> None:
    assert id_problem(value) is None


def submit_payload(job_id: str) -> dict[str, Any]:
    return {"job_id": job_id, "project": "a1", "gpus": 1, "min_runtime_s": 60.0, "command": ["true"]}


BORN = [
    ("SubmitJob", lambda bad: submit_payload(bad), "job_id"),
    ("RestoreSession", lambda bad: {"job_id": "s1", "new_job_id": bad}, "new_job_id"),
    ("RegisterNode", lambda bad: {"node_id": bad, "gpus": 8, "gpu_model": "V100", "path": ["b0"]}, "node_id"),
    ("RegisterNode", lambda bad: {"node_id": "n1", "gpus": 8, "gpu_model": "V100", "path": ["b0"], "executor": bad},
     "executor"),
    ("SetAllocations", lambda bad: {"parent": "cluster", "shares": {bad: 0.5}, "reason": "r"}, "org tree node"),
]


@pytest.mark.parametrize(("kind", "payload", "field"), BORN, ids=[f"{b[0]}.{b[2]}" for b in BORN])
@pytest.mark.parametrize(("name", "bad"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_the_ledger_decoder_refuses_a_hostile_id_where_it_is_born(kind: str, payload: Any, field: str, name: str,
                                                                   bad: str) -> None:
    with pytest.raises(InvalidCommand) as refused:
        ledger_decoder(kind, payload(bad))
    message = str(refused.value)
    assert message.startswith(field) and "\n" not in message and "\x00" not in message and "\u202e" not in message


def test_a_command_that_only_refers_to_a_name_is_not_refused_by_the_pattern() -> None:
    """Jobs recorded before the rule keep being addressable (a cancel, a report): an unknown name is
    refused by `decide` as unknown, a known one was accepted when it was born."""
    assert ledger_decoder("CancelJob", {"job_id": "old job/with a slash"}) == CancelJob("old job/with a slash")


def test_ids_recorded_before_the_rule_still_decode_for_replay() -> None:
    """`steward audit replay` reads the recorded command back with the decoder without the id rule, so a
    log holding `../x` replays to the same decision it recorded."""
    assert replay_decoder("SubmitJob", submit_payload("../x")) == SubmitJob("../x", "a1", 1, 60.0, ["true"])
    with pytest.raises(InvalidCommand):
        ledger_decoder("SubmitJob", submit_payload("../x"))


# -- paths -----------------------------------------------------------------------------------------

hostile_text = st.one_of(
    st.sampled_from([h[1] for h in HOSTILE]),
    st.text(min_size=0, max_size=40),
    st.lists(st.sampled_from(["..", ".", "/", "\\", "\x00", "\n", "\u202e", "a", "~", "$HOME"]), max_size=8)
    .map("".join),
    st.builds(lambda s: "/" + s, st.text(max_size=20)),
)


@given(st.lists(hostile_text, min_size=1, max_size=3))
def test_a_path_built_from_any_ids_is_under_its_root_or_refused(parts: list[str]) -> None:
    root = Path("/srv/steward/executor/e1")
    try:
        path = under(root, *parts)
    except UnsafePath as err:
        assert "\n" not in str(err) and "\x00" not in str(err)
        return
    assert all(id_problem(p) is None for p in parts)
    assert os.path.commonpath([root, path]) == str(root) and path != root
    assert ".." not in path.parts and path.parts[:len(root.parts)] == root.parts


def test_under_joins_valid_names() -> None:
    assert under(Path("/r"), "jobs", "j1", "attempt-2.json") == Path("/r/jobs/j1/attempt-2.json")


def test_is_under_follows_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    (root / "j1").mkdir(parents=True)
    (root / "escape").symlink_to("/etc")
    assert is_under(root, root / "j1")
    assert not is_under(root, root / "escape")
    assert not is_under(root, "/etc/passwd") and not is_under(root, root) and not is_under(root, root / "..")

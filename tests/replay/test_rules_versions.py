"""A log written before rule changes replays as it was decided (ADR 0038, issue 19 "replay across rule
changes"). `logs/before-rules-v2.ndjson.gz` was recorded by the ledger of the commit before 479c496
(tests/replay/record_before_rules.py, run with that release's code): it accepted a job larger than the
cluster, names outside today's id pattern and the policy setting `lane_hold_s`, and its decisions record no
rules version. Today's rules decide four of its 14 decisions differently (measured before this change:
10 reproduced, 4 different); replayed under the rules each was made under, all 14 reproduce. A decision
that records its version is replayed under that version alone, so the newest rules cannot excuse it."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from steward.audit.replay import records_from_export, replay_records
from steward.domain import rules_version
from steward.domain.decide import decide_or_reject
from steward.store.eventstore import RecordedEvent

LOGS = Path(__file__).resolve().parent / "logs"
BEFORE = LOGS / "before-rules-v2.ndjson.gz"
REPO = Path(__file__).resolve().parents[2]


def test_the_log_holds_what_todays_rules_decide_differently() -> None:
    records = records_from_export(BEFORE)
    assert all("rules" not in r.metadata for r in records)
    by_type = {(r.type, r.stream_id) for r in records}
    assert ("JobSubmitted", "job-too-big") in by_type and ("JobSubmitted", "job-job with spaces") in by_type
    assert any(r.type == "PolicySet" and "lane_hold_s" in r.payload["changed"] for r in records)
    assert any(r.type == "AllocationsSet" and "team a" in r.payload["shares"] for r in records)


def test_a_log_from_before_the_rule_changes_replays_as_identical() -> None:
    report = replay_records(records_from_export(BEFORE))
    assert (report["events"], report["decisions"], report["reproduced"]) == (14, 14, 14), report
    assert report["ok"] and report["different"] == report["unreplayable"] == 0
    assert report["by_rules"] == {"1": 1, "2": 3, "3": 10}
    earlier = {e["position"]: (e["command"], e["rules"], e["changes"]) for e in report["under_earlier_rules_decisions"]}
    assert earlier == {  # the changes of version 4 (ADR 0082, 0086) came after every unversioned decision
        5: ("SetPolicy", 2, ["lane_hold_retired"]),
        6: ("SetPolicy", 2, ["lane_hold_retired"]),  # its recorded settings still carry lane_hold_s
        7: ("SubmitJob", 1, ["id_pattern", "placeable", "lane_hold_retired"]),  # 64 GPUs on a 16-GPU cluster
        14: ("SetPolicy", 2, ["lane_hold_retired"]),
    }


def stamped(records: list[RecordedEvent], rules: int) -> list[RecordedEvent]:
    return [dataclasses.replace(r, metadata=r.metadata | {"rules": rules}) if r.message_id else r for r in records]


def test_a_recorded_version_is_the_only_one_a_decision_is_replayed_under() -> None:
    """Stamped with today's version, the old decisions are what today's rules decide differently: listed."""
    report = replay_records(stamped(records_from_export(BEFORE), rules_version.CURRENT))
    assert report["different"] == 4 and not report["ok"]
    assert [d["position"] for d in report["differences"]] == [5, 6, 7, 14]
    assert "largest placement" in report["differences"][2]["first_difference"]
    # stamped with the first version, every decision reproduces under it
    first = replay_records(stamped(records_from_export(BEFORE), rules_version.FIRST))
    assert first["ok"] and first["by_rules"] == {"1": 14} and first["under_earlier_rules"] == 0


def test_a_version_this_release_does_not_know_is_unreplayable_with_the_reason() -> None:
    records = stamped(records_from_export(BEFORE), rules_version.CURRENT + 1)
    report = replay_records(records)
    assert report["unreplayable"] == 14 and not report["ok"]
    assert f"rules version {rules_version.CURRENT + 1} is not one this release knows" in \
        report["unreplayable_decisions"][0]["reason"]


def test_the_cli_lists_the_decisions_reproduced_under_earlier_rules() -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(BEFORE)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^reproduced +14$", proc.stdout, re.M), proc.stdout
    assert "earlier rules at 7" in proc.stdout and "before id_pattern, placeable" in proc.stdout


@pytest.mark.parametrize(("name", "version", "expected"), [
    ("placeable", 1, False), ("placeable", 2, True), ("id_pattern", 2, True),
    ("lane_hold_retired", 2, False), ("lane_hold_retired", 3, True),
    ("registration_keeps_state", 3, False), ("node_gpus_bounded", 4, True),
])
def test_patched_names_the_version_a_change_came_in(name: str, version: int, expected: bool) -> None:
    assert rules_version.patched(name, version) is expected


def test_an_unknown_change_name_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="no rule change named 'nope'"):
        rules_version.patched("nope", 3)


def test_the_ledger_records_the_rules_version_with_each_decision(tmp_path: Path) -> None:
    from steward.domain.commands import SetAllocations
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade
    from tests.unit.api.harness import record

    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    record(store, [SetAllocations("cluster", {"a": 1.0}, reason="tree")])
    (rec,) = store.read()
    assert rec.metadata["rules"] == rules_version.CURRENT


def test_todays_rules_are_the_default_of_decide() -> None:
    from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
    from steward.domain.state import LedgerState
    from steward.store.projections import Projector

    proj = Projector()
    for c in (SetAllocations("cluster", {"p": 1.0}, reason="t"), RegisterNode("n1", 8, "V100", ["b", "n1"])):
        for ev in decide_or_reject(proj.view(), c, 1.0):
            proj.apply(ev, 1.0, 1)
    state: LedgerState = proj.view()
    big = SubmitJob("big", "p", 64, 0, ["x"])
    assert decide_or_reject(state, big, 2.0)[0].type == "CommandRejected"
    assert decide_or_reject(state, big, 2.0, rules_version.CURRENT)[0].type == "CommandRejected"
    assert decide_or_reject(state, big, 2.0, 1)[0].type == "JobSubmitted"


@pytest.mark.parametrize(("rules", "settings", "outcome"), [
    (2, {"lane_hold_s": 30.0}, "PolicySet"),
    (2, {"lane_hold_s": -1.0}, "invalid policy settings: setting 'lane_hold_s': must be >= 0 (or null: no hold)"),
    (2, {"lane_hold_s": None}, "PolicySet"),
    (3, {"lane_hold_s": 30.0}, "retired policy setting(s): lane_hold_s"),
    (1, {"lane_project_gpus": 4}, "retired policy setting(s): lane_project_gpus"),  # retired before version 1
    (3, {"settle_s": 10.0}, "PolicySet"),
    (5, {"gpu_model_weights": {"V100": 0}}, "PolicySet"),  # ADR 0098: a model's hours were made free
    (6, {"gpu_model_weights": {"V100": 0}}, "the weight of 'V100' must be > 0 (budget units per GPU-hour), got 0"),
    (6, {"gpu_model_weights": {"V100": float("nan")}}, "the weight of 'V100' must be a finite number, got nan"),
    (6, {"gpu_model_weights": {"V100": 0.25}}, "PolicySet"),
])
def test_a_policy_change_is_checked_under_the_rules_of_its_version(rules: int, settings: dict[str, object],
                                                                    outcome: str) -> None:
    from steward.domain.commands import SetPolicy
    from steward.domain.state import LedgerState

    (ev,) = decide_or_reject(LedgerState({}, {}, {}, {}, {}), SetPolicy(dict(settings), reason="r"), 1.0, rules)
    assert ev.type == outcome if outcome == "PolicySet" else outcome in ev.payload["reason"], ev


def test_under_todays_rules_a_recorded_retired_setting_leaves_the_settings_in_force() -> None:
    from steward.domain.commands import SetPolicy
    from steward.domain.state import LedgerState

    state = LedgerState({}, {}, {}, {}, {"lane_hold_s": 120.0, "settle_s": 30.0})
    (now,) = decide_or_reject(state, SetPolicy({"claim_hold_s": 5.0}, reason="r"), 1.0)
    (then,) = decide_or_reject(state, SetPolicy({"claim_hold_s": 5.0}, reason="r"), 1.0, 2)
    assert now.payload["settings"] == {"settle_s": 30.0, "claim_hold_s": 5.0}
    assert then.payload["settings"] == {"lane_hold_s": 120.0, "settle_s": 30.0, "claim_hold_s": 5.0}


BEFORE_V4 = LOGS / "before-rules-v4.ndjson.gz"  # tests/replay/record_before_rules_v4.py, with 5abf03c's code


def test_a_log_from_before_adr_0082_replays_as_it_was_decided() -> None:
    """Recorded under rules 3: a drained node registered again was ready (and placed on), a retiring one registered
    again was ready (its last attempt's end retired nothing), 80,000 and 2^31-1 GPUs were registered. Each decision
    records version 3 and is replayed under it alone: all reproduce."""
    records = records_from_export(BEFORE_V4)
    assert {r.metadata.get("rules") for r in records} == {3}
    report = replay_records(records)
    assert (report["events"], report["decisions"], report["reproduced"]) == (20, 20, 20), report
    assert report["ok"] and report["by_rules"] == {"3": 20} and report["under_earlier_rules"] == 0


def test_todays_rules_decide_the_re_registrations_and_the_counts_of_that_log_differently() -> None:
    """Stamped with version 4, the registrations of a draining or retiring node keep its state and the two counts
    above the bound are refused; the placement on n1 and the job ends reproduce (the fold follows the recorded
    events, ready then)."""
    report = replay_records(stamped(records_from_export(BEFORE_V4), 4))
    assert [d["position"] for d in report["differences"]] == [6, 8, 16, 19, 20], report["differences"]
    assert report["reproduced"] == 15
    kept = {d["position"]: d["replayed"][0]["payload"].get("state") for d in report["differences"][:3]}
    assert kept == {6: "draining", 8: "draining", 16: "retiring"}
    assert [d["replayed"][0]["type"] for d in report["differences"][3:]] == ["CommandRejected"] * 2


def test_the_cli_replays_the_log_from_before_adr_0082() -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(BEFORE_V4)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^reproduced +20$", proc.stdout, re.M), proc.stdout


def test_a_log_of_today_with_a_kept_state_replays_as_identical(tmp_path: Path) -> None:
    """A registration that keeps a draining node's state (its payload's `state`) is read back and re-decided to
    the same event; the node stays draining in the replay's fold, so a placement there is refused again."""
    from steward.audit.replay import replay
    from steward.domain.commands import DrainNode, PlaceJob, RegisterNode, SetAllocations, SubmitJob
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade
    from tests.unit.api.harness import record

    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    record(store, [SetAllocations("cluster", {"p": 1.0}, reason="tree"), RegisterNode("n1", 8, "V100", ["b", "n1"]),
                   DrainNode("n1", "repair"), RegisterNode("n1", 4, "V100", ["b", "n1"]),
                   SubmitJob("j", "p", 1, 0, ["x"]), PlaceJob("j", {"n1": [0]}, True, {"policy": "test"})])
    kinds = [(r.type, r.payload.get("state")) for r in store.read()]
    assert kinds[3] == ("NodeRegistered", "draining") and kinds[-1][0] == "CommandRejected"
    report = replay(store)
    assert report["ok"] and report["reproduced"] == report["decisions"] == 6
    assert report["by_rules"] == {str(rules_version.CURRENT): 6}


# tests/replay/record_before_restore_request.py, with 7e99307's code
BEFORE_V4_RESTORE = LOGS / "before-rules-v4-restore.ndjson.gz"


def test_a_restore_recorded_under_rules_3_replays_as_identical_and_differs_under_4() -> None:
    """ADR 0086: a session restored under rules 3 accepted any GPU model and cluster (the recorded JobSubmitted
    of the restored session has empty lists); today's rules keep the old session's A100 in jupiter. Replayed
    under its recorded version the log is identical; stamped with version 4, the restore is the one difference."""
    records = records_from_export(BEFORE_V4_RESTORE)
    restored = next(r for r in records if r.type == "JobSubmitted" and r.stream_id == "job-s2")
    assert (restored.payload["gpu_models"], restored.payload["clusters"]) == ([], [])
    report = replay_records(records)
    assert report["ok"] and report["different"] == report["unreplayable"] == 0, report
    assert report["by_rules"] == {"3": report["decisions"]}
    later = replay_records(stamped(records, 4))
    assert later["different"] == 1 and not later["ok"]
    [diff] = later["differences"]
    assert diff["command"] == "RestoreSession", diff


@pytest.mark.parametrize(("log", "otherwise", "changes"), [
    # unversioned decisions reproduced under 1 and 2: today's rules refuse the retired setting and the 64-GPU job
    ("before-rules-v2.ndjson.gz", {5: "SetPolicy", 6: "SetPolicy", 7: "SubmitJob", 14: "SetPolicy"},
     {"lane_hold_retired"}),
    # decisions recorded under 3 (ADR 0082): a drained or retiring node registered again keeps its state, and the
    # counts above 1,024 GPUs are refused; the version-3 replay alone calls all of them reproduced
    ("before-rules-v4.ndjson.gz", {6: "RegisterNode", 8: "RegisterNode", 16: "RegisterNode", 19: "RegisterNode",
                                   20: "RegisterNode"}, {"registration_keeps_state", "node_gpus_bounded"}),
    # recorded under 3 (ADR 0086): the restored session accepted any cluster then, the session's clusters today
    ("before-rules-v4-restore.ndjson.gz", {8: "RestoreSession"}, {"restore_keeps_request"}),
    # recorded under 4 (ADR 0091): registrations beside another executor, a registration that reset foreign load,
    # restores of a request no node or pin admits any more
    ("before-rules-v5.ndjson.gz", {3: "RegisterNode", 5: "RegisterNode", 6: "RegisterNode", 8: "RegisterNode",
                                   16: "RestoreSession", 23: "RestoreSession"},
     {"one_executor_a_cluster", "registration_keeps_foreign", "restore_checks_request"}),
    # recorded under 5 (ADR 0098): a policy change that made the V100's hours free
    ("before-rules-v6.ndjson.gz", {4: "SetPolicy"}, {"model_weights_positive"}),
])
def test_the_decisions_todays_rules_decide_otherwise_are_listed(log: str, otherwise: dict[int, str],
                                                               changes: set[str]) -> None:
    """Every reproduced decision made under earlier rules is decided again under today's; those decided otherwise
    are listed with the version they were made under and the rule changes since, whether the decision records its
    version or not (before, a decision recorded under 3 that today's rules decide otherwise was shown to no one)."""
    report = replay_records(records_from_export(LOGS / log))
    assert report["ok"] and report["decided_otherwise_today"] == len(otherwise), report
    listed = report["decided_otherwise_today_decisions"]
    assert {d["position"]: d["command"] for d in listed} == otherwise
    for d in listed:
        assert d["rules"] < rules_version.CURRENT and d["first_difference"]
        assert set(d["changes"]) == {c.name for c in rules_version.CHANGES if c.version > d["rules"]}
    assert changes <= set().union(*(d["changes"] for d in listed))


def test_a_log_decided_under_todays_rules_has_nothing_decided_otherwise(tmp_path: Path) -> None:
    from steward.audit.replay import replay
    from steward.domain.commands import RegisterNode, SetAllocations, SubmitJob
    from steward.store.eventstore import EventStore
    from steward.store.migrate import upgrade
    from tests.unit.api.harness import record

    url = f"sqlite:///{tmp_path / 's.db'}"
    upgrade(url)
    store = EventStore.from_url(url)
    record(store, [SetAllocations("cluster", {"p": 1.0}, reason="tree"), RegisterNode("n1", 8, "V100", ["b", "n1"]),
                   SubmitJob("j", "p", 1, 0, ["x"])])
    report = replay(store)
    assert report["ok"] and report["decided_otherwise_today"] == 0 and report["decided_otherwise_today_decisions"] == []


def test_the_cli_says_what_todays_rules_decide_otherwise() -> None:
    log = LOGS / "before-rules-v4.ndjson.gz"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(log)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "otherwise today at 19" in proc.stdout and "made under rules v3" in proc.stdout, proc.stdout
    assert "registration_keeps_state" in proc.stdout


BEFORE_V5 = LOGS / "before-rules-v5.ndjson.gz"  # tests/replay/record_before_rules_v5.py, with cf11843's code


def test_a_log_from_before_adr_0091_replays_as_it_was_decided() -> None:
    """Recorded under rules 4: a second executor's nodes in `jupiter` and in the default cluster, a registration that
    reset d1's foreign load, restores of a V100 session after the last V100 left and of a session outside its
    project's new pin. Each decision records version 4 and is replayed under it alone: all reproduce."""
    records = records_from_export(BEFORE_V5)
    assert {r.metadata.get("rules") for r in records if r.message_id} == {4}
    report = replay_records(records)
    assert report["ok"] and report["different"] == report["unreplayable"] == 0, report
    assert report["by_rules"] == {"4": report["decisions"]} and report["under_earlier_rules"] == 0


def test_rules_5_decide_the_registrations_and_restores_of_that_log_differently() -> None:
    """Stamped with version 5: the two registrations beside another executor are refused (and so is v1's, of `local`
    in the default cluster where the recorded d2 of `k8s` now is), the registration of d1 keeps its 6 foreign GPUs,
    and the two restores are refused; every other decision (the placements on d1 among them: the fold follows the
    recorded events) reproduces."""
    report = replay_records(stamped(records_from_export(BEFORE_V5), 5))
    by_position = {d["position"]: d for d in report["differences"]}
    assert sorted(by_position) == [3, 5, 6, 8, 16, 23], report["differences"]
    assert report["reproduced"] == report["decisions"] - 6
    for position in (3, 5, 6):
        (ev,) = by_position[position]["replayed"]
        assert ev["type"] == "CommandRejected" and "A cluster has one executor" in ev["payload"]["reason"]
    assert by_position[8]["replayed"][0]["payload"]["foreign_gpus"] == 6
    for position, words in ((16, "unknown GPU model 'V100'"), (23, "pinned to cluster 'jupiter'")):
        (ev,) = by_position[position]["replayed"]
        assert ev["type"] == "CommandRejected" and words in ev["payload"]["reason"], ev


def test_the_cli_replays_the_log_from_before_adr_0091() -> None:
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "steward"), "audit", "replay", "--export", str(BEFORE_V5)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


BEFORE_V6 = LOGS / "before-rules-v6.ndjson.gz"  # tests/replay/record_before_rules_v6.py, with c71363a's code


def test_a_log_from_before_adr_0098_replays_as_it_was_decided() -> None:
    """Recorded under rules 5: a `SetPolicy` weighing the V100 at 0, a job run on the V100 meanwhile, a `SetPolicy`
    weighing it at 0.25. Each decision records version 5 and is replayed under it alone: all reproduce."""
    records = records_from_export(BEFORE_V6)
    assert {r.metadata.get("rules") for r in records if r.message_id} == {5}
    report = replay_records(records)
    assert report["ok"] and report["different"] == report["unreplayable"] == 0, report
    assert report["by_rules"] == {"5": report["decisions"]} and report["under_earlier_rules"] == 0


def test_rules_6_refuse_the_free_weight_of_that_log() -> None:
    """Stamped with version 6: the weight of 0 is refused with the rule `SetGpuModelWeights` applies; the rest (the
    job on the V100, the weight of 0.25) reproduces."""
    report = replay_records(stamped(records_from_export(BEFORE_V6), 6))
    (difference,) = report["differences"]
    assert difference["position"] == 4 and report["reproduced"] == report["decisions"] - 1
    (ev,) = difference["replayed"]
    assert ev["type"] == "CommandRejected" and "the weight of 'V100' must be > 0" in ev["payload"]["reason"], ev

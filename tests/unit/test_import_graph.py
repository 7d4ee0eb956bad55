"""`python -m steward.tools.import_graph` draws the packages' imports (docs/architecture.md); the only arrows
it draws dashed (against the layers of pyproject.toml) are the ones the layers contract names in its
ignore_imports (ADR 0040)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from steward.tools.import_graph import layers, main, mermaid, package_edges

ROOT = Path(__file__).resolve().parents[2]


def test_the_layers_come_from_the_contract() -> None:
    stack = layers(ROOT / "pyproject.toml")
    assert stack[0] == ["steward.bench", "steward.demo", "steward.tools"]
    assert stack[-2:] == [["steward.policy"], ["steward.domain"]]


def test_the_only_arrows_up_are_the_ignored_ones() -> None:
    drawing = mermaid(package_edges(ROOT), layers(ROOT / "pyproject.toml"))
    up = set(re.findall(r"(\w+) -\. UP \d+ \.-> (\w+)", drawing))
    assert up <= {("steward_executor", "steward_workflows"), ("steward_store", "steward_audit")}
    assert ("steward_domain", "steward_policy") not in up


def test_an_arrow_up_is_drawn_dashed() -> None:
    drawing = mermaid(Counter({("steward.domain", "steward.policy"): 2, ("steward.api", "steward.store"): 5}),
                      [["steward.api"], ["steward.store"], ["steward.policy"], ["steward.domain"]])
    assert "steward_domain -. UP 2 .-> steward_policy" in drawing
    assert "steward_api -- 5 --> steward_store" in drawing


def test_main_prints_a_mermaid_flowchart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--root", str(ROOT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart TD") and "steward_api -- " in out

"""`steward sim --help` and `steward bench NAME --help` show the options their own parsers take (issue 20):
Typer passes `--help` through to them instead of answering it with an empty list of its own."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from steward.cli.main import app, benchmarks
from steward.cli.output import CliError

RUNNER = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = RUNNER.invoke(app, list(args))
    return result.exit_code, result.output


def test_sim_help_lists_the_simulators_options() -> None:
    code, out = run("sim", "--help")
    assert code == 0
    for option in ("--scenario", "--policy", "--compare", "--set", "--json", "--workers"):
        assert option in out


@pytest.mark.parametrize(("name", "option"), [
    ("cycle", "--pending"), ("replay", "--events"), ("sim", "--scenario"), ("ingest", "--events"),
    ("outlook", "--repeat"), ("suite", "--quick"),
])
def test_bench_name_help_lists_the_benchmarks_options(name: str, option: str) -> None:
    code, out = run("bench", name, "--help")
    assert code == 0
    assert f"usage: steward bench {name}" in out and option in out


def test_bench_help_lists_the_benchmarks() -> None:
    code, out = run("bench", "--help")
    assert code == 0
    assert "benchmarks: " in out and "cycle" in out and "replay" in out


@pytest.mark.parametrize(("args", "problem"), [
    (("bench",), "name a benchmark: "),
    (("bench", "nope"), "unknown benchmark 'nope'"),
])
def test_a_missing_or_unknown_benchmark_is_a_one_line_error(args: tuple[str, ...], problem: str) -> None:
    err = RUNNER.invoke(app, list(args)).exception  # steward.cli.main.main prints it as one line, exit 2
    assert isinstance(err, CliError) and err.code == 2
    assert problem in err.message


def test_every_benchmark_is_found() -> None:
    assert {"api", "cycle", "ingest", "lease", "outlook", "replay", "sim", "soak", "suite"} <= set(benchmarks())
    assert "procfs" not in benchmarks()  # a helper module, not a benchmark

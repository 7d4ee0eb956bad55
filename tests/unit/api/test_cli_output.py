"""Issue 7 "CLI": every command takes `--output table|json`, except the ones that run a process in the
foreground (their output is that process's log) or print a benchmark's JSON by design."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from typer.main import get_command

from steward.cli.main import app

# command -> why it has no --output
FOREGROUND_OR_JSON = {
    "run": "runs one service in the foreground (its log is the output)",
    "migrate": "applies the store's migrations, printing Alembic's log",
    "executor sim": "runs a simulated executor in the foreground",
    "bench": "prints the benchmark's JSON (`--json`), passing its own options through",
    "sim": "prints the simulator's JSON, passing its own options through",
}


def commands(c: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if hasattr(c, "commands"):
        for name, sub in c.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield " ".join(path), c


def test_every_command_takes_output_table_or_json() -> None:
    seen = dict(commands(get_command(app)))
    assert len(seen) > 30
    missing = {name for name, c in seen.items() if "output" not in {p.name for p in c.params}}
    assert missing == set(FOREGROUND_OR_JSON), missing ^ set(FOREGROUND_OR_JSON)
    for name, c in seen.items():
        option = next((p for p in c.params if p.name == "output"), None)
        assert option is None or "--output" in option.opts, name

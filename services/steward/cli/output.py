"""Output for every command: `--output table|json`; errors to stderr, one line that says what to do."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer

from steward import text


class OutputFormat(StrEnum):
    table = "table"
    json = "json"


OutputOption = typer.Option(OutputFormat.table, "--output", "-o", help="table or json")


class CliError(Exception):
    """A user-facing failure: printed as one line on stderr, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def read_text(path: Path, what: str) -> str:
    """A file the user named, as UTF-8 text; a file that cannot be read or is not UTF-8 is one line naming it
    (exit 2), not an internal error."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        fail(f"cannot read {what} {path}: {err.strerror or err}", 2)
    except UnicodeDecodeError as err:
        fail(f"{what} {path} is {text.not_utf8(err)}", 2)


def emit(data: Any, fmt: OutputFormat, table: Sequence[Sequence[Any]] | None = None,
         headers: Sequence[str] | None = None) -> None:
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        return
    if table is None:
        if isinstance(data, dict):
            table = [[k, v if not isinstance(v, dict | list) else json.dumps(v)] for k, v in data.items()]
            headers = headers or ["field", "value"]
        else:
            sys.stdout.write(f"{data}\n")
            return
    rows = [[str(c) for c in row] for row in table]
    cols = list(headers or [])
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows, strict=False)] if rows or cols else []
    if cols:
        sys.stdout.write("  ".join(h.upper().ljust(w) for h, w in zip(cols, widths, strict=False)).rstrip() + "\n")
    for row in rows:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() + "\n")

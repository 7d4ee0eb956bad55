"""The simulator's errors: one base class, each message one line naming the file and the line or node."""

from __future__ import annotations

from pathlib import Path

from steward import text


class SimError(Exception):
    """Base of every error the simulator reports to a person (bad input, unknown policy, bad override)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ScenarioError(SimError):
    """A scenario YAML or trace CSV that cannot be simulated; the message names the line or node."""


class UnknownPolicy(SimError):
    """A policy name that is not one of the presets."""


class OverrideError(SimError):
    """A `--set KEY=VALUE` that names nothing we know, or whose value does not fit."""


class SimulationFailed(SimError):
    """The policy returned a decision the simulated cluster cannot carry out (a policy bug)."""


def not_utf8(where: str, err: UnicodeDecodeError) -> ScenarioError:
    """A file of the simulator's (scenario YAML, trace CSV, event log) that is not UTF-8 text: named, with the
    first byte that is not, instead of a UnicodeDecodeError."""
    return ScenarioError(f"{where}: {text.not_utf8(err)}; save it as UTF-8")


def out_folder(out: str | Path) -> Path:
    """`--out DIR` made (with its parents), or the reason it cannot be, as one line naming the folder."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise SimError(f"--out {folder}: a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimError(f"--out {folder}: cannot create ({exc.strerror or exc})") from None
    return folder


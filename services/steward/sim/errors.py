"""The simulator's errors: one base class, each message one line naming the file and the line or node."""

from __future__ import annotations


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

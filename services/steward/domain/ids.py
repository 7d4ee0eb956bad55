"""The one pattern of a name Steward gives a thing (a job, a session, a node, a project or any node of the
org tree, an executor): ASCII letters and digits, then letters, digits, `.`, `_` or `-`, 100 characters
at most (docs/api.md "Ids"). Such a name is one path component on every system: no separator, no `..`,
no absolute path, no control or invisible character, no right-to-left override, no NUL.

A name is checked where it is born: the command that introduces it (`SubmitJob`, `RestoreSession`,
`RegisterNode`, `SetAllocations`) is refused by the ledger's decoder (`steward.domain.decoding`), so a
command produced straight onto Kafka cannot bypass the API's check. A command that only refers to a
name (cancel, report, place) needs no check: a name the state does not hold is unknown, one it holds
was accepted when it was born. Names already recorded before this rule replay unchanged (the replay's
decoder does not check them: `steward audit replay` reproduces what was decided then)."""

from __future__ import annotations

import re
from typing import Final

from steward.domain.commands import Command, RegisterNode, RestoreSession, SetAllocations, SubmitJob
from steward.domain.errors import InvalidCommand

ID_MAX_LENGTH: Final = 100
ID_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
ID_RULE: Final = ("1 to 100 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit")
_ID = re.compile(ID_PATTERN)


def id_problem(value: object) -> str | None:
    """Why `value` is not a valid id, in a few words (None when it is one)."""
    if not isinstance(value, str):
        return f"must be text, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > ID_MAX_LENGTH:
        return f"is {len(value)} characters long, the limit is {ID_MAX_LENGTH}"
    if _ID.fullmatch(value) is None:
        return f"must be {ID_RULE}"
    return None


def shown(value: object) -> str:
    """`value` for an error message: escaped (a newline, NUL or bidi override is shown, never acted on)
    and cut to 80 characters."""
    text = ascii(value) if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def require_id(what: str, value: object) -> None:
    """Refuse `value` as the id `what` (e.g. "job_id") unless it follows the id pattern."""
    problem = id_problem(value)
    if problem is not None:
        raise InvalidCommand(f"{what} {shown(value)} {problem}")


def require_new_ids(command: Command) -> None:
    """The ids a command introduces follow the id pattern (see the module). Other commands pass."""
    if isinstance(command, SubmitJob):
        require_id("job_id", command.job_id)
    elif isinstance(command, RestoreSession):
        require_id("new_job_id", command.new_job_id)
    elif isinstance(command, RegisterNode):
        require_id("node_id", command.node_id)
        require_id("executor", command.executor)
        if command.cluster:
            require_id("cluster", command.cluster)
    elif isinstance(command, SetAllocations):
        for child in command.shares:
            require_id("org tree node", child)

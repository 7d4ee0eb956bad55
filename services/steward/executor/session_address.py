"""How a session says where it can be reached (issue 24; ADR 0055), on the executor's side.

An interactive attempt finds in `STEWARD_SESSION_ADDRESS_FILE` a path in its working folder, one per attempt
(`steward-session-address-<attempt>`, so a file an earlier attempt left is never read for this one). The
session's process writes there, on one line, a URL or host:port at which its user reaches it (a notebook
server, an SSH daemon, TensorBoard). The executor reads the file while it watches the attempt and reports
what it says once per change (`ReportSessionAddress`); the ledger checks it
(`steward.domain.sessions.session_address_problem`: no credentials, a scheme a browser may follow) and
records `SessionAddressPublished`, or refuses it naming the problem in the job's events.

The file is the job's: the executor opens it without following a symbolic link, only when it is a regular
file, without blocking on a FIFO, and reads its first KiB, so a job cannot make the executor read anything
but what the job itself wrote there."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

from steward.domain.commands import Command, ReportSessionAddress
from steward.executor.attempts import AttemptRecord, AttemptStore
from steward.paths import under

ADDRESS_ENV = "STEWARD_SESSION_ADDRESS_FILE"
READ_AT_MOST = 1024


def address_file(workdir: Path, attempt: int) -> Path:
    """Where attempt `attempt` of a session whose working folder is `workdir` publishes its address."""
    return under(workdir, f"steward-session-address-{attempt}")


def forget_earlier(workdir: Path, attempt: int) -> None:
    """Remove the address files of the attempts before `attempt` (unlink never follows a link)."""
    for earlier in range(1, attempt):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            os.unlink(address_file(workdir, earlier))


def read_address(path: Path) -> tuple[str, float] | None:
    """The first line of the address file, stripped, and when it was written; None while there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # absent, a link, unreadable: nothing published
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        data = os.read(fd, READ_AT_MOST)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace").splitlines()[0].strip() if data.strip() else ""
    return (text, info.st_mtime) if text else None


def message_id(job_id: str, attempt: int, address: str) -> str:
    """One Kafka message id per (attempt, address): a re-read of the same address is deduplicated."""
    return f"address-{job_id}-{attempt}-{hashlib.sha256(address.encode()).hexdigest()[:16]}"


def new_address(job_id: str, attempt: int, path: Path, seen: str) -> ReportSessionAddress | None:
    """The report of the address the attempt published, when it differs from `seen` (the last reported)."""
    found = read_address(path)
    if found is None or found[0] == seen:
        return None
    return ReportSessionAddress(job_id, attempt, found[0], found[1])


def prepare(rec: AttemptRecord, workdir: Path) -> tuple[dict[str, str], dict[str, object]]:
    """For a session's attempt: the variable that names its address file, and the record's `extra` that
    remembers the file (earlier attempts' files removed). Nothing for other jobs."""
    if rec.job_class != "interactive":
        return {}, dict(rec.extra)
    forget_earlier(workdir, rec.attempt)
    path = str(address_file(workdir, rec.attempt))
    return {ADDRESS_ENV: path}, rec.extra | {"address_file": path}


async def report_new_address(rec: AttemptRecord, attempts: AttemptStore,
                             report: Callable[[Command, str], Awaitable[None]]) -> AttemptRecord:
    """Report the address the session published when it changed since the last report (both executors)."""
    path = rec.extra.get("address_file")
    if not isinstance(path, str):
        return rec
    seen = str(rec.extra.get("address_seen", ""))
    found = await asyncio.to_thread(new_address, rec.job_id, rec.attempt, Path(path), seen)
    if found is None:
        return rec
    await report(found, message_id(rec.job_id, rec.attempt, found.address))
    return attempts.update(rec, extra=rec.extra | {"address_seen": found.address})

"""Jobs that cannot reach the control plane (issue 21; docs/security.md "Jobs"): each job runs as an
unprivileged OS user of its project (`stw-<project>`, created when missing), in a working folder only that
user can read (mode 0700, owned by it), with an environment built from scratch: the job's own variables,
Steward's (`CUDA_VISIBLE_DEVICES`, `STEWARD_CHECKPOINT_DIR`, the job and attempt), and the basics (PATH,
HOME, LANG, USER), nothing of the executor's (its bus address, its credentials, its settings).

Switching users needs root. `STEWARD_EXECUTOR_ISOLATION=user` (the default) refuses to start an executor
that is not root, naming the fallback; `none` runs jobs as the executor's own user, still with a scratch
environment and private folders (a developer's machine: no isolation between tenants)."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import re
import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

USER_PREFIX: Final = "stw-"
USER_MAX: Final = 32  # useradd's limit on a user name
# A project's user has the same uid and gid on every machine and in every new container (derived from its
# name, not from the order users were created): files an earlier attempt left in a persistent work folder
# never belong to another project's user. 2^24 ids above one million, under 2^31.
STABLE_ID_BASE: Final = 1_000_000
STABLE_ID_SPAN: Final = 1 << 24
BASIC_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
ISOLATION_MODES: Final = ("user", "none")
_NAME_SAFE = re.compile(r"[a-z0-9-]+")
_create_lock = threading.Lock()


class IsolationError(Exception):
    """The executor cannot isolate jobs as configured (one line, naming the fix)."""


@dataclass(frozen=True, slots=True)
class JobUser:
    name: str
    uid: int
    gid: int


def user_name(project: str) -> str:
    """The OS user of a project's jobs: `stw-<project>` when the project's name is a safe user name
    (lower-case letters, digits, '-', short enough), else `stw-<safe part>-<8 hex of its digest>` (two
    projects never share a user)."""
    if not project:
        raise IsolationError("a job without a project has no user to run as")
    lowered = project.lower()
    if lowered == project and _NAME_SAFE.fullmatch(project) and len(USER_PREFIX) + len(project) <= USER_MAX:
        return USER_PREFIX + project
    digest = hashlib.sha256(project.encode()).hexdigest()[:8]
    safe = re.sub(r"[^a-z0-9-]", "", lowered)[:USER_MAX - len(USER_PREFIX) - 9]
    return f"{USER_PREFIX}{safe}-{digest}" if safe else f"{USER_PREFIX}{digest}"


def stable_id(name: str, taken: Callable[[int], bool]) -> int:
    """The uid (and gid) of the user `name`: derived from the name, so a new machine or container gives a
    project the same number; on the rare collision with an id `taken` by someone else, the next free one
    (then the number depends on which of the two was created first, and docs/security.md says so)."""
    start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % STABLE_ID_SPAN
    for step in range(STABLE_ID_SPAN):
        candidate = STABLE_ID_BASE + (start + step) % STABLE_ID_SPAN
        if not taken(candidate):
            return candidate
    raise IsolationError(f"no free user id left for {name} in {STABLE_ID_BASE}..{STABLE_ID_BASE + STABLE_ID_SPAN}")


def _id_taken(candidate: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(candidate)
        except KeyError:
            continue
        return True
    return False


def ensure_user(project: str) -> JobUser:
    """The project's user, created (a system user with its own group of the same id, no home, no login
    shell, its uid derived from its name: `stable_id`) when missing; a user that already exists keeps its
    ids. Several executors of one machine may race to create it: the loser finds it."""
    name = user_name(project)
    with _create_lock:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            _create_user(name, project)
            entry = pwd.getpwnam(name)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise IsolationError(f"the user {name} of project {project!r} is privileged (uid {entry.pw_uid}); "
                             "jobs never run as root")
    return JobUser(name, entry.pw_uid, entry.pw_gid)


def _create_user(name: str, project: str) -> None:
    try:
        gid = grp.getgrnam(name).gr_gid  # a group left behind by an earlier, half-done creation
    except KeyError:
        gid = stable_id(name, _id_taken)
        _run_tool(["groupadd", "--system", "--gid", str(gid), name], name, project)
    uid = gid if not _uid_taken(gid) else stable_id(name, _uid_taken)
    _run_tool(["useradd", "--system", "--uid", str(uid), "--gid", str(gid), "--no-create-home",
               "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
               "--comment", f"steward jobs of project {project}"[:200], name], name, project)


def _uid_taken(candidate: int) -> bool:
    try:
        pwd.getpwuid(candidate)
    except KeyError:
        return False
    return True


def _run_tool(argv: list[str], name: str, project: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 9):  # 9: it exists (another executor made it meanwhile)
        raise IsolationError(f"cannot create the user {name} for project {project!r}: "
                             f"{proc.stderr.strip() or f'{argv[0]} exited {proc.returncode}'}") from None


def check_mode(mode: str) -> None:
    """`user` needs root; say so, and name the fallback, before any job is accepted."""
    if mode not in ISOLATION_MODES:
        raise IsolationError(f"STEWARD_EXECUTOR_ISOLATION must be one of {', '.join(ISOLATION_MODES)}, got {mode!r}")
    if mode == "user" and os.geteuid() != 0:
        raise IsolationError(
            f"the executor runs each job as its project's OS user and needs root for that (it runs as uid "
            f"{os.geteuid()}): run it as root, or set STEWARD_EXECUTOR_ISOLATION=none to run jobs as this "
            "user (no isolation between tenants)")


def job_environment(own: Mapping[str, str], steward: Mapping[str, str], home: Path, user: str) -> dict[str, str]:
    """A job's environment, from scratch: the basics, then the job's own variables, then Steward's (which
    the job's cannot replace). Nothing of the executor's environment."""
    basics = {"PATH": BASIC_PATH, "HOME": str(home), "LANG": "C.UTF-8", "USER": user, "LOGNAME": user}
    return basics | {k: v for k, v in own.items() if not k.startswith("STEWARD_")} | dict(steward)


def private_folder(path: Path, owner: JobUser | None) -> Path:
    """`path` created (with its parents) and made the job user's alone: mode 0700, owned by `owner` (None:
    the executor's own user). A folder already there is taken over the same way."""
    path.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        os.chown(path, owner.uid, owner.gid)
    os.chmod(path, 0o700)
    return path


def give_tree(path: Path, owner: JobUser | None) -> None:
    """Everything under `path` (a checkpoint copied in by the executor) to `owner`, symlinks not followed."""
    if owner is None:
        return
    for dirpath, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.chown(os.path.join(dirpath, name), owner.uid, owner.gid, follow_symlinks=False)
    os.chown(path, owner.uid, owner.gid)


def traversable(folder: Path) -> None:
    """A job user must reach its folders under `folder`: every existing ancestor must let others pass
    (mode o+x). Folders the executor creates for this are made so; one above them that is not is named."""
    for parent in [folder, *folder.parents]:
        if parent.exists() and not os.stat(parent).st_mode & 0o001:
            raise IsolationError(
                f"job users cannot reach {folder}: {parent} does not let others pass (mode "
                f"{os.stat(parent).st_mode & 0o777:o}); set STEWARD_EXECUTOR_WORK_ROOT and "
                "STEWARD_EXECUTOR_CHECKPOINT_ROOT under a folder they can pass, or chmod o+x it")


def passable_folder(path: Path) -> Path:
    """A folder of the executor's own (its work root, its checkpoint root) that job users may pass through
    but not list: mode 0711."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o711)
    return path


def prepare_executor_folders(root: Path, work_root: Path, checkpoint_root: Path, isolating: bool) -> None:
    """An executor's records (`<root>/jobs`: attempts, logs, specs) are its own (0700); the work and checkpoint
    roots let job users pass to their own folders but not list them (0711). One home for the node agent and the
    Slurm executor, whose jobs run as job users in folders of these roots."""
    jobs = root / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    os.chmod(jobs, 0o700)
    if work_root.is_relative_to(root):
        passable_folder(root)
    passable_folder(work_root)
    passable_folder(checkpoint_root)
    if isolating:
        traversable(work_root)
        traversable(checkpoint_root)

"""Paths built from names (job ids, executor ids, attempt files): joined by `under`, which proves that the
result stays under its root, so no id, however it was recorded, reaches outside the folder meant for it.

Every component must be one name of the id pattern (`steward.domain.ids`: no separator, no `..`, no
absolute path, no control character, no NUL, no bidi override), and the joined path, normalised, must
lie strictly under the normalised root. A refusal is an `UnsafePath` naming the root and the component."""

from __future__ import annotations

import os
from pathlib import Path

from steward.domain.ids import id_problem, shown


class UnsafePath(ValueError):
    """A path component that is not one name, or a path that would leave its root."""


def under(root: Path, *parts: str) -> Path:
    """`root / part / ...`, refused unless every part is one name of the id pattern and the result lies
    under `root` (checked on the normalised absolute paths, symlinks aside: Steward's own folders hold
    none a job could plant)."""
    if not parts:
        raise UnsafePath(f"no path component under {root}")
    for part in parts:
        problem = id_problem(part)
        if problem is not None:
            raise UnsafePath(f"path component {shown(part)} under {root} {problem}")
    base = os.path.normpath(os.path.abspath(root))
    joined = os.path.normpath(os.path.join(base, *parts))
    if os.path.commonpath([base, joined]) != base or joined == base:
        raise UnsafePath(f"{shown(joined)} is not under {root}")
    return Path(joined)


def is_under(root: Path, path: Path | str) -> bool:
    """Does `path` (resolved, symlinks followed) lie under `root` (resolved)? For a path read from outside
    (a recorded checkpoint to resume from), not built by `under`."""
    try:
        base = os.path.realpath(root)
        target = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    return target != base and os.path.commonpath([base, target]) == base


def private_folder(path: Path) -> Path:
    """`path` as a folder only its owner can enter (mode 0700), created when missing (with its parents) and
    narrowed when it exists with a wider mode and belongs to this user: a service's log folder, which a
    job (run as its project's OS user, docs/security.md "Jobs") must not read."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid == os.geteuid() and st.st_mode & 0o077:
        path.chmod(0o700)
    return path


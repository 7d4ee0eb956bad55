"""An attempt's checkpoint folder, the same for every executor that runs real processes (the node agent and
the Slurm executor, whose nodes share the checkpoint root): where it is, what it resumes from, and when it
changed (the evidence `ReportCheckpointSaved` carries)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from steward.domain.commands import ReportCheckpointSaved
from steward.domain.ids import shown
from steward.executor.attempts import AttemptRecord, newest_mtime
from steward.executor.isolation import JobUser, give_tree, private_folder
from steward.paths import is_under, under
from steward_workflows.payloads import JobRunInput

log = logging.getLogger("steward.executor")


def checkpoint_folder(root: Path, run: JobRunInput) -> Path:
    """One folder per job when it can resume (or is a restored session), one per attempt otherwise."""
    if run.resumable or run.restored_from:
        return under(root, run.job_id)
    return under(root, run.job_id, f"attempt-{run.attempt}")


def prepare_checkpoint(root: Path, run: JobRunInput, user: JobUser | None) -> tuple[Path, str]:
    """The attempt's checkpoint folder, the job user's alone, and the checkpoint it resumes from ("" when it
    starts afresh): a restored session gets the old one copied in, from under `root` only, symlinks as links."""
    checkpoint = checkpoint_folder(root, run)
    if checkpoint.parent != root:
        private_folder(checkpoint.parent, user)
    private_folder(checkpoint, user)
    resumed_from = ""
    if run.resume_from and not is_under(root, run.resume_from):
        log.warning("job %s attempt %s: the checkpoint to resume from, %s, is not under %s; starting afresh",
                    shown(run.job_id), run.attempt, shown(run.resume_from), root)
    elif run.resume_from and Path(run.resume_from).is_dir():
        resumed_from = run.resume_from
        if Path(run.resume_from).resolve() != checkpoint.resolve() and not any(checkpoint.iterdir()):
            # symlinks copied as links: a job's link to another's file is never followed by the executor
            shutil.copytree(run.resume_from, checkpoint, dirs_exist_ok=True, symlinks=True)
            give_tree(checkpoint, user)
    return checkpoint, resumed_from


def new_checkpoint(rec: AttemptRecord) -> ReportCheckpointSaved | None:
    """The report of a checkpoint when the attempt's folder changed since the last one reported."""
    mtime = newest_mtime(Path(rec.checkpoint_dir))
    if mtime <= rec.checkpoint_seen:
        return None
    details = {"files": sum(1 for p in Path(rec.checkpoint_dir).rglob("*") if p.is_file())}
    return ReportCheckpointSaved(rec.job_id, rec.attempt, rec.checkpoint_dir, mtime, details)

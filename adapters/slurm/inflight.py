"""Whether a submission may still reach Slurm: an sbatch left running by a dead process.

Every sbatch jobsmith starts carries the submission's job name (with its tag) in its
environment (SUBMIT_TAG_ENV). A process of this user's with that entry is an sbatch whose
caller died: until it is gone, "Slurm has no job of that name" is not a final answer.
"""

from __future__ import annotations

import os
from pathlib import Path

#: environment variable carrying the job name (with its tag) into sbatch's process
SUBMIT_TAG_ENV = "JOBSMITH_SUBMISSION"


def orphan_sbatch_alive(job_name: str, proc: Path = Path("/proc")) -> bool:
    """True if a process of this user carries the submission's tag (an sbatch still running)."""
    needle = f"{SUBMIT_TAG_ENV}={job_name}".encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's: not ours
        if needle in environ.split(b"\0"):
            return True
    return False

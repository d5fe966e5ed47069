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


#: the same check run on the login node (its own /proc): exit 0 if a process of the user's
#: carries $1 in its environment, 1 if none does, 2 if this is no Linux /proc to look at.
#: One grep per process of the user's (-O: owned by them; others' are unreadable anyway).
_REMOTE_PROBE = (
    "[ -r /proc/self/environ ] || exit 2; "
    "for f in /proc/[0-9]*/environ; do "
    '[ -O "$f" ] && grep -qzxF -e "$1" "$f" 2>/dev/null && exit 0; '
    "done; exit 1"
)


def remote_probe(job_name: str) -> list[str]:
    """The argv that answers orphan_sbatch_alive on the host it runs on (the login node,
    over SSH); the tag goes in as an argument, never into the script."""
    return ["sh", "-c", _REMOTE_PROBE, "sh", f"{SUBMIT_TAG_ENV}={job_name}"]

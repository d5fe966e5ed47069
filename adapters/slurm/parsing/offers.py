"""What the installed Slurm client commands offer, read from their own usage text (pure).

Sites run many Slurm versions side by side, and a login node's clients may be older or
newer than its controller's version suggests: the client that will run is the one asked.
`squeue --usage` prints a short synopsis, without contacting the controller; 24.05 and
later list `[--only-job-state]` in it, 22.05 does not (both captured in
tests/test_squeue_states.py).
"""

from __future__ import annotations

import re

_ONLY_JOB_STATE = re.compile(r"\[--only-job-state\]|^\s*--only-job-state\b", re.MULTILINE)


def offers_only_job_state(usage: str) -> bool:
    """True if squeue's usage (or --help) text lists --only-job-state.

    With it, squeue asks the controller for job ids and states alone (REQUEST_JOB_STATE,
    24.05+), which it answers without the job table's read lock or the records' detail:
    no reason, start estimate or name.
    """
    return _ONLY_JOB_STATE.search(usage) is not None

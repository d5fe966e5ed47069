"""Slurm's state strings mapped to jobsmith's JobState (adapters/states.py), in one place.

Slurm prints states in several spellings: sacct's parsable output ("CANCELLED by 1001"),
squeue's compact codes ("PD", "R"), and the JSON of 22.05 (a string) and 24.11 (a list
with flags such as ["PENDING", "REQUEUED"]). Everything goes through parse_state().
"""

from __future__ import annotations

import re

from jobsmith.adapters.states import JobState

_SLURM_NAMES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "PD": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "CONFIGURING": JobState.CONFIGURING,
    "CF": JobState.CONFIGURING,
    "RUNNING": JobState.RUNNING,
    "R": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETING": JobState.COMPLETING,
    "CG": JobState.COMPLETING,
    "SUSPENDED": JobState.SUSPENDED,
    "S": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "ST": JobState.SUSPENDED,
    "REQUEUED": JobState.REQUEUED,
    "RQ": JobState.REQUEUED,
    "COMPLETED": JobState.COMPLETED,
    "CD": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "F": JobState.FAILED,
    "CANCELLED": JobState.CANCELLED,
    "CA": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "RV": JobState.CANCELLED,
    "TIMEOUT": JobState.TIMEOUT,
    "TO": JobState.TIMEOUT,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "OOM": JobState.OUT_OF_MEMORY,
    "NODE_FAIL": JobState.NODE_FAIL,
    "NF": JobState.NODE_FAIL,
    "PREEMPTED": JobState.PREEMPTED,
    "PR": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "BF": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "DL": JobState.DEADLINE,
}

_BY_UID = re.compile(r"^(?P<state>[A-Z_]+)(?: by (?P<uid>\S+))?\+?$")


def parse_state(raw: str | list[str] | None) -> tuple[JobState, str | None]:
    """Map any Slurm spelling of a state to (JobState, uid that cancelled it or None).

    Accepts "COMPLETED", "CANCELLED by 1001", "PD", and 24.11's JSON lists such as
    ["PENDING", "REQUEUED"] (the first entry is the base state, the rest are flags).
    An empty value means Slurm has no record yet: NOT_VISIBLE, never a failure.
    """
    if raw is None:
        return JobState.NOT_VISIBLE, None
    if isinstance(raw, list):
        if not raw:
            return JobState.NOT_VISIBLE, None
        raw = raw[0]
    text = raw.strip()
    if not text:
        return JobState.NOT_VISIBLE, None
    match = _BY_UID.match(text)
    if match is None:
        return JobState.UNKNOWN, None
    state = _SLURM_NAMES.get(match.group("state"), JobState.UNKNOWN)
    return state, match.group("uid")

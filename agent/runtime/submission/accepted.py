"""What Slurm accepted, against what was checked.

sbatch is not the last word on a job: a job_submit or cli_filter plugin, a site's
defaults or a user's own Slurm configuration can move a checked job to another
partition, charge another account, or grow its time limit or memory after policy judged
it and a person approved its hash. So the first poll that reads a job's own record
(never a stand-in row) compares what Slurm recorded with the options the ledger kept,
at no extra controller call: the poll reads the record anyway (agent/watcher/polling.py
acts on what this module finds).

A site whose plugins change jobs on purpose names what they change in its site file
(`scheduler.adjusts`); those fields are not compared. Only what was asked is compared:
a job that named no account is charged the user's default, and that is no change.
"""

from __future__ import annotations

from collections.abc import Collection

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.units import format_time_limit

_MIB = 1 << 20


def altered(options: JobOptions, record: JobRecord, adjusts: Collection[str] = ()) -> list[str]:
    """What Slurm recorded of the job that differs from the checked options, in words
    ("partition debug -> long"); empty when it runs as checked. adjusts: the fields the
    site's `scheduler.adjusts` names, not compared. A field Slurm's record leaves blank
    (accounting not written yet) is not a difference."""
    found: list[str] = []
    asked, got = options.partition, record.partition
    # a pending job asked for several partitions shows them all; a started one, its own
    if "partition" not in adjusts and asked and got and set(got.split(",")) - set(asked.split(",")):
        found.append(f"partition {asked} -> {got}")
    asked, got = options.account, record.account
    # Slurm keeps account names in lower case
    if "account" not in adjusts and asked and got and got.lower() != asked.lower():
        found.append(f"account {asked} -> {got}")
    asked_s, got_s = options.time_limit_s, record.timelimit_s
    if "time" not in adjusts and asked_s and got_s is not None and got_s != asked_s:
        found.append(f"time limit {format_time_limit(asked_s)} -> {format_time_limit(got_s)}")
    asked_mb = options.mem_mb
    got_mb = record.req_mem_bytes // _MIB if record.req_mem_bytes else None
    if "mem" not in adjusts and asked_mb and got_mb is not None and got_mb != asked_mb:
        found.append(f"memory {asked_mb}M -> {got_mb}M")
    return found

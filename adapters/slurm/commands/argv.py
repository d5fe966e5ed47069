"""Pure builders of the argv lists jobsmith runs (sbatch, sacct, squeue, scontrol, scancel).

Kept apart from execution so each command line can be read and tested on its own, and so
the cost of a poll (one sacct, at most one squeue) is visible in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jobsmith.adapters.slurm.commands.slurmenv import PINNED

#: Field separator for sacct/squeue parsable output. The ASCII unit separator cannot occur
#: in job names, comments or paths typed by people, unlike '|'.
DELIMITER = "\x1f"


#: The job's environment is sbatch's own, which the transport builds from the allowlist
#: (adapters/environment_rule.py). ALL, not a list of names: given a list, Slurm 22.05
#: sets SLURM_GET_USER_ENV=1 and slurmd adds the user's login environment (`su - USER`)
#: on the node, so the job would see more than the list (seen on the lab cluster: SHELL,
#: MAIL, SHLVL arrived unlisted). Said on the command line, it also wins over a template's
#: own `#SBATCH --export` line. srun steps inherit the script's environment, whatever it
#: set: with ALL sbatch leaves SLURM_EXPORT_ENV unset in the job, and srun's default is
#: ALL (a list would have been handed on to every step through SLURM_EXPORT_ENV).
EXPORT = "--export=ALL"


def sbatch_submit() -> list[str]:
    """Submit the script read from stdin; print only 'jobid[;cluster]'."""
    return ["sbatch", "--parsable", EXPORT]


def sbatch_test_only() -> list[str]:
    """Validate the script from stdin and estimate its start, without submitting it."""
    return ["sbatch", "--test-only", EXPORT]


def sbatch_version() -> list[str]:
    """Slurm's version, as 'slurm-wlm 22.05.8' or 'slurm 24.11.5'."""
    return ["sbatch", "--version"]


def sacct_jobs(job_ids: Sequence[str], since: datetime, fields: Sequence[str]) -> list[str]:
    """ONE accounting query for many jobs (array ids expand to all their tasks).

    -S bounds the search: without it `sacct -j` scans from the epoch on some versions;
    -E now keeps still-running jobs in the window. -D lists every run of a job Slurm
    requeued (preemption, node failure, `scontrol requeue`), oldest first, where sacct
    alone gives the latest: the parser folds them into one record (JobRecord.requeues).
    """
    return [
        "sacct",
        "-D",
        "-P",
        f"--delimiter={DELIMITER}",
        "--noconvert",
        "-S",
        since.strftime("%Y-%m-%dT%H:%M:%S"),
        "-E",
        "now",
        "-j",
        ",".join(job_ids),
        "--format=" + ",".join(fields),
    ]


def sacct_by_name(job_name: str, since: datetime) -> list[str]:
    """Accounting lookup of a submission tag (kept in the job name, which sacct always stores)."""
    return [
        "sacct",
        "-X",
        "-n",
        "-P",
        "--noconvert",
        "-S",
        since.strftime("%Y-%m-%dT%H:%M:%S"),
        "-E",
        "now",
        f"--name={job_name}",
        "--format=JobIDRaw",
    ]


#: squeue --me first asks the controller whether its cluster is in a federation
#: (REQUEST_FED_INFO), then for the user's jobs: --local skips that question, one RPC of
#: three per squeue (measured with sdiag on 22.05). Off a federation the answer is the same
#: (libslurm's slurm_load_job_user falls back to the local cluster); in one, jobs running
#: on a sibling are left out, as they are from the plain sacct (local cluster) jobsmith
#: reads: jobsmith submits and reads one cluster, federations are not supported.
_SQUEUE_MINE = ["squeue", "--local", "--me", "--noheader", "-t", "all"]


def squeue_mine(fmt: str) -> list[str]:
    """The caller's own jobs in the controller, all states: never the whole job table.

    fmt is a --Format (-O) field list: only -O has STDOUT/STDERR on 22.05.
    """
    return [*_SQUEUE_MINE, f"--Format={fmt}"]


#: Set for every Slurm command (see slurmenv.PINNED, which the transport applies as well).
SLURM_ENV = dict(PINNED)


def squeue_usage() -> list[str]:
    """squeue's synopsis: which options this squeue offers (no controller asked)."""
    return ["squeue", "--usage"]


def squeue_states(job_ids: Sequence[str]) -> list[str]:
    """Only the ids and states of these jobs (array ids give every task), in any state the
    controller still holds: `--only-job-state` (24.05+), one light RPC. Lines
    'id<DELIMITER>STATE'; no --me or --local, which it may refuse to combine with."""
    return [
        "squeue",
        "--only-job-state",
        "--noheader",
        "-t",
        "all",
        "-j",
        ",".join(job_ids),
        f"--format=%i{DELIMITER}%T",
    ]


def squeue_by_name(job_name: str) -> list[str]:
    """The caller's jobs carrying this name, as 'arrayjobid' lines."""
    return [*_SQUEUE_MINE, f"--name={job_name}", "--format=%F"]


def scancel(job_ids: Sequence[str]) -> list[str]:
    """Cancel jobs (an array id cancels every task)."""
    return ["scancel", *job_ids]


def scontrol_hold(job_ids: Sequence[str]) -> list[str]:
    """Hold pending jobs."""
    return ["scontrol", "hold", ",".join(job_ids)]


def scontrol_release(job_ids: Sequence[str]) -> list[str]:
    """Release held jobs."""
    return ["scontrol", "release", ",".join(job_ids)]


def scontrol_update_dependency(job_id: str, spec: str) -> list[str]:
    """Replace a pending job's dependencies with spec (e.g. afterok:12:13)."""
    return ["scontrol", "update", f"JobId={job_id}", f"Dependency={spec}"]


def scontrol_update_excluded(job_id: str, nodes: str) -> list[str]:
    """Replace a pending job's excluded nodes (ExcNodeList) with nodes, a node list."""
    return ["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={nodes}"]


def sacct_runs(job_ids: Sequence[str], since: datetime, fields: Sequence[str]) -> list[str]:
    """Every run of the jobs, allocations only: -D keeps the earlier runs of a requeued
    job (without it sacct shows its newest run alone), -X leaves the steps out."""
    first, *rest = sacct_jobs(job_ids, since, fields)
    return [first, "-D", "-X", *rest]


def scontrol_show_job(job_id: str) -> list[str]:
    """One job's full record from the controller, one line (while Slurm still holds it)."""
    return ["scontrol", "show", "job", "-o", job_id]


def scontrol_show_config() -> list[str]:
    """The controller's configuration (AccountingStorageType, MinJobAge), 'Key = value'."""
    return ["scontrol", "show", "config"]


def scontrol_show_partitions() -> list[str]:
    """Every partition and its limits, one line each."""
    return ["scontrol", "show", "partition", "-o"]


def scontrol_show_nodes() -> list[str]:
    """Every node with its CPUs, memory and GRES, one line each."""
    return ["scontrol", "show", "node", "-o"]


def sacctmgr_assoc(user: str) -> list[str]:
    """The accounts, partitions and QoS the user may use."""
    return [
        "sacctmgr",
        "-P",
        "-n",
        "show",
        "assoc",
        f"user={user}",
        "format=Cluster,Account,User,Partition,QOS",
    ]


def sacctmgr_qos_submit(fields: Sequence[str]) -> list[str]:
    """Every QoS with its submit limits (MaxSubmitPU, MaxSubmitPA), `|`-separated."""
    return ["sacctmgr", "-P", "-n", "show", "qos", "format=" + ",".join(fields)]


def sacctmgr_user_assoc(user: str, fields: Sequence[str]) -> list[str]:
    """The user's default account and associations (QoS, DefaultQOS, MaxSubmit)."""
    return ["sacctmgr", "-P", "-n", "show", "user", user, "withassoc", "format=" + ",".join(fields)]


def squeue_submit_counts(fmt: str) -> list[str]:
    """The caller's jobs that count against submit limits (pending, running, suspended),
    with their QoS and account, which squeue_mine's fields do not carry."""
    return ["squeue", "--local", "--me", "--noheader", "-t", "pending,running,suspended", "-o", fmt]

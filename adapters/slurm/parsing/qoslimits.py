"""Slurm's limits on queued jobs (MaxSubmit), read from sacctmgr and counted from squeue (pure).

Slurm refuses a submission that would take the user past (counting pending, running and
suspended jobs, each array task as one job; an array over a limit is refused whole, see
tests/fixtures/lab-22.05/README.md):

- a QoS's MaxSubmitJobsPerUser (`MaxSubmitPU`): the user's jobs in that QoS, any account;
- a QoS's MaxSubmitJobsPerAccount (`MaxSubmitPA`): the account's jobs in that QoS, any user
  (only the caller's own are visible to count, so the count is a lower bound);
- an association's MaxSubmitJobs (`MaxSubmit`): the user's jobs charged to its account (and
  partition, for a partition's association), any QoS.

SlurmScheduler.submit_limits runs the commands: QOS_ARGS and USER_ASSOC_ARGS (once per
process, their answer kept a few minutes: adapters/slurm/remembered.py), and
QUEUED_FORMAT's squeue only when a limit applies. Output that cannot be read raises
SchedulerError naming the command and the line.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.options import JobOptions, array_task_count
from jobsmith.adapters.scheduler import SubmitLimit, SubmitLimits
from jobsmith.adapters.slurm.parsing.facts import limit_count, output_lines, unreadable

#: `sacctmgr show qos format=` fields: every QoS with its submit limits
QOS_FIELDS = ("Name", "MaxSubmitPU", "MaxSubmitPA")
#: `sacctmgr show user U withassoc format=` fields: the default account and each association
USER_ASSOC_FIELDS = (
    "User",
    "DefaultAccount",
    "Cluster",
    "Account",
    "Partition",
    "QOS",
    "DefaultQOS",
    "MaxSubmit",
)
#: `squeue -o`: QoS, account, partition and array task id (N/A, an index or a pending range)
QUEUED_FORMAT = "%q|%a|%P|%K"


class _Frozen(BaseModel):
    # built when first used: only a site with MaxSubmit limits reads them (issue 26)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class QosSubmit(_Frozen):
    """One QoS's submit limits (None: not set)."""

    name: str
    per_user: int | None = Field(description="MaxSubmitPU")
    per_account: int | None = Field(description="MaxSubmitPA")


class AssocSubmit(_Frozen):
    """One of the user's associations, with what decides a job's QoS and its submit limit."""

    account: str
    partition: str | None = Field(description="None: the association covers all partitions")
    qos: tuple[str, ...] = Field(description="QoS the association may use")
    default_qos: str | None = Field(description="DefaultQOS: a job naming none gets it")
    max_submit: int | None = Field(description="MaxSubmit (MaxSubmitJobs); None if unset")


class SubmitFacts(_Frozen):
    """What sacctmgr says about one user's submit limits (read once per process, kept a
    few minutes between processes: adapters/slurm/remembered.py)."""

    user: str
    default_account: str | None
    qos: dict[str, QosSubmit]
    assocs: tuple[AssocSubmit, ...]


class Queued(_Frozen):
    """One line of the caller's queue: a job, an array task or a pending range of tasks."""

    qos: str
    account: str
    partition: str
    tasks: int = Field(description="how many jobs it counts as (a pending range: its size)")


class LimitRule(_Frozen):
    """A limit that applies to a job, and which queued jobs count against it (None: any)."""

    rule: str
    holder: str
    limit: int
    qos: str | None = None
    account: str | None = None
    partition: str | None = None

    def counts(self, job: Queued) -> bool:
        """Whether job counts against this limit."""
        return (
            self.qos in (None, job.qos)
            and self.account in (None, job.account)
            # a pending job may name several partitions, e.g. 'debug,long'
            and (self.partition is None or self.partition in job.partition.split(","))
        )


def parse_qos_submit(text: str) -> dict[str, QosSubmit]:
    """Every QoS from `sacctmgr -P -n show qos format=Name,MaxSubmitPU,MaxSubmitPA`."""
    found = {}
    for line in output_lines(text):
        fields = line.split("|")
        if len(fields) != len(QOS_FIELDS):
            raise unreadable("sacctmgr show qos", line, f"{len(fields)} fields, not 3")
        name, per_user, per_account = fields
        try:
            found[name] = QosSubmit(
                name=name, per_user=limit_count(per_user), per_account=limit_count(per_account)
            )
        except ValueError as exc:
            raise unreadable("sacctmgr show qos", line, str(exc)) from exc
    return found


def parse_user_assoc(text: str, user: str) -> tuple[str | None, tuple[AssocSubmit, ...]]:
    """(default account, associations) of user from `sacctmgr -P -n show user U withassoc
    format=<USER_ASSOC_FIELDS>`; rows of other users are skipped."""
    default: str | None = None
    rows = []
    for line in output_lines(text):
        fields = line.split("|")
        if len(fields) != len(USER_ASSOC_FIELDS):
            raise unreadable("sacctmgr show user", line, f"{len(fields)} fields, not 8")
        row_user, default_account, _cluster, account, partition, qos, def_qos, limit = fields
        if row_user != user:
            continue
        default = default or default_account or None
        try:
            max_submit = limit_count(limit)
        except ValueError as exc:
            raise unreadable("sacctmgr show user", line, str(exc)) from exc
        rows.append(
            AssocSubmit(
                account=account,
                partition=partition or None,
                qos=tuple(q for q in qos.split(",") if q),
                default_qos=def_qos or None,
                max_submit=max_submit,
            )
        )
    return default, tuple(rows)


def parse_queued(text: str) -> list[Queued]:
    """The caller's queue from `squeue --noheader -o '<QUEUED_FORMAT>'`."""
    queued = []
    for line in output_lines(text):
        fields = line.split("|")
        if len(fields) != 4:
            raise unreadable("squeue", line, f"{len(fields)} fields, not 4")
        qos, account, partition, task = fields
        try:
            # a pending array record stands for its whole range, e.g. '0-1%1'
            tasks = 1 if task in ("N/A", "") else array_task_count(task.split("%")[0])
        except ValueError as exc:
            raise unreadable("squeue", line, f"bad array task id {task!r}") from exc
        queued.append(Queued(qos=qos, account=account, partition=partition, tasks=tasks))
    return queued


def applicable(facts: SubmitFacts, options: JobOptions) -> tuple[SubmitLimits, list[LimitRule]]:
    """The limits a job with options would be under (not counted yet), and its QoS and
    account as Slurm would pick them: its own, else the association's defaults."""
    account = options.account or facts.default_account
    assoc = _association(facts.assocs, account, options.partition)
    qos = options.qos or _default_qos(assoc)
    rules: list[LimitRule] = []
    limits = facts.qos.get(qos) if qos else None
    if limits is not None and limits.per_user is not None:
        holder = f"QoS {qos} (per user)"
        rules.append(LimitRule(rule="MaxSubmitPU", holder=holder, limit=limits.per_user, qos=qos))
    if limits is not None and limits.per_account is not None:
        holder = f"QoS {qos} (per account {account or '?'})"
        limit = limits.per_account
        rules.append(
            LimitRule(rule="MaxSubmitPA", holder=holder, limit=limit, qos=qos, account=account)
        )
    if assoc is not None and assoc.max_submit is not None:
        where = f" in partition {assoc.partition}" if assoc.partition else ""
        rules.append(
            LimitRule(
                rule="MaxSubmitJobs",
                holder=f"association {facts.user}/{assoc.account}{where}",
                limit=assoc.max_submit,
                account=assoc.account,
                partition=assoc.partition,
            )
        )
    return SubmitLimits(qos=qos, account=account), rules


def counted(base: SubmitLimits, rules: Iterable[LimitRule], queue: list[Queued]) -> SubmitLimits:
    """base with each limit and how many of the queued jobs count against it."""
    limits = tuple(
        SubmitLimit(
            rule=r.rule,
            holder=r.holder,
            limit=r.limit,
            queued=sum(q.tasks for q in queue if r.counts(q)),
        )
        for r in rules
    )
    return base.model_copy(update={"limits": limits})


def _association(
    assocs: tuple[AssocSubmit, ...], account: str | None, partition: str | None
) -> AssocSubmit | None:
    """The association a job uses: its account's for its partition, else for all partitions.

    Several clusters sharing one slurmdbd would list the account once per cluster; the
    first row is taken.
    """
    mine = [a for a in assocs if a.account == account]
    return next((a for a in mine if a.partition and a.partition == partition), None) or next(
        (a for a in mine if a.partition is None), None
    )


def _default_qos(assoc: AssocSubmit | None) -> str | None:
    """The QoS Slurm gives a job naming none: DefaultQOS, else the association's only one."""
    if assoc is None:
        return None
    if assoc.default_qos:
        return assoc.default_qos
    return assoc.qos[0] if len(assoc.qos) == 1 else None

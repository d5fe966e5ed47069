"""The site's policy on submissions: limits, budgets, approvals.

Limits (check_limits) are what one job may ask for: the partition, account and QoS
allowed, and each partition's ceilings on time, nodes, CPUs, memory and GPUs. A request
over a limit is refused before anything reaches Slurm, with the rule and the limit
named.

Beyond them, hard rules refuse (the rule and the limit are named): more array tasks
queued or running than the site allows, a daily node-hour or GPU-hour budget,
submissions per hour, and a streak of failed jobs (which stops submissions until a
person runs `jobsmith sessions unblock`). The model token budgets (per session, per day)
refuse a model brain its call the same way (agent/brains/deciding.py). Soft thresholds
ask a person: a submission above the core-hour, GPU-hour or node threshold waits for
`jobsmith approve`. The size of a request is what it asks Slurm for: time limit x
resources x array tasks (what it may spend, not what it will).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.options import JobOptions, array_last_index
from jobsmith.adapters.scheduler import SubmitLimit
from jobsmith.agent.runtime.session.events import Event
from jobsmith.agent.runtime.session.readmodel import SessionFold, fold_events
from jobsmith.errors import PolicyError
from jobsmith.site_config import SiteConfig
from jobsmith.site_config.model import ApprovalThresholds, Budgets, Policy
from jobsmith.units import format_time_limit


class Cost(BaseModel):
    """What one submission may spend, from its request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: int = Field(description="array tasks (1 for a plain job); Slurm counts each")
    nodes: int = Field(description="nodes per task")
    core_hours: float = Field(description="CPUs x time limit, over all tasks")
    gpu_hours: float = Field(description="GPUs x time limit, over all tasks")
    node_hours: float = Field(description="nodes x time limit, over all tasks")

    @classmethod
    def of(cls, opts: JobOptions) -> Cost:
        """The cost of a submission with these options."""
        tasks = opts.array_size()
        nodes = opts.nodes or 1
        hours = (opts.time_limit_s or 0) / 3600 * tasks
        cpus = (opts.cpus_per_task or 1) * opts.task_count()
        return cls(
            tasks=tasks,
            nodes=nodes,
            core_hours=round(cpus * hours, 3),
            gpu_hours=round((opts.gpus or 0) * nodes * hours, 3),
            node_hours=round(nodes * hours, 3),
        )


@dataclass
class History:
    """What the user's sessions spent and suffered recently (from the session store)."""

    submissions_last_hour: int = 0
    node_hours_last_day: float = 0.0
    gpu_hours_last_day: float = 0.0
    failures_in_a_row: int = 0
    blocked_sessions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Ruling:
    """The policy's ruling on a request: allow, approve (a person must), or refuse; with
    the rule and a sentence. (A brain's Decision about a job that ended is another
    thing: agent/brains/protocol.py.)"""

    verdict: str  # "allow" | "approve" | "refuse"
    rule: str = ""
    message: str = ""


def history_from_events(events: Iterable[Event], now: datetime) -> History:
    """Spending and the failure streak, from the events of any sessions (each session's
    fold, as `history_from_folds` counts them)."""
    by_session: dict[str, list[Event]] = {}
    for event in events:
        by_session.setdefault(event.session_id, []).append(event)
    return history_from_folds([fold_events(evs) for evs in by_session.values()], now)


def history_from_folds(folds: Iterable[SessionFold], now: datetime) -> History:
    """Spending and the failure streak, from the sessions' folds
    (agent/runtime/session/readmodel.py).

    The streak counts every session's streak failures after the newest reset of any.
    """
    folds = list(folds)
    newest_reset = max((f.last_reset for f in folds if f.last_reset), default=None)
    hist = History()
    for fold in folds:
        for spent in fold.spending:
            if spent.at >= now - timedelta(hours=1):
                hist.submissions_last_hour += spent.submissions
            if spent.at >= now - timedelta(days=1):
                hist.node_hours_last_day += spent.node_hours
                hist.gpu_hours_last_day += spent.gpu_hours
        hist.failures_in_a_row += sum(
            1 for at in fold.streak_failures if newest_reset is None or at > newest_reset
        )
    return hist


@dataclass(frozen=True)
class ModelTokens:
    """What model calls cost, as the token budgets count them (UsagePayload.charged)."""

    session: int = 0  # the session's own calls, ever
    last_day: int = 0  # every session's calls in the last 24 h


def model_tokens_from_folds(
    folds: Iterable[SessionFold], session_id: str, now: datetime
) -> ModelTokens:
    """The session's tokens and the last day's over folds (which should hold the session's)."""
    since = now - timedelta(days=1)
    by_id = {fold.session_id: fold for fold in folds}  # a session counted once
    mine = by_id.get(session_id)
    return ModelTokens(
        session=mine.tokens.charged if mine is not None else 0,
        last_day=sum(fold.tokens_since(since) for fold in by_id.values()),
    )


def model_token_refusal(budgets: Budgets, used: ModelTokens) -> str | None:
    """Why no model may be asked now (the budget, its limit and what was used), or None.

    A budget is reached when what was used is at its limit: a call's cost is known only
    after it, so the check is whether any budget is left, and one call may pass it.
    """
    checks = (
        ("per session", budgets.model_tokens_per_session, used.session, "in this session"),
        ("per day", budgets.model_tokens_per_day, used.last_day, "in the last 24 h"),
    )
    for label, limit, spent, where in checks:
        if limit is not None and spent >= limit:
            return (
                f"model token budget {label} ({limit}) reached: {spent} used {where}; "
                "left to a person"
            )
    return None


@dataclass(frozen=True)
class BudgetUse:
    """How much of one budget is used now."""

    budget: str  # the site config's name for it
    used: float
    limit: float


def budget_use(budgets: Budgets, hist: History) -> list[BudgetUse]:
    """Each budget the site sets that a running pipeline can spend, with its use."""
    pairs = (
        ("submissions_per_hour", budgets.submissions_per_hour, hist.submissions_last_hour),
        ("node_hours_per_day", budgets.node_hours_per_day, hist.node_hours_last_day),
        ("gpu_hours_per_day", budgets.gpu_hours_per_day, hist.gpu_hours_last_day),
    )
    return [BudgetUse(name, used, limit) for name, limit, used in pairs if limit is not None]


def evaluate(cost: Cost, policy: Policy, history: History, active_tasks: int) -> Ruling:
    """The verdict on one submission: the first hard rule broken refuses it."""
    for rule in (_streak, _concurrency, _per_hour, _node_budget, _gpu_budget):
        decision = rule(cost, policy, history, active_tasks)
        if decision is not None:
            return decision
    reasons = thresholds_exceeded(policy.approval, cost)
    if reasons:
        return Ruling("approve", "approval threshold", "; ".join(reasons))
    return Ruling("allow")


def thresholds_exceeded(approval: ApprovalThresholds, cost: Cost) -> list[str]:
    """Which approval thresholds a submission of this cost is strictly above, as
    readable reasons (a threshold of None never asks)."""
    measures = [
        ("core-hours", cost.core_hours, approval.core_hours),
        ("GPU-hours", cost.gpu_hours, approval.gpu_hours),
        ("nodes", cost.nodes, approval.nodes),
    ]
    return [
        f"{amount:g} {label} is above the approval threshold of {limit:g}"
        for label, amount, limit in measures
        if limit is not None and amount > limit
    ]


def _streak(cost: Cost, policy: Policy, hist: History, active: int) -> Ruling | None:
    limit = policy.budgets.max_failures_in_a_row
    if limit is not None and hist.failures_in_a_row >= limit:
        return Ruling(
            "refuse",
            "failure streak",
            f"{hist.failures_in_a_row} jobs failed in a row (limit {limit}): submissions stop "
            "until a person looks; then run: jobsmith sessions unblock SESSION",
        )
    return None


def _concurrency(cost: Cost, policy: Policy, hist: History, active: int) -> Ruling | None:
    limit = policy.max_concurrent_jobs
    if limit is not None and active + cost.tasks > limit:
        return Ruling(
            "refuse",
            "max concurrent jobs",
            f"{active} of your jobs are queued or running and this adds {cost.tasks}: "
            f"the site allows {limit} at once (array tasks count one each)",
        )
    return None


def _per_hour(cost: Cost, policy: Policy, hist: History, active: int) -> Ruling | None:
    limit = policy.budgets.submissions_per_hour
    if limit is not None and hist.submissions_last_hour + 1 > limit:
        return Ruling(
            "refuse",
            "submissions per hour",
            f"{hist.submissions_last_hour} submissions in the last hour: the limit is {limit}",
        )
    return None


def _node_budget(cost: Cost, policy: Policy, hist: History, active: int) -> Ruling | None:
    limit = policy.budgets.node_hours_per_day
    if limit is not None and hist.node_hours_last_day + cost.node_hours > limit:
        return Ruling(
            "refuse",
            "node-hours per day",
            f"{hist.node_hours_last_day:g} node-hours in the last 24 h plus {cost.node_hours:g} "
            f"would pass the daily budget of {limit:g}",
        )
    return None


def _gpu_budget(cost: Cost, policy: Policy, hist: History, active: int) -> Ruling | None:
    limit = policy.budgets.gpu_hours_per_day
    if limit is not None and cost.gpu_hours and hist.gpu_hours_last_day + cost.gpu_hours > limit:
        return Ruling(
            "refuse",
            "GPU-hours per day",
            f"{hist.gpu_hours_last_day:g} GPU-hours in the last 24 h plus {cost.gpu_hours:g} "
            f"would pass the daily budget of {limit:g}",
        )
    return None


def submit_limit_refusal(limits: Iterable[tuple[SubmitLimit, int]], jobs: int) -> Ruling | None:
    """The refusal for the first of the scheduler's submit limits (MaxSubmit) a submission
    would pass, or None. limits: each with the tasks the submission adds under it; jobs:
    how many jobs it is (1, or a plan's). Slurm would refuse an array over a limit whole,
    and a plan's jobs after the limit was reached: after policy said yes, half a DAG."""
    for limit, adds in limits:
        if limit.queued + adds > limit.limit:
            return Ruling("refuse", "submit limit", _submit_limit_message(limit, adds, jobs))
    return None


#: the refusals of an array the site would not take at once, which a new array submission
#: is fed in parts instead of refused for (agent/runtime/workflows/feeding/)
OVER_SITE_LIMITS = frozenset({"submit limit", "max array size"})


def array_size_refusal(opts: JobOptions, max_array_size: int | None) -> Ruling | None:
    """The refusal of an array whose highest index is not below the scheduler's cap
    (Slurm's MaxArraySize caps the index, not the count: `10000-19999` is refused where
    it is 10001, though it is 10,000 tasks), or None (no array, or no cap known)."""
    if opts.array is None or max_array_size is None:
        return None
    last = array_last_index(opts.array)
    if last < max_array_size:
        return None
    return Ruling(
        "refuse",
        "max array size",
        f"--array {opts.array}: its highest index {last} is above the site's largest, "
        f"{max_array_size - 1} (MaxArraySize {max_array_size} caps the index, not the "
        f"count): index the tasks from 0, or split the array into parts of at most "
        f"{max_array_size} tasks indexed from 0",
    )


def _submit_limit_message(limit: SubmitLimit, adds: int, jobs: int) -> str:
    if jobs == 1:
        what, it = "this submission adds", "it"
    else:
        what, it = f"the plan's {jobs} jobs add", "its last jobs after the first were queued"
    room = limit.limit - limit.queued
    over = limit.queued + adds - limit.limit  # jobs that must end before it fits
    if adds > limit.limit:
        advice = (
            f"split it into parts of at most {limit.limit} tasks, each submitted once the "
            "ones before have ended"
        )
    elif room > 0:
        advice = (
            f"submit at most {room} tasks now (split it), or wait until {over} of your "
            "queued jobs have ended (squeue --me)"
        )
    else:
        advice = f"wait until {over} of your queued jobs have ended (squeue --me)"
    return (
        f"{limit.holder} allows at most {limit.limit} jobs queued or running "
        f"({limit.rule}, each array task counting one): you have {limit.queued} and {what} "
        f"{adds}, so Slurm would refuse {it}; --throttle does not help (it limits running "
        f"tasks, not queued ones): {advice}"
    )


# --- limits: what one job may ask for ----------------------------------------------


def check_limits(opts: JobOptions, site: SiteConfig) -> None:
    """Raise PolicyError for the first limit opts breaks."""
    _check_choice("account", opts.account, site.accounts.allowed)
    _check_choice("qos", opts.qos, site.qos.allowed)
    if opts.partition is None:
        raise PolicyError("no partition given and the site config names no default partition")
    part = site.partitions.get(opts.partition)
    if part is None:
        valid = ", ".join(site.partitions)  # the site file names at least one
        raise PolicyError(f"partition {opts.partition!r} is not allowed here; allowed: {valid}")
    where = f"partition {opts.partition!r}"
    _ceiling(
        f"time limit {_t(opts.time_limit_s)}",
        opts.time_limit_s,
        part.max_time,
        f"{where} allows at most {_t(part.max_time)}",
    )
    _ceiling(
        f"{opts.nodes} nodes",
        opts.nodes,
        part.max_nodes,
        f"{where} allows at most {part.max_nodes} nodes",
    )
    _ceiling(
        f"{opts.cpus_per_task} CPUs per task",
        opts.cpus_per_task,
        part.max_cpus_per_node,
        f"{where} has at most {part.max_cpus_per_node} CPUs per node",
    )
    if opts.ntasks_per_node is not None:
        per_node = opts.ntasks_per_node * (opts.cpus_per_task or 1)
        _ceiling(
            f"--ntasks-per-node={opts.ntasks_per_node} x {opts.cpus_per_task or 1} CPUs per "
            f"task ({per_node} CPUs per node)",
            per_node,
            part.max_cpus_per_node,
            f"{where} has at most {part.max_cpus_per_node} CPUs per node",
        )
    _ceiling(
        f"memory {opts.mem_mb} MiB",
        opts.mem_mb,
        part.max_mem_per_node,
        f"{where} allows at most {part.max_mem_per_node} MiB per node",
    )
    _ceiling(
        f"{opts.gpus} GPUs",
        opts.gpus or None,
        part.max_gpus_per_node,
        f"{where} has {part.max_gpus_per_node} GPUs per node",
    )
    if opts.gpu_type and part.gpu_type and opts.gpu_type != part.gpu_type:
        raise PolicyError(f"GPU type {opts.gpu_type!r}: {where} has {part.gpu_type!r} GPUs")


def _check_choice(what: str, value: str | None, allowed: list[str]) -> None:
    if value is not None and allowed and value not in allowed:
        raise PolicyError(f"{what} {value!r} is not allowed here; allowed: {', '.join(allowed)}")


def _ceiling(request: str, value: int | None, limit: int | None, rule: str) -> None:
    if value is not None and limit is not None and value > limit:
        raise PolicyError(f"{request} refused: {rule}")


def _t(seconds: int | None) -> str:
    return "unset" if seconds is None else format_time_limit(seconds)

"""Policy on submissions beyond the per-partition limits: concurrency, budgets, approvals.

Hard rules refuse (the rule and the limit are named): more array tasks queued or running
than the site allows, a daily node-hour or GPU-hour budget, submissions per hour, and a
streak of failed jobs (which stops submissions until a person runs `jobsmith sessions
unblock`). Soft thresholds ask a person: a submission above the core-hour, GPU-hour or
node threshold waits for `jobsmith approve`. The size of a request is what it asks Slurm
for: time limit x resources x array tasks (what it may spend, not what it will).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.events import Event, EventKind
from jobsmith.site_config.model import Policy


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
        cpus = (opts.cpus_per_task or 1) * (opts.ntasks or 1)
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
class Decision:
    """allow, approve (a person must), or refuse; with the rule and a sentence."""

    verdict: str  # "allow" | "approve" | "refuse"
    rule: str = ""
    message: str = ""


def history_from_events(events: Iterable[Event], now: datetime) -> History:
    """Spending and the failure streak, from every session's events in time order."""
    hist = History()
    for event in sorted(events, key=lambda e: e.at):
        if event.kind is EventKind.RESULT and event.data.get("submitted"):
            _count_submission(hist, event, now)
        elif event.kind is EventKind.JOB_STATE:
            state = _state(event.data.get("state"))
            if state is JobState.COMPLETED:
                hist.failures_in_a_row = 0
            elif state is not None and state.counts_toward_streak:
                hist.failures_in_a_row += 1
        elif event.kind is EventKind.UNBLOCKED:
            hist.failures_in_a_row = 0
    return hist


def _count_submission(hist: History, event: Event, now: datetime) -> None:
    cost = event.data.get("cost")
    if event.at >= now - timedelta(hours=1):
        hist.submissions_last_hour += 1
    if event.at >= now - timedelta(days=1) and isinstance(cost, dict):
        hist.node_hours_last_day += _number(cost.get("node_hours"))
        hist.gpu_hours_last_day += _number(cost.get("gpu_hours"))


def _state(value: object) -> JobState | None:
    try:
        return JobState(str(value))
    except ValueError:
        return None


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def evaluate(cost: Cost, policy: Policy, history: History, active_tasks: int) -> Decision:
    """The verdict on one submission: the first hard rule broken refuses it."""
    for rule in (_streak, _concurrency, _per_hour, _node_budget, _gpu_budget):
        decision = rule(cost, policy, history, active_tasks)
        if decision is not None:
            return decision
    reasons = policy.approval.exceeded_by(
        core_hours=cost.core_hours, gpu_hours=cost.gpu_hours, nodes=cost.nodes
    )
    if reasons:
        return Decision("approve", "approval threshold", "; ".join(reasons))
    return Decision("allow")


def _streak(cost: Cost, policy: Policy, hist: History, active: int) -> Decision | None:
    limit = policy.budgets.max_failures_in_a_row
    if limit is not None and hist.failures_in_a_row >= limit:
        return Decision(
            "refuse",
            "failure streak",
            f"{hist.failures_in_a_row} jobs failed in a row (limit {limit}): submissions stop "
            "until a person looks; then run: jobsmith sessions unblock SESSION",
        )
    return None


def _concurrency(cost: Cost, policy: Policy, hist: History, active: int) -> Decision | None:
    limit = policy.max_concurrent_jobs
    if limit is not None and active + cost.tasks > limit:
        return Decision(
            "refuse",
            "max concurrent jobs",
            f"{active} of your jobs are queued or running and this adds {cost.tasks}: "
            f"the site allows {limit} at once (array tasks count one each)",
        )
    return None


def _per_hour(cost: Cost, policy: Policy, hist: History, active: int) -> Decision | None:
    limit = policy.budgets.submissions_per_hour
    if limit is not None and hist.submissions_last_hour + 1 > limit:
        return Decision(
            "refuse",
            "submissions per hour",
            f"{hist.submissions_last_hour} submissions in the last hour: the limit is {limit}",
        )
    return None


def _node_budget(cost: Cost, policy: Policy, hist: History, active: int) -> Decision | None:
    limit = policy.budgets.node_hours_per_day
    if limit is not None and hist.node_hours_last_day + cost.node_hours > limit:
        return Decision(
            "refuse",
            "node-hours per day",
            f"{hist.node_hours_last_day:g} node-hours in the last 24 h plus {cost.node_hours:g} "
            f"would pass the daily budget of {limit:g}",
        )
    return None


def _gpu_budget(cost: Cost, policy: Policy, hist: History, active: int) -> Decision | None:
    limit = policy.budgets.gpu_hours_per_day
    if limit is not None and cost.gpu_hours and hist.gpu_hours_last_day + cost.gpu_hours > limit:
        return Decision(
            "refuse",
            "GPU-hours per day",
            f"{hist.gpu_hours_last_day:g} GPU-hours in the last 24 h plus {cost.gpu_hours:g} "
            f"would pass the daily budget of {limit:g}",
        )
    return None

"""Policy without Slurm: what a submission costs, what history counts, which rule decides.

agent/runtime/submission/judging/policy.py is pure: these tests pin each decision point
at its boundary (the last value a rule allows and the first it refuses), the order the
rules are tried in, and the exact words a refusal shows, since a person reads them to
know what to change. The real-cluster tests (test_sessions) show the same rules refusing
real submissions.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.readmodel import SessionFold, TokenSpend, TokenTotals
from jobsmith.agent.runtime.submission.judging.policy import (
    BudgetUse,
    Cost,
    History,
    ModelTokens,
    Ruling,
    budget_use,
    check_limits,
    evaluate,
    model_tokens_from_folds,
)
from jobsmith.agent.runtime.submission.judging.policy import history_from_events as history
from jobsmith.errors import PolicyError
from jobsmith.site_config import SiteConfig
from jobsmith.site_config.model import Budgets, Policy

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def opts(**kw: Any) -> JobOptions:
    return JobOptions(job_name="t.js-0123456789ab", **kw)


def cost(**kw: Any) -> Cost:
    fields: dict[str, Any] = {
        "tasks": 1,
        "nodes": 1,
        "core_hours": 0.0,
        "gpu_hours": 0.0,
        "node_hours": 0.0,
    }
    return Cost(**(fields | kw))


def policy(**kw: Any) -> Policy:
    """A policy with every limit off unless given (budgets and approval as dicts)."""
    base: dict[str, Any] = {
        "max_concurrent_jobs": None,
        "approval": {"core_hours": None, "gpu_hours": None, "nodes": None},
        "budgets": {
            "node_hours_per_day": None,
            "gpu_hours_per_day": None,
            "submissions_per_hour": None,
            "max_failures_in_a_row": None,
        },
    }
    for key in ("approval", "budgets"):
        base[key] |= kw.pop(key, {})
    return Policy.model_validate(base | kw)


_seq = iter(range(1, 1_000_000))


def ev(kind: EventKind, ago: timedelta, **data: Any) -> Event:
    return Event(session_id="s", seq=next(_seq), kind=kind, at=NOW - ago, data=data)


def submitted(ago: timedelta, **cost_fields: Any) -> Event:
    return ev(EventKind.RESULT, ago, submitted=True, cost=cost_fields)


def job(state: str, ago: timedelta = timedelta(minutes=1)) -> Event:
    return ev(EventKind.JOB_STATE, ago, job_id="1", state=state)


# --- Cost --------------------------------------------------------------------------------


def test_cost_of_a_plain_job_with_nothing_set_is_one_task_on_one_node() -> None:
    assert Cost.of(opts()) == cost(tasks=1, nodes=1)


def test_cost_multiplies_time_resources_and_array_tasks() -> None:
    c = Cost.of(opts(time_limit_s=3600, cpus_per_task=4, ntasks=2, gpus=2, nodes=3, array="0-9"))
    # 10 tasks x 1 h; CPUs are per task x tasks per job; GPUs are per node
    assert c == cost(tasks=10, nodes=3, core_hours=80.0, gpu_hours=60.0, node_hours=30.0)


def test_tasks_per_node_count_on_every_node_and_ntasks_wins_where_both_are_given() -> None:
    # 3 nodes x 4 tasks x 2 CPUs, 1 h: Slurm starts 12 tasks
    spread = opts(time_limit_s=3600, cpus_per_task=2, nodes=3, ntasks_per_node=4)
    assert Cost.of(spread) == cost(nodes=3, core_hours=24.0, node_hours=3.0)
    assert spread.task_count() == 12
    # with -n, --ntasks-per-node is only the most on a node: -n counts
    capped = opts(time_limit_s=3600, nodes=3, ntasks=5, ntasks_per_node=4)
    assert (capped.task_count(), Cost.of(capped).core_hours) == (5, 5.0)
    assert opts(ntasks_per_node=4).task_count() == 4  # no -N: one node
    assert opts(nodes=3).task_count() == 3  # -N alone: one task (a CPU) per node, as sbatch


def test_cost_counts_only_the_indices_an_array_names_and_rounds_to_three_places() -> None:
    c = Cost.of(opts(time_limit_s=60, gpus=1, array="1,3,5-7"))  # 5 tasks x 1 min
    assert c == cost(tasks=5, core_hours=0.083, gpu_hours=0.083, node_hours=0.083)


def test_a_job_without_a_time_limit_costs_no_hours_however_many_tasks() -> None:
    # Slurm gives it the partition's default; policy judges only what the request says
    assert Cost.of(opts(array="0-999", gpus=2)) == cost(tasks=1000)


# --- history ------------------------------------------------------------------------------


def test_submissions_per_hour_count_from_exactly_one_hour_ago() -> None:
    hour = timedelta(hours=1)
    h = history(
        [
            submitted(timedelta(0)),
            submitted(hour),  # on the boundary: counts
            submitted(hour + timedelta(seconds=1)),  # just before: does not
            ev(EventKind.RESULT, timedelta(0), submitted=False),  # refused: no submission
            ev(EventKind.INTENT, timedelta(0), submitted=True),  # not a result
        ],
        NOW,
    )
    assert h.submissions_last_hour == 2


def test_node_and_gpu_hours_add_up_over_exactly_one_day() -> None:
    day = timedelta(days=1)
    h = history(
        [
            submitted(timedelta(hours=2), node_hours=1.5, gpu_hours=4),
            submitted(day, node_hours=2, gpu_hours=0.5),  # on the boundary: counts
            submitted(day + timedelta(seconds=1), node_hours=100, gpu_hours=100),
        ],
        NOW,
    )
    assert (h.node_hours_last_day, h.gpu_hours_last_day) == (3.5, 4.5)
    assert h.submissions_last_hour == 0


def test_a_damaged_cost_spends_nothing_but_the_submission_still_counts() -> None:
    h = history(
        [
            ev(EventKind.RESULT, timedelta(0), submitted=True, cost="lots"),
            ev(EventKind.RESULT, timedelta(0), submitted=True, cost={"node_hours": "9"}),
            ev(EventKind.RESULT, timedelta(0), submitted=True),
        ],
        NOW,
    )
    assert h == History(submissions_last_hour=3)


def test_failure_streak_counts_failed_jobs_and_a_completed_job_or_unblock_ends_it() -> None:
    streak = sorted(s.value for s in JobState if s.counts_toward_streak)
    assert streak == ["DEADLINE", "FAILED", "OUT_OF_MEMORY", "TIMEOUT"]
    assert history([job(s) for s in streak], NOW).failures_in_a_row == 4
    assert history([job("FAILED"), job("COMPLETED", timedelta(0))], NOW).failures_in_a_row == 0
    unblocked = ev(EventKind.UNBLOCKED, timedelta(seconds=30))
    streak = [job("TIMEOUT", timedelta(minutes=2)), unblocked, job("OUT_OF_MEMORY", timedelta(0))]
    assert history(streak, NOW).failures_in_a_row == 1


def test_cancelled_preempted_node_failed_and_unfinished_jobs_neither_add_to_nor_end_a_streak() -> (
    None
):
    events = [job("FAILED", timedelta(minutes=5))]
    states = ("CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "RUNNING", "PENDING", "")
    events += [job(s) for s in states]
    events.append(ev(EventKind.JOB_STATE, timedelta(0), job_id="2"))  # no state at all
    assert history(events, NOW).failures_in_a_row == 1


def test_streak_follows_time_not_the_order_sessions_are_read_in() -> None:
    # two sessions read one after the other: the completion happened last
    late_success = job("COMPLETED", timedelta(minutes=1))
    early_failures = [job("FAILED", timedelta(minutes=3)), job("FAILED", timedelta(minutes=2))]
    assert history([late_success, *early_failures], NOW).failures_in_a_row == 0
    assert history([*early_failures[::-1]], NOW).failures_in_a_row == 2


def test_a_failure_at_the_very_time_of_another_sessions_unblock_is_cleared_with_it() -> None:
    # as within one session (a reset clears the failures up to and at its time)
    failed = job("FAILED", timedelta(minutes=1))
    unblocked = Event(session_id="other", seq=1, kind=EventKind.UNBLOCKED, at=failed.at, data={})
    assert history([failed, unblocked], NOW).failures_in_a_row == 0
    assert history([failed, job("FAILED", timedelta(0))], NOW).failures_in_a_row == 2


# --- evaluate: each rule at its boundary ---------------------------------------------


def test_nothing_set_allows_anything() -> None:
    big = cost(tasks=10_000, nodes=500, core_hours=1e9, gpu_hours=1e9, node_hours=1e9)
    busy = History(10_000, 1e9, 1e9, 10_000)
    assert evaluate(big, policy(), busy, active_tasks=10**6) == Ruling("allow")


def test_failure_streak_refuses_from_its_limit_on() -> None:
    p = policy(budgets={"max_failures_in_a_row": 3})
    assert evaluate(cost(), p, History(failures_in_a_row=2), 0).verdict == "allow"
    assert evaluate(cost(), p, History(failures_in_a_row=3), 0) == Ruling(
        "refuse",
        "failure streak",
        "3 jobs failed in a row (limit 3): submissions stop until a person looks; then "
        "run: jobsmith sessions unblock SESSION",
    )


def test_concurrency_counts_the_new_array_tasks_with_those_already_queued() -> None:
    p = policy(max_concurrent_jobs=10)
    assert evaluate(cost(tasks=4), p, History(), active_tasks=6).verdict == "allow"
    assert evaluate(cost(tasks=5), p, History(), active_tasks=6) == Ruling(
        "refuse",
        "max concurrent jobs",
        "6 of your jobs are queued or running and this adds 5: the site allows 10 at once "
        "(array tasks count one each)",
    )


def test_submissions_per_hour_refuses_the_one_past_the_limit() -> None:
    p = policy(budgets={"submissions_per_hour": 3})
    assert evaluate(cost(), p, History(submissions_last_hour=2), 0).verdict == "allow"
    assert evaluate(cost(), p, History(submissions_last_hour=3), 0) == Ruling(
        "refuse", "submissions per hour", "3 submissions in the last hour: the limit is 3"
    )
    zero = policy(budgets={"submissions_per_hour": 0})
    assert evaluate(cost(), zero, History(), 0).rule == "submissions per hour"


def test_node_hour_budget_allows_spending_it_exactly() -> None:
    p = policy(budgets={"node_hours_per_day": 10})
    assert evaluate(cost(node_hours=4), p, History(node_hours_last_day=6), 0).verdict == "allow"
    assert evaluate(cost(node_hours=4.5), p, History(node_hours_last_day=6), 0) == Ruling(
        "refuse",
        "node-hours per day",
        "6 node-hours in the last 24 h plus 4.5 would pass the daily budget of 10",
    )


def test_gpu_hour_budget_allows_spending_it_exactly_and_never_stops_a_cpu_job() -> None:
    p = policy(budgets={"gpu_hours_per_day": 8})
    spent = History(gpu_hours_last_day=6)
    assert evaluate(cost(gpu_hours=2), p, spent, 0).verdict == "allow"
    assert evaluate(cost(gpu_hours=2.5), p, spent, 0) == Ruling(
        "refuse",
        "GPU-hours per day",
        "6 GPU-hours in the last 24 h plus 2.5 would pass the daily budget of 8",
    )
    over = History(gpu_hours_last_day=9)  # spent past the budget (a limit lowered since)
    assert evaluate(cost(gpu_hours=0), p, over, 0).verdict == "allow"


def test_approval_thresholds_ask_a_person_strictly_above_them() -> None:
    p = policy(approval={"core_hours": 10, "gpu_hours": 2, "nodes": 4})
    at_limits = cost(nodes=4, core_hours=10, gpu_hours=2)
    assert evaluate(at_limits, p, History(), 0) == Ruling("allow")
    above = cost(nodes=5, core_hours=10.5, gpu_hours=3)
    assert evaluate(above, p, History(), 0) == Ruling(
        "approve",
        "approval threshold",
        "10.5 core-hours is above the approval threshold of 10; 3 GPU-hours is above the "
        "approval threshold of 2; 5 nodes is above the approval threshold of 4",
    )
    assert evaluate(cost(nodes=5), p, History(), 0).message == (
        "5 nodes is above the approval threshold of 4"
    )


@pytest.mark.parametrize(
    ("hist", "active", "rule"),
    [
        (History(5, 99, 99, 9), 99, "failure streak"),
        (History(5, 99, 99, 0), 99, "max concurrent jobs"),
        (History(5, 99, 99, 0), 0, "submissions per hour"),
        (History(0, 99, 99, 0), 0, "node-hours per day"),
        (History(0, 0, 99, 0), 0, "GPU-hours per day"),
        (History(0, 0, 0, 0), 0, "approval threshold"),
    ],
)
def test_hard_rules_are_tried_in_order_and_all_come_before_approval(
    hist: History, active: int, rule: str
) -> None:
    p = policy(
        max_concurrent_jobs=10,
        approval={"nodes": 1},
        budgets={
            "max_failures_in_a_row": 3,
            "submissions_per_hour": 5,
            "node_hours_per_day": 50,
            "gpu_hours_per_day": 50,
        },
    )
    # breaks every rule whose history the case still has: the first one named decides
    everything = cost(tasks=2, nodes=2, gpu_hours=1, node_hours=1)
    assert evaluate(everything, p, hist, active).rule == rule


# --- what a running pipeline and a model brain read of the budgets ----------------------------


def test_budget_use_names_each_budget_the_site_sets_with_what_is_spent() -> None:
    budgets = Budgets.model_validate(
        {"submissions_per_hour": 10, "node_hours_per_day": 5.0, "gpu_hours_per_day": 2.0}
    )
    spent = History(submissions_last_hour=3, node_hours_last_day=1.5, gpu_hours_last_day=0.25)
    assert budget_use(budgets, spent) == [
        BudgetUse("submissions_per_hour", 3, 10),
        BudgetUse("node_hours_per_day", 1.5, 5.0),
        BudgetUse("gpu_hours_per_day", 0.25, 2.0),
    ]
    unset = Budgets.model_validate(
        {"submissions_per_hour": None, "node_hours_per_day": None, "gpu_hours_per_day": 2.0}
    )
    assert budget_use(unset, spent) == [BudgetUse("gpu_hours_per_day", 0.25, 2.0)]


def _tokens(session_id: str, charged: int, *spent: tuple[timedelta, int]) -> SessionFold:
    """A session whose model calls cost charged tokens in all, spent ago as given."""
    return SessionFold(
        session_id=session_id,
        tokens=TokenTotals(charged=charged),
        token_spending=[TokenSpend(at=NOW - ago, tokens=n) for ago, n in spent],
    )


def test_model_tokens_are_the_sessions_own_ever_and_every_sessions_last_24_hours() -> None:
    mine = _tokens("s1", 1000, (timedelta(hours=30), 600), (timedelta(hours=2), 400))
    other = _tokens("s2", 250, (timedelta(hours=24), 200), (timedelta(hours=24, seconds=1), 50))
    # the session's own fold read twice (it is also among the active ones) counts once
    assert model_tokens_from_folds([mine, other, mine], "s1", NOW) == ModelTokens(
        session=1000, last_day=600
    )
    # a session with no fold yet (no model call) has used nothing itself
    assert model_tokens_from_folds([other], "s3", NOW) == ModelTokens(session=0, last_day=200)


# --- check_limits: what one job may ask for -------------------------------------------------

LIMITS = SiteConfig.model_validate(
    {
        "cluster": "c",
        "paths": {"scratch": "/tmp", "allowed_roots": ["/tmp"]},
        "partitions": {
            "gpu": {
                "max_time": 3600,
                "max_nodes": 2,
                "max_cpus_per_node": 8,
                "max_mem_per_node": 4000,
                "max_gpus_per_node": 2,
                "gpu_type": "a100",
            },
            "cpu": {"default": True},
        },
        "accounts": {"allowed": ["lab", "other"]},
        "qos": {"allowed": ["normal", "high"]},
    }
)


def refusal_of(site: SiteConfig = LIMITS, **asked: Any) -> str:
    with pytest.raises(PolicyError) as err:
        check_limits(opts(**asked), site)
    return str(err.value)


def test_a_job_at_every_ceiling_of_its_partition_is_within_the_limits() -> None:
    at_ceilings = opts(
        partition="gpu", account="other", qos="high", time_limit_s=3600, nodes=2,
        cpus_per_task=8, mem_mb=4000, gpus=2, gpu_type="a100",
    )  # fmt: skip
    check_limits(at_ceilings, LIMITS)
    check_limits(opts(partition="gpu", gpus=0), LIMITS)  # no GPUs asked
    check_limits(opts(partition="gpu", gpus=1, gpu_type=None), LIMITS)  # any type
    check_limits(opts(partition="cpu", time_limit_s=10**6, mem_mb=10**6), LIMITS)  # no ceilings
    open_choice = LIMITS.model_copy(
        update={"accounts": LIMITS.accounts.model_copy(update={"allowed": []})}
    )
    check_limits(opts(partition="cpu", account="anyone"), open_choice)  # none listed: Slurm's


@pytest.mark.parametrize(
    ("asked", "refused", "rule"),
    [
        ({"time_limit_s": 3660}, "time limit 01:01:00", "allows at most 01:00:00"),
        ({"nodes": 3}, "3 nodes", "allows at most 2 nodes"),
        ({"cpus_per_task": 9}, "9 CPUs per task", "has at most 8 CPUs per node"),
        ({"mem_mb": 4001}, "memory 4001 MiB", "allows at most 4000 MiB per node"),
        ({"gpus": 3}, "3 GPUs", "has 2 GPUs per node"),
    ],
)  # fmt: skip
def test_one_past_a_ceiling_is_refused_naming_the_partition_and_its_limit(
    asked: dict[str, Any], refused: str, rule: str
) -> None:
    assert refusal_of(partition="gpu", **asked) == f"{refused} refused: partition 'gpu' {rule}"


def test_tasks_per_node_times_cpus_per_task_is_held_to_the_cpus_per_node() -> None:
    check_limits(opts(partition="gpu", ntasks_per_node=4, cpus_per_task=2), LIMITS)  # 8: at it
    check_limits(opts(partition="gpu", ntasks_per_node=8), LIMITS)  # -c unset: 1 CPU a task
    assert refusal_of(partition="gpu", ntasks_per_node=3, cpus_per_task=3) == (
        "--ntasks-per-node=3 x 3 CPUs per task (9 CPUs per node) refused: "
        "partition 'gpu' has at most 8 CPUs per node"
    )
    assert refusal_of(partition="gpu", ntasks_per_node=9).startswith(
        "--ntasks-per-node=9 x 1 CPUs per task (9 CPUs per node) refused"
    )
    check_limits(opts(partition="cpu", ntasks_per_node=10**5), LIMITS)  # no ceiling: Slurm's


def test_another_gpu_type_than_the_partitions_is_refused() -> None:
    assert refusal_of(partition="gpu", gpus=1, gpu_type="v100") == (
        "GPU type 'v100': partition 'gpu' has 'a100' GPUs"
    )


def test_gpus_on_a_partition_without_any_are_refused() -> None:
    assert (
        refusal_of(partition="cpu", gpus=1) == "1 GPUs refused: partition 'cpu' has 0 GPUs per node"
    )


def test_account_qos_and_partition_must_be_ones_the_site_allows_in_that_order() -> None:
    assert refusal_of(partition="cpu", account="x", qos="low") == (
        "account 'x' is not allowed here; allowed: lab, other"
    )
    assert refusal_of(partition=None, qos="low") == (
        "qos 'low' is not allowed here; allowed: normal, high"
    )
    assert refusal_of(partition=None, account="lab") == (
        "no partition given and the site config names no default partition"
    )
    assert refusal_of(partition="long") == "partition 'long' is not allowed here; allowed: gpu, cpu"

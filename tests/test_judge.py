"""The judge (agent/runtime/submission/judge.py) without Slurm: the real judge, templates,
session store and ledger, with the scheduler double as Slurm (tests/scheduler_double.py).

What is pinned: the person-first rules of an origin (a model's cancel and hold; a
conversation that has read job text may not submit or run a plan; a site may loosen
that); a request's verdict keeps the policy's decision and holds only what it allows; the
advice a site applies is taken by the judge itself (and only then is Slurm asked for
estimates), never on top of a person's choice; a person's approval lifts the thresholds
and nothing else; one look at the queue serves nested looks with one squeue; a held
approval is judged again against today's limits; an intent's parameters; a plan's total
and its origin's rule. test_advice_everywhere_lab.py shows the advice on the lab cluster.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness, SchedulerDouble

from jobsmith.adapters.scheduler import TestOnlyResult
from jobsmith.agent.runtime.submission.jobs import JobRequest
from jobsmith.agent.runtime.submission.judge import (
    CheckedJob,
    Judge,
    Origin,
    Who,
    intent_params,
    tainted_reason,
    total_cost,
)
from jobsmith.agent.runtime.submission.policy import Cost, Ruling
from jobsmith.agent.runtime.workflows.plans import Plan
from jobsmith.errors import PolicyError

READ = "the log of job 12"


def _request(**resources: Any) -> JobRequest:
    return JobRequest(template="command", params={"command": "true"}, **resources)


def _judge(tmp_path: Path, policy: dict[str, Any] | None = None, **kw: Any) -> Judge:
    return AgentHarness.build(tmp_path, policy, **kw).executor.judge


def _with_model(judge: Judge, tainted_actions: str) -> Judge:
    model = judge.site.model.model_copy(update={"tainted_actions": tainted_actions})
    judge.site = judge.site.model_copy(update={"model": model})
    return judge


# --- the person-first rules ------------------------------------------------------------------


def test_a_model_may_not_cancel_or_hold_unasked_and_a_person_may(tmp_path: Path) -> None:
    judge = _judge(tmp_path)
    model = Origin(who=Who.MODEL)
    for action in ("cancel", "hold"):
        reason = judge.person_first(action, model, ["7", "8"])
        assert reason == f"the model asks to {action} jobs 7, 8; only a person can allow that"
        assert judge.person_first(action, Origin(), ["7"]) is None
        assert judge.person_first(action, Origin(who=Who.BRAIN), ["7"]) is None
    assert judge.person_first("release", model, ["7"]) is None
    assert judge.person_first("submit", model) is None  # it has read nothing


def test_a_conversation_that_read_job_text_may_not_submit_or_run_a_plan(tmp_path: Path) -> None:
    judge = _judge(tmp_path)
    tainted = Origin(who=Who.MODEL, read=READ)
    for action in ("submit", "run_plan"):
        reason = judge.person_first(action, tainted)
        assert reason is not None and READ in reason and "tainted_actions" in reason
    for action in ("render", "test_only", "status", "rerun"):
        assert judge.person_first(action, tainted) is None
    assert _with_model(judge, "policy").person_first("submit", tainted) is None
    assert tainted_reason(None, "submit", "person") is None
    assert tainted_reason(READ, "submit", "policy") is None
    assert tainted_reason(READ, "cancel", "person") is None


def test_a_tainted_request_is_held_but_a_refusal_stays_a_refusal(tmp_path: Path) -> None:
    judge = _judge(tmp_path)
    tainted = Origin(who=Who.MODEL, read=READ)
    checked = judge.job(_request(), tainted)
    assert checked.decision == Ruling("allow")  # the policy's own verdict is kept
    verdict = checked.verdict()
    assert (verdict.verdict, verdict.rule) == ("approve", "person_first")
    assert READ in verdict.message
    assert judge.job(_request()).verdict() == Ruling("allow")  # a person's: as the policy says

    strict = _judge(tmp_path / "strict", {"approval": {"core_hours": 0.01}})
    held = strict.job(_request(), tainted)
    assert held.verdict().verdict == "approve" and held.verdict().rule != "person_first"

    refusing = _judge(tmp_path / "refusing", {"max_concurrent_jobs": 1}, slurm=_Busy())
    refused = refusing.job(_request(), tainted)
    assert refused.verdict() == refused.decision and refused.decision.verdict == "refuse"
    with pytest.raises(PolicyError, match="refused by policy"):
        refused.raise_if_refused()


class _Busy(SchedulerDouble):
    """A queue with 5 active tasks."""

    def active_tasks(self) -> int:
        super().active_tasks()
        return 5


# --- advice the site applies -----------------------------------------------------------------


class _SmallStartsFirst(SchedulerDouble):
    """Slurm's estimates: a job in partition small would start an hour before one in debug."""

    def test_only(self, script: str) -> TestOnlyResult:
        super().test_only(script)
        hour = 11 if "--partition=small" in script else 12
        start = datetime(2030, 1, 1, hour, 0)
        return TestOnlyResult(ok=True, estimated_start=start, message="estimated")


def test_the_earliest_partition_is_taken_where_the_site_applies_it(tmp_path: Path) -> None:
    slurm = _SmallStartsFirst()
    judge = _judge(tmp_path, {"advice": {"earliest_start": "apply"}}, slurm=slurm)
    checked = judge.job(_request())
    assert checked.job.options.partition == "small"
    assert checked.advice is not None and checked.advice.applied == ("earliest",)
    assert checked.advice.earliest == "small" and checked.advice.partition == "debug"
    asked = slurm.count("test_only")
    assert asked >= 2  # one estimate per partition the job fits

    # the person was shown the advice and chose: the judge takes nothing on top
    chosen = judge.job(_request(), Origin(advised=True))
    assert chosen.job.options.partition == "debug" and chosen.advice is None
    assert slurm.count("test_only") == asked  # and asks Slurm nothing


def test_advice_only_proposed_is_not_taken_and_costs_no_question(tmp_path: Path) -> None:
    slurm = _SmallStartsFirst()
    judge = _judge(tmp_path, {"advice": {"earliest_start": "propose"}}, slurm=slurm)
    checked = judge.job(_request())
    assert checked.job.options.partition == "debug" and checked.advice is None
    assert slurm.count("test_only") == 0
    offered = judge.advise(_request())  # asked for: offered, not taken
    assert offered.earliest == "small" and offered.applied == ()


def test_a_right_size_the_site_applies_without_history_changes_nothing(tmp_path: Path) -> None:
    judge = _judge(tmp_path, {"advice": {"right_size": "apply", "earliest_start": "off"}})
    checked = judge.job(_request(mem_mb=900))
    assert checked.job.options.mem_mb == 900
    assert checked.advice is not None and checked.advice.applied == ()


# --- what a person's approval lifts ----------------------------------------------------------


def test_an_approval_lifts_the_threshold_and_nothing_else(tmp_path: Path) -> None:
    judge = _judge(tmp_path, {"approval": {"core_hours": 0.01}})
    cost = Cost(tasks=1, nodes=1, core_hours=1.0, gpu_hours=0.0, node_hours=1.0)
    assert judge.spend(cost).verdict == "approve"
    assert judge.spend(cost, approval_given=True) == Ruling("allow")
    busy = _judge(tmp_path / "busy", {"max_concurrent_jobs": 1}, slurm=_Busy())
    assert busy.spend(cost, approval_given=True).verdict == "refuse"


def test_a_held_approval_is_judged_again_against_todays_limits(tmp_path: Path) -> None:
    judge = _judge(tmp_path)
    checked = judge.job(_request())
    asked = {
        "options": checked.job.options.model_dump(mode="json"),
        "template": "command",
        "step": {"action": "submit", "job": _request().model_dump(mode="json")},
        "cwd": str(tmp_path),
    }
    judge.again(asked)  # within the limits: no error
    over = {**asked, "options": {**asked["options"], "mem_mb": 999_999}}
    with pytest.raises(PolicyError, match="mem"):
        judge.again(over)
    busy = _judge(tmp_path / "busy", {"max_concurrent_jobs": 1}, slurm=_Busy())
    with pytest.raises(PolicyError, match="refused by policy"):
        busy.again(asked)


def test_an_intents_parameters_are_its_submit_steps(tmp_path: Path) -> None:
    step = {"action": "submit", "job": {"template": "command", "params": {"command": "x"}}}
    assert intent_params({"step": step}) == {"command": "x"}
    assert intent_params({"step": {"action": "rerun", "job_id": "5"}}) == {}
    assert intent_params({"step": {"action": "submit", "job": {"template": 3}}}) == {}
    assert intent_params({}) == {} and intent_params({"step": "submit"}) == {}


# --- one look at the queue -------------------------------------------------------------------


def test_one_look_at_the_queue_serves_nested_looks_with_one_squeue(tmp_path: Path) -> None:
    slurm = _Busy()
    judge = _judge(tmp_path, {"max_concurrent_jobs": 100}, slurm=slurm)
    with judge.one_look_at_the_queue():
        with judge.one_look_at_the_queue():
            judge.job(_request())
        judge.job(_request())  # the outer look still serves
        assert slurm.count("active_tasks") == 1
    judge.job(_request())
    assert slurm.count("active_tasks") == 2  # outside a look: one squeue per judgement
    unlimited = SchedulerDouble()
    _judge(tmp_path / "unlimited", {"max_concurrent_jobs": None}, slurm=unlimited).job(_request())
    assert unlimited.count("active_tasks") == 0  # no limit: no squeue


# --- a plan ----------------------------------------------------------------------------------

PLAN = {
    "name": "two",
    "steps": {
        "a": {"template": "command", "params": {"command": "true"}, "cpus_per_task": 2},
        "b": {"template": "command", "params": {"command": "true"}, "after_ok": ["a"]},
    },
}


def test_a_plan_is_judged_whole_and_a_tainted_one_waits_as_a_whole(tmp_path: Path) -> None:
    judge = _judge(tmp_path)
    plan = Plan.model_validate(PLAN)
    judged = judge.plan(plan)
    assert list(judged.checked) == ["a", "b"]
    assert judged.total == total_cost(job.cost for job in judged.checked.values())
    assert judged.total.tasks == 2 and judged.refusal() is None
    assert judged.approval_reason() is None and judged.document().policy["verdict"] == "allow"

    tainted = judge.plan(plan, Origin(who=Who.MODEL, read=READ))
    reason = tainted.approval_reason()
    assert reason is not None and READ in reason and not reason.startswith("plan step")
    assert tainted.document().policy["verdict"] == "approve"


def test_a_plans_cost_adds_tasks_and_hours_and_takes_the_most_nodes() -> None:
    one = Cost(tasks=2, nodes=1, core_hours=0.5, gpu_hours=0.25, node_hours=0.5)
    two = Cost(tasks=3, nodes=4, core_hours=1.25, gpu_hours=0.0, node_hours=2.0)
    assert total_cost([one, two]) == Cost(
        tasks=5, nodes=4, core_hours=1.75, gpu_hours=0.25, node_hours=2.5
    )


def test_a_checked_jobs_document_says_the_policys_verdict(tmp_path: Path) -> None:
    checked: CheckedJob = _judge(tmp_path, {"approval": {"core_hours": 0.01}}).job(
        _request(cpus_per_task=2)
    )
    doc = checked.document()
    assert doc.policy["verdict"] == "approve" and doc.policy["rule"] == "approval threshold"
    assert doc.script_sha256 == checked.job.script_sha256 and doc.template == "command"

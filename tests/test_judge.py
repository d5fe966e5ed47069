"""The judge (agent/runtime/submission/judging/judge.py) without Slurm: the real judge, templates,
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

import getpass
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import MIB, AgentHarness, SchedulerDouble

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import TestOnlyResult
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.judging.judge import (
    CheckedJob,
    Judge,
    Origin,
    Who,
    intent_params,
    tainted_reason,
    total_cost,
)
from jobsmith.agent.runtime.submission.judging.policy import Cost, Ruling
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.plans import Plan
from jobsmith.errors import PolicyError, TemplateError

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
    # exclude_nodes too: a model that excluded every node would keep a job from ever
    # starting; the watcher (the BRAIN's origin) keeps requeued jobs off bad nodes itself
    for action in ("cancel", "hold", "exclude_nodes"):
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
        assert judge.person_first(action, tainted) == (
            f"this conversation has read text that jobs, files or logs wrote ({READ}), which "
            "may carry instructions that are not yours: what it submits waits for you "
            "(model.tainted_actions in the site file)"
        )
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


# --- what a plan's judgement says (plan check) and records ----------------------------------


def _plan_judge(tmp_path: Path, policy: dict[str, Any], **kw: Any) -> Judge:
    return _judge(tmp_path, {"max_concurrent_jobs": 100, **policy}, **kw)


def test_a_plan_step_the_policy_refuses_refuses_the_plan_naming_the_step(tmp_path: Path) -> None:
    # step a costs 0.5 node-hours, above a daily budget of 0.4 on its own
    judged = _plan_judge(tmp_path, {"budgets": {"node_hours_per_day": 0.4}}).plan(
        Plan.model_validate(PLAN)
    )
    refused = (
        "refused by policy: plan step a: refused by policy (node-hours per day): 0 node-hours "
        "in the last 24 h plus 0.5 would pass the daily budget of 0.4"
    )
    assert judged.refusal() == refused
    assert judged.document().policy == {"verdict": "refuse", "message": refused}


def test_a_plan_whose_steps_fit_but_whose_total_does_not_is_refused_whole(tmp_path: Path) -> None:
    # each step's 0.5 node-hours fits a budget of 0.75; the plan's 1.0 does not
    judged = _plan_judge(tmp_path, {"budgets": {"node_hours_per_day": 0.75}}).plan(
        Plan.model_validate(PLAN)
    )
    assert all(job.decision == Ruling("allow") for job in judged.checked.values())
    refused = (
        "refused by policy: plan two: refused by policy (node-hours per day): 0 node-hours "
        "in the last 24 h plus 1 would pass the daily budget of 0.75"
    )
    assert judged.refusal() == refused
    assert judged.document().policy == {"verdict": "refuse", "message": refused}


def test_a_plan_above_a_threshold_waits_for_a_person_as_a_whole(tmp_path: Path) -> None:
    # a: 1 core-hour, b: 0.5; the plan's 1.5 is above 1.2 (neither step is)
    judged = _plan_judge(tmp_path, {"approval": {"core_hours": 1.2}}).plan(
        Plan.model_validate(PLAN)
    )
    assert judged.refusal() is None and judged.decision.verdict == "approve"
    wanted = "the plan as a whole: 1.5 core-hours is above the approval threshold of 1.2"
    assert judged.approval_reason() == wanted
    assert judged.document().policy == {"verdict": "approve", "message": wanted}


def test_a_plan_over_a_submit_limit_is_refused_by_plan_check_before_it_runs(
    tmp_path: Path,
) -> None:
    slurm = SchedulerDouble()
    slurm.submit_limit = {"normal": 1}  # the plan's two jobs would pass it
    judged = _plan_judge(tmp_path, {}, slurm=slurm).plan(Plan.model_validate(PLAN))
    refused = judged.refusal()
    assert refused is not None and refused.startswith(
        "refused by policy: plan two: refused by policy (submit limit): QoS normal (per user) "
        "allows at most 1 jobs"
    )
    assert "the plan's 2 jobs add 2" in refused
    assert judged.document().policy["verdict"] == "refuse"


def test_a_plans_intent_records_which_of_its_jobs_a_person_must_approve(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"max_concurrent_jobs": 100, "approval": {"core_hours": 0.75}})
    session = h.store.create()
    step = st.RunPlan(plan=Plan.model_validate(PLAN))
    wanted = "the plan as a whole: 1.5 core-hours is above the approval threshold of 0.75"
    with pytest.raises(ApprovalNeeded, match=re.escape(f"approval ({wanted})")):
        h.executor.run(session, step)
    assert h.slurm.count("submit") == 0
    (intent,) = [e for e in h.store.read(session) if e.kind is EventKind.INTENT]
    jobs = intent.data["jobs"]
    assert jobs["a"]["person_first"] == "1 core-hours is above the approval threshold of 0.75"
    assert jobs["b"]["person_first"] is None  # 0.5 core-hours: within the threshold


def test_a_plans_jobs_take_the_advice_the_site_applies_unless_the_person_chose(
    tmp_path: Path,
) -> None:
    slurm = _SmallStartsFirst()
    judge = _judge(tmp_path, {"advice": {"earliest_start": "apply"}}, slurm=slurm)
    plan = Plan.model_validate(PLAN)
    taken = judge.plan(plan)
    assert [job.job.options.partition for job in taken.checked.values()] == ["small", "small"]
    asked = slurm.count("test_only")
    chosen = judge.plan(plan, Origin(advised=True))
    assert [job.job.options.partition for job in chosen.checked.values()] == ["debug", "debug"]
    assert all(job.advice is None for job in chosen.checked.values())
    assert slurm.count("test_only") == asked


# --- the right-size the site applies, from the template's own runs ---------------------------


def _ran(h: AgentHarness, job_id: str, template: str, params: dict[str, Any], **usage: Any) -> None:
    """A job jobsmith submitted from template that completed having used usage."""
    h.ledger.record(
        SubmissionRecord(
            job_id=job_id,
            cluster="doublelab",
            template=template,
            params=params,
            options=JobOptions(job_name=f"{template}.js-0123456789ab"),
            script_sha256="0" * 64,
            submitted_at=datetime.now(),
        )
    )
    h.slurm.set_state(job_id, JobState.COMPLETED, **usage)


def test_the_right_size_the_site_applies_learns_from_the_templates_runs(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, {"advice": {"right_size": "apply", "earliest_start": "off"}})
    for job_id in ("1", "2", "3"):
        _ran(h, job_id, "command", {"command": "true"}, max_rss_bytes=300 * MIB, elapsed_s=600)
    checked = h.executor.judge.job(_request(mem_mb=2000))
    assert checked.advice is not None and checked.advice.applied == ("right_size",)
    assert checked.job.options.mem_mb == 768  # 300 MiB used: 300 + 256, to 256 MiB steps


def test_a_resource_a_template_takes_from_a_parameter_is_never_right_sized(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, {"advice": {"right_size": "apply", "earliest_start": "off"}})
    (tmp_path / "train.py").write_text("print('hi')\n")
    params = {"script": str(tmp_path / "train.py"), "cpus": 2}
    for job_id in ("1", "2", "3"):  # 2 CPUs allocated, 0.1 of one busy: far fewer would do
        _ran(
            h, job_id, "torch_train", params,
            max_rss_bytes=300 * MIB, elapsed_s=600, total_cpu_s=60, alloc_cpus=2,
        )  # fmt: skip
    request = JobRequest(
        template="torch_train", params=params, partition="gpu", mem_mb=4000, time_limit_s=3600
    )
    checked = h.executor.judge.job(request)
    assert checked.advice is not None and checked.advice.sizing is not None
    assert "cpus_per_task" not in checked.advice.sizing.proposed()  # set by the cpus parameter
    assert checked.job.options.cpus_per_task == 2 and checked.job.options.mem_mb == 768


# --- a held approval judged again ------------------------------------------------------------


def _asked(judge: Judge, request: JobRequest, cwd: Path) -> dict[str, Any]:
    """What an approval request records of request, checked in cwd."""
    judge.cwd, before = cwd, judge.cwd
    try:
        options = judge.job(request).job.options
    finally:
        judge.cwd = before
    return {
        "options": options.model_dump(mode="json"),
        "template": request.template,
        "step": {"action": "submit", "job": request.model_dump(mode="json")},
        "cwd": str(cwd),
    }


def test_a_held_approval_resolves_its_inputs_where_it_was_asked_as_they_are_now(
    tmp_path: Path,
) -> None:
    judge = _judge(tmp_path)  # its own directory has no in0.txt
    work = tmp_path / "work"
    work.mkdir()
    (work / "in0.txt").write_text("x")
    request = JobRequest(template="file_array", params={"files": "in0.txt", "program": "gzip"})
    asked = _asked(judge, request, work)
    judge.again(asked)  # found where the person asked: no error
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    (work / "in0.txt").unlink()
    (work / "in0.txt").symlink_to(outside)  # replaced by a link out of the allowed roots
    with pytest.raises(PolicyError, match="is outside the allowed roots"):
        judge.again(asked)
    # a request recorded before its directory was: the judge's own, where in0.txt is not
    with pytest.raises(TemplateError, match=r"in0\.txt"):
        judge.again({k: v for k, v in asked.items() if k != "cwd"})


def test_a_held_array_is_judged_again_against_the_queued_jobs_limit(tmp_path: Path) -> None:
    slurm = SchedulerDouble()
    judge = _judge(tmp_path, slurm=slurm)
    for i in range(3):
        (tmp_path / f"in{i}.txt").write_text("x")
    files = ",".join(f"in{i}.txt" for i in range(3))
    asked = _asked(
        judge, JobRequest(template="file_array", params={"files": files, "program": "gzip"}),
        tmp_path,
    )  # fmt: skip
    judge.again(asked)
    slurm.submit_limit = {"normal": 2}  # since it was asked, the QoS allows 2 queued
    with pytest.raises(PolicyError, match=r"\(submit limit\).*this submission adds 3"):
        judge.again(asked)


# --- the scheduler's limits on queued jobs ---------------------------------------------------


def test_each_qos_of_a_plan_is_asked_once_for_this_users_limits(tmp_path: Path) -> None:
    slurm = SchedulerDouble()
    slurm.submit_limit = {"normal": 5, "tiny": 1}
    slurm.submit(_script(), JobOptions(job_name="other.js-0123456789ab", qos="tiny"))
    judge = _judge(tmp_path, slurm=slurm)
    plan = {
        "name": "mixed",
        "steps": {
            "a": {"template": "command", "params": {"command": "true"}},
            "b": {"template": "command", "params": {"command": "true"}, "after_ok": ["a"]},
            "c": {"template": "command", "params": {"command": "true"}, "qos": "tiny"},
        },
    }
    refused = judge.plan(Plan.model_validate(plan)).refusal()
    assert refused is not None and "QoS tiny (per user) allows at most 1 jobs" in refused
    asked = [args for name, args in slurm.calls if name == "submit_limits"]
    assert [opts.qos for _, opts in asked] == [None, "tiny"]  # a and b share normal's answer
    assert {user for user, _ in asked} == {getpass.getuser()}


def _script() -> str:
    return "#!/bin/bash\ntrue\n"

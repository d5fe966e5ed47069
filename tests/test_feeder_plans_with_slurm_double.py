"""A plan whose array step is over the site's submit limits (issue 28 item 1, for render
farms: agent/runtime/workflows/feeding/followers.py), against the scheduler double: the
step fed as a workload of the plan's session, the steps after it submitted once by
whichever actor feeds the last part, waiting for every part's job, never after a cancel.
tests/test_feeder_plans_lab.py runs render-frames so on the real Slurm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness

from jobsmith.adapters.options import DependencyKind
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.workflows.feeding import feeder
from jobsmith.agent.runtime.workflows.feeding.followers import (
    PlanShapeError,
    fed_shape,
    with_parts,
)
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.progress import workload_progress
from jobsmith.agent.runtime.workflows.frames import RenderRequest, render_plan
from jobsmith.agent.runtime.workflows.planrun import plan_of, status_document
from jobsmith.agent.runtime.workflows.plans import Plan
from jobsmith.errors import PolicyError

POLICY: dict[str, Any] = {
    "max_concurrent_jobs": 100,
    "approval": {"core_hours": 1000, "gpu_hours": 8, "nodes": 4},
    "budgets": {"submissions_per_hour": 100, "max_failures_in_a_row": 5},
}


def cmd(command: str, **more: Any) -> dict[str, Any]:
    """A step of one command in QoS tiny, its job named after the command's first word."""
    name = command.split()[-1].strip("$_").lower()[:12]
    fields = {"template": "command", "params": {"command": command}, "qos": "tiny"}
    return {**fields, "job_name": name, **more}


#: a transcode's shape: an array (fed), the sound beside it, a join after the array, a
#: finish after the join and the sound
PLAN = Plan.model_validate(
    {
        "name": "farm",
        "steps": {
            "video": cmd("echo video $SLURM_ARRAY_TASK_ID", array="0-9", job_name="video"),
            "audio": cmd("echo audio"),
            "join": cmd("echo join", after_ok=["video"]),
            "finish": cmd("echo finish", after_ok=["join", "audio"]),
        },
    }
)


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    harness = AgentHarness.build(tmp_path, POLICY)
    harness.slurm.submit_limit = {"tiny": 4}
    return harness


def end_all(h: AgentHarness) -> None:
    for job_id in list(h.slurm.jobs):
        h.slurm.set_state(job_id, JobState.COMPLETED)


def submitted(h: AgentHarness) -> dict[str, str]:
    """job name (without its tag) -> job id, of what the double got."""
    return {o.job_name.split(".js-")[0]: j for j, o in h.slurm.options.items()}


# --- the pure parts ----------------------------------------------------------------------


def test_the_steps_after_a_fed_step_are_its_followers_in_plan_order(tmp_path: Path) -> None:
    assert fed_shape(PLAN, ["video"]) == ("video", ("join", "finish"))
    request = RenderRequest(tmp_path / "s.blend", tmp_path / "o", 1, 40000, 1, video=tmp_path / "v")
    render = render_plan(request)
    assert fed_shape(render, ["render"]) == ("render", ("check", "thumbs", "encode"))


def test_plans_the_feeder_cannot_follow_are_refused_naming_the_step() -> None:
    two = Plan.model_validate(
        {"name": "two", "steps": {"a": cmd("a", array="0-9"), "b": cmd("b", array="0-9")}}
    )
    with pytest.raises(PlanShapeError, match=r"steps a, b are each over"):
        fed_shape(two, ["a", "b"])
    late = Plan.model_validate(
        {"name": "late", "steps": {"a": cmd("a"), "b": cmd("b", array="0-9", after_ok=["a"])}}
    )
    with pytest.raises(PlanShapeError, match=r"step b is over the site's submit limits and waits"):
        fed_shape(late, ["b"])
    notok = Plan.model_validate(
        {"name": "n", "steps": {"a": cmd("a", array="0-9"), "b": cmd("b", after_not_ok=["a"])}}
    )
    with pytest.raises(PlanShapeError, match=r"step b waits for step a with after_not_ok"):
        fed_shape(notok, ["a"])


def test_a_follower_waits_for_every_parts_job_and_its_other_steps() -> None:
    ids = with_parts({"audio": "7"}, "video", ["11", "12", "13"])
    ids["join"] = "14"
    [dep] = PLAN.request("join", ids).dependencies
    assert (dep.kind, dep.job_ids) == (DependencyKind.AFTEROK, ("11", "12", "13"))
    [dep] = PLAN.request("finish", ids).dependencies
    assert dep.job_ids == ("14", "7")
    anyway = Plan.model_validate(
        {"name": "a", "steps": {"v": cmd("v", array="0-9"), "w": cmd("w", after_any=["v"])}}
    )
    [dep] = anyway.request("w", with_parts({}, "v", ["1", "2"])).dependencies
    assert (dep.kind, dep.job_ids) == (DependencyKind.AFTERANY, ("1", "2"))


# --- against the double ------------------------------------------------------------------


def test_the_plan_feeds_its_array_and_the_last_feeder_submits_the_followers_once(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    result = h.executor.run(session, st.RunPlan(plan=PLAN))
    summary = result.summary
    assert list(summary["jobs"]) == ["audio"]  # the only step that fits with the plan
    assert (summary["workload_tasks"], summary["workload_parts"]) == (10, 3)
    assert summary["followers"] == ["join", "finish"]
    # audio and nothing else: audio takes one of the 4 places, so part 0 (4 tasks) waits
    assert list(submitted(h)) == ["audio"]
    text = next(e for e in h.store.read(session) if e.kind is EventKind.INTENT).data["script"]
    assert "### workload: step video: 10 tasks" in text and "then join, finish" in text
    end_all(h)
    fed = [r.step_id for r in feeder.feed_session(h.executor, session)]
    assert fed == [f"{result.step_id}.video.p0"]
    end_all(h)
    assert len(feeder.feed_session(h.executor, session)) == 1  # part 1, left queued
    h.slurm.submit_limit = {"tiny": 100}  # room for the last part while part 1 waits
    fed = [r.step_id for r in feeder.feed_session(h.executor, session)]  # the last part,
    plan = result.step_id
    assert fed == [f"{plan}.video.p2", f"{plan}.join", f"{plan}.finish"]  # then both
    jobs = submitted(h)
    parts = [jobs[f"video.p{i}"] for i in range(3)]
    [join] = h.slurm.options[jobs["join"]].dependencies
    # part 0 completed (met: Slurm may have forgotten it); parts 1 and 2 are waited for
    assert join.kind is DependencyKind.AFTEROK and list(join.job_ids) == parts[1:]
    [finish] = h.slurm.options[jobs["finish"]].dependencies
    assert list(finish.job_ids) == [jobs["join"], jobs["audio"]]
    assert f"--dependency=afterok:{parts[1]}:{parts[2]}" in h.slurm.scripts[jobs["join"]]
    end_all(h)
    assert feeder.feed_session(h.executor, session) == []  # nothing twice
    assert FeedingIndex.beside(h.executor.ledger).entries() == []
    events = h.store.read(session)
    assert plan_of(events).job_ids.keys() == {"audio", "join", "finish"}
    claims = [e.step_id for e in events if e.kind is EventKind.CLAIMED]
    assert claims.count(f"{plan}.join") == 1 and claims.count(f"{plan}.finish") == 1


def test_followers_wait_for_room_and_a_fresh_process_submits_them(h: AgentHarness) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    for _ in range(2):
        end_all(h)
        feeder.feed_session(h.executor, session)
    h.slurm.submit_limit = {"tiny": 2}  # the last part (2 tasks) fills it: join must wait
    end_all(h)
    waits: list[str] = []
    fed = [r.step_id for r in feeder.feed_session(h.executor, session, waits)]
    assert fed == [f"{plan}.video.p2"] and waits and waits[0].startswith("submit limit")
    [progress] = workload_progress(session, h.store.read(session))
    assert progress.followers == ("join", "finish") and progress.feeding
    assert "join, finish: wait for workload" in progress.line()
    assert progress.followers_glance() == "join, finish wait for it"
    events = h.store.read(session)
    rows = {s.name: s.reason for s in status_document(session, plan_of(events), {}, events).steps}
    assert rows["join"] == f"join, finish: wait for workload {plan}.video, every part submitted"
    assert rows["video"] is not None and rows["video"].startswith(f"workload {plan}.video: 10")
    assert FeedingIndex.beside(h.executor.ledger).sessions() == {session}  # still listed
    end_all(h)
    fresh = h.with_policy(POLICY)  # another process, after a crash: only the session
    fed = [r.step_id for r in feeder.feed_session(fresh, session)]
    assert fed == [f"{plan}.join", f"{plan}.finish"]
    assert FeedingIndex.beside(h.executor.ledger).entries() == []


def test_two_actors_never_submit_a_follower_twice(h: AgentHarness, monkeypatch: Any) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    for _ in range(2):
        end_all(h)
        feeder.feed_session(h.executor, session)
    end_all(h)
    other = h.with_policy(POLICY)  # a second process: the watcher, while `wait` feeds
    judge = type(h.executor.judge)
    real = judge.spend
    raced: list[list[str]] = []

    def spend(self: Any, *args: Any, **kw: Any) -> Any:
        ruling = real(self, *args, **kw)
        jobs = kw.get("jobs") or []
        follower = jobs and jobs[0].job_name.startswith("join")
        if self is h.executor.judge and follower and not raced:  # between look and claim
            raced.append([r.step_id for r in feeder.feed_session(other, session)])
        return ruling

    monkeypatch.setattr(judge, "spend", spend)
    fed = [r.step_id for r in feeder.feed_session(h.executor, session)]
    assert raced == [[f"{plan}.join", f"{plan}.finish"]]  # the other submitted both
    assert f"{plan}.join" not in fed and f"{plan}.finish" not in fed  # this one, neither
    names = [o.job_name.split(".js-")[0] for o in h.slurm.options.values()]
    assert names.count("join") == 1 and names.count("finish") == 1


def test_a_cancelled_workload_never_submits_its_followers(h: AgentHarness) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    end_all(h)
    feeder.feed_session(h.executor, session)  # part 0
    cancelled = feeder.cancel(h.executor, session, f"{plan}.video")
    assert cancelled == [submitted(h)["video.p0"]]
    end_all(h)
    assert feeder.feed_session(h.executor, session) == []
    assert not {"join", "finish"} & submitted(h).keys()
    [progress] = workload_progress(session, h.store.read(session))
    assert not progress.feeding and "not to be submitted" in progress.line()


def test_the_approval_covers_the_whole_plan_and_names_the_workload(h: AgentHarness) -> None:
    strict = {**POLICY, "approval": {"core_hours": 0.001, "gpu_hours": 8, "nodes": 4}}
    ex = h.with_policy(strict)
    session = h.store.create()
    with pytest.raises(ApprovalNeeded):
        ex.run(session, st.RunPlan(plan=PLAN))
    asked = next(e for e in h.store.read(session) if e.kind is EventKind.APPROVAL_ASKED)
    assert asked.data["cost"]["tasks"] == 13  # every task of the plan, the parts' too
    assert "10 tasks" in asked.data["script"] and "fed in 3 parts" in asked.data["script"]
    assert h.slurm.count("submit") == 0


def test_a_plan_with_two_steps_over_the_limits_is_refused_naming_them(h: AgentHarness) -> None:
    two = Plan.model_validate(
        {"name": "two", "steps": {"a": cmd("a", array="0-9"), "b": cmd("b", array="0-9")}}
    )
    with pytest.raises(PolicyError, match=r"plan two: steps a, b are each over"):
        h.executor.run(h.store.create(), st.RunPlan(plan=two))
    assert h.slurm.count("submit") == 0


def test_a_failed_part_under_after_ok_keeps_the_followers_back_with_a_note(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    end_all(h)
    feeder.feed_session(h.executor, session)  # part 0
    h.slurm.set_state(submitted(h)["video.p0"], JobState.FAILED)
    h.slurm.submit_limit = {"tiny": 100}
    fed = [r.step_id for r in feeder.feed_session(h.executor, session)]
    assert fed == [f"{plan}.video.p1", f"{plan}.video.p2"]  # the parts, not the followers
    assert not {"join", "finish"} & submitted(h).keys()
    notes = [e.data["feeding"] for e in h.store.read(session) if e.kind is EventKind.NOTE]
    assert notes and "step join is not submitted" in notes[-1] and "ended FAILED" in notes[-1]
    assert FeedingIndex.beside(h.executor.ledger).sessions() == {session}  # cancel ends it


def test_a_cancel_after_the_followers_were_submitted_cancels_them_with_the_parts(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    h.slurm.submit_limit = {"tiny": 100}
    end_all(h)
    feeder.feed_session(h.executor, session)  # parts 0 to 2, join, finish: all queued
    jobs = submitted(h)
    cancelled = feeder.cancel(h.executor, session, f"{plan}.video")
    expected = [jobs[n] for n in ("video.p0", "video.p1", "video.p2", "join", "finish")]
    assert cancelled == expected
    assert jobs["audio"] not in cancelled  # ended, and not the workload's


def test_a_cancel_recorded_while_a_followers_sbatch_runs_cancels_that_job(
    h: AgentHarness, monkeypatch: Any
) -> None:
    session = h.store.create()
    plan = h.executor.run(session, st.RunPlan(plan=PLAN)).step_id
    h.slurm.submit_limit = {"tiny": 100}
    end_all(h)
    real = type(h.slurm).submit

    def submit(self: Any, script: str, options: Any) -> Any:
        answer = real(self, script, options)
        if options.job_name.startswith("join."):  # another actor cancels meanwhile
            feeder.stop_feeding(h.store, session, f"{plan}.video")
        return answer

    monkeypatch.setattr(type(h.slurm), "submit", submit)
    fed = [r.step_id for r in feeder.feed_session(h.executor, session)]
    assert fed[-1] == f"{plan}.join"  # submitted, then seen cancelled: finish never is
    join = submitted(h)["join"]
    assert h.slurm.jobs[join].state is JobState.CANCELLED
    assert "finish" not in submitted(h)

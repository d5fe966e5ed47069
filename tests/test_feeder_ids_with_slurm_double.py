"""A fed workload named by its step id (issue 28, the fed workload's gaps), against the
scheduler double: `cancel STEP_ID` and `wait STEP_ID` take the id `submit` and
`status` print, alone or among job ids, whether or not any part has a job; a chat's
and the MCP server's `status` tool (the executor's status step) shows the same line as
`status`; an id that is neither form, or names no workload, is one line and exit 2.
The lab test (tests/test_feeder_ids_lab.py) runs cancel and wait on the real Slurm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from scheduler_double import AgentHarness
from test_feeder_later_with_slurm_double import (
    OWN,
    app_on,
    end,
    full_queue,
    js,
    submit_workload,
)

from jobsmith.adapters.jobid import JOB_OR_TASK, BadJobId, JobRef
from jobsmith.adapters.states import JobState
from jobsmith.agent.app import App
from jobsmith.agent.brains.ask_tools import AskTools
from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.judging.judge import Origin, Who
from jobsmith.agent.runtime.workflows.feeding import feeder
from jobsmith.agent.runtime.workflows.feeding.awaited import AwaitedWorkloads
from jobsmith.agent.runtime.workflows.feeding.index import FeedingIndex
from jobsmith.agent.runtime.workflows.feeding.progress import WorkloadProgress
from jobsmith.agent.runtime.workflows.feeding.reference import (
    UnknownWorkload,
    WorkloadRef,
    find_workload,
    parse_targets,
)


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return full_queue(tmp_path)


def run(app: App, *argv: str) -> Result:
    return CliRunner().invoke(cli, list(argv), obj=app, catch_exceptions=False)


# --- parsing: one place, both forms ---------------------------------------------------


def test_job_ids_and_step_ids_are_told_apart_in_one_list() -> None:
    refs = parse_targets(["12,st-d45587b1db", " 13_4 ", "st-d45587b1db"], JOB_OR_TASK)
    assert refs == [JobRef(12), WorkloadRef("st-d45587b1db"), JobRef(13, task=4)]


@pytest.mark.parametrize("bad", ["st-xyz", "st-D45587B1DB", "st-d45587b1db0", "--user=alice", ""])
def test_anything_else_is_refused_naming_it_and_both_forms(bad: str) -> None:
    with pytest.raises(BadJobId) as err:
        parse_targets([bad])
    message = str(err.value)
    assert repr(bad) in message and "1234" in message and "st-d45587b1db" in message
    assert "\n" not in message


# --- cancel by step id ----------------------------------------------------------------


def test_cancel_of_a_workload_with_no_job_records_it_and_feeds_nothing_after(
    h: AgentHarness,
) -> None:
    _, result = submit_workload(h)
    app = app_on(h)
    said = js(app, "cancel", result.step_id)
    assert (
        said.stdout
        == f"cancelled workload {result.step_id}: no part of it is submitted after this\n"
    )
    assert h.slurm.count("cancel") == 0  # nothing to scancel: no part had a job
    assert FeedingIndex.beside(h.ledger).entries() == []
    end(h, OWN)  # room appears: the watcher feeds nothing of it
    js(app, "watch", "--once")
    assert h.slurm.count("submit") == 0
    line = "10 tasks: 0 done, 0 running, 10 not to be submitted (cancelled)"
    assert f"workload {result.step_id}: {line}" in js(app, "status", result.step_id).stdout
    [shown] = json.loads(js(app, "status", result.step_id, "--json").stdout)["workloads"]
    assert (shown["cancelled"], shown["line"]) == (True, line)
    assert h.slurm.count("status") == 0  # no part had a job: nothing asked of Slurm


def test_a_second_cancel_says_it_is_already_cancelled(h: AgentHarness) -> None:
    _, result = submit_workload(h)
    app = app_on(h)
    js(app, "cancel", result.step_id)
    again = js(app, "cancel", result.step_id)
    assert again.stdout == f"workload {result.step_id} is already cancelled\n"
    doc = json.loads(js(app, "cancel", result.step_id, "--json").stdout)
    assert (doc["workloads"], doc["already_cancelled"], doc["job_ids"]) == (
        [],
        [result.step_id],
        [],
    )


def test_cancel_by_step_id_cancels_the_live_parts_with_the_job_ids_named(
    h: AgentHarness,
) -> None:
    end(h, OWN)
    session, result = submit_workload(h)  # the first part of 4 fits
    part = str(result.summary["job_id"])
    h.slurm.set_state("950", JobState.RUNNING)  # a job of the user's, named beside it
    doc = json.loads(js(app_on(h), "cancel", "950", result.step_id, "--json").stdout)
    assert doc["workloads"] == [result.step_id]
    assert sorted(doc["job_ids"]) == sorted(["950", part])
    assert h.slurm.count("cancel") == 1  # one scancel for all
    end(h, list(h.slurm.jobs))
    assert feeder.feed_session(h.executor, session) == []  # nothing fed after


def test_an_unknown_step_id_is_one_line_exit_2_and_stops_nothing(h: AgentHarness) -> None:
    _, result = submit_workload(h)
    app = app_on(h)
    for argv in (["cancel", result.step_id, "st-0000000000"], ["wait", "st-0000000000"]):
        out = run(app, *argv)
        assert out.exit_code == 2, out.output
        [line] = out.stderr.splitlines()
        assert "st-0000000000" in line and "1234" in line, line
    with pytest.raises(UnknownWorkload):
        find_workload(h.store, h.ledger, WorkloadRef("st-0000000000"))
    assert FeedingIndex.beside(h.ledger).entries() != []  # the known one was not stopped
    bad = run(app, "cancel", "nonsense")
    assert bad.exit_code == 2 and "'nonsense'" in bad.stderr and "st-" in bad.stderr


def test_a_workload_is_found_after_it_left_the_feeding_index(h: AgentHarness) -> None:
    end(h, OWN)
    session, result = submit_workload(h, tasks=5)  # parts of 4 and 1: the first fits
    end(h, list(h.slurm.jobs))
    assert len(feeder.feed_session(h.executor, session)) == 1  # the last: out of the index
    assert FeedingIndex.beside(h.ledger).entries() == []
    found = find_workload(h.store, h.ledger, WorkloadRef(result.step_id))
    assert (found.session_id, found.tasks) == (session, 5)


def test_a_model_s_cancel_of_a_workload_is_held_for_a_person(h: AgentHarness) -> None:
    session, result = submit_workload(h)
    step = st.Cancel(workloads=[result.step_id])
    with pytest.raises(ApprovalNeeded) as held:
        h.executor.run(session, step, origin=Origin(who=Who.MODEL))
    assert f"workloads {result.step_id}" in str(held.value)
    assert FeedingIndex.beside(h.ledger).entries() != []  # nothing done before a person
    done = h.executor.run_approved_control(session, step)  # a person approved it
    assert done.summary["workloads"] == [result.step_id]
    assert FeedingIndex.beside(h.ledger).entries() == []


def test_a_cancel_step_names_a_job_or_a_workload() -> None:
    with pytest.raises(ValueError, match="at least one"):
        st.Cancel()
    with pytest.raises(ValueError, match="st-d45587b1db"):
        st.Cancel(workloads=["12"])


# --- wait by step id ------------------------------------------------------------------


def test_a_workload_counts_as_ended_only_when_nothing_of_it_is_left() -> None:
    def at(**counts: int) -> JobState:
        base = dict(done=0, running=0, queued=0, failed=0, not_submitted=0, cancelled=False)
        return WorkloadProgress(
            session_id="s", step_id="st-a", tasks=10, parts=3, **{**base, **counts}
        ).state()

    assert at(not_submitted=10) is JobState.PENDING
    assert at(done=6, not_submitted=4) is JobState.PENDING  # parts to feed yet
    assert at(done=6, running=4) is JobState.RUNNING
    assert at(done=10) is JobState.COMPLETED
    assert at(done=9, failed=1) is JobState.FAILED
    assert at(not_submitted=10, cancelled=True) is JobState.CANCELLED
    assert at(done=4, running=2, not_submitted=4, cancelled=True) is JobState.RUNNING
    assert at(done=10, cancelled=True) is JobState.COMPLETED  # cancelled after it all ran


def test_waiting_for_a_workload_feeds_it_as_room_appears(h: AgentHarness) -> None:
    session, result = submit_workload(h)
    fed: list[list[str]] = []

    def feed(sessions: list[str]) -> None:
        fed.append(sessions)
        feeder.feed_sessions(h.executor, sessions)

    whole = AwaitedWorkloads.of(h.store, h.ledger, [WorkloadRef(result.step_id)], feed)
    assert whole.jobs() == [] and fed == [[session]]  # full: nothing fed, nothing to poll
    [status] = whole.statuses({}).values()
    assert status.job_id == result.step_id and status.state is JobState.PENDING
    assert status.reason == "10 tasks: 0 done, 0 running, 10 not yet submitted"
    end(h, OWN)
    [part] = whole.jobs()
    assert h.slurm.count("submit") == 1
    feeder.cancel(h.executor, session, result.step_id)
    fed.clear()
    assert whole.jobs() == [part] and fed == []  # cancelled: never fed again
    h.slurm.set_tasks(part, dict.fromkeys(range(4), JobState.CANCELLED), JobState.CANCELLED)
    ended = whole.statuses(h.slurm.status([part], None))  # type: ignore[arg-type]
    assert ended[result.step_id].state is JobState.CANCELLED
    assert ended[result.step_id].reason == (
        "10 tasks: 0 done, 0 running, 4 failed, 6 not to be submitted (cancelled)"
    )


def test_wait_on_a_workload_that_starts_unfed_returns_0_once_every_task_completed(
    h: AgentHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, result = submit_workload(h)  # nothing fits: no job
    submit = h.slurm.submit

    def runs_at_once(script: str, options: Any) -> Any:  # each part completes at once
        done = submit(script, options)
        first, _, last = str(options.array).partition("%")[0].partition("-")
        tasks = dict.fromkeys(range(int(first), int(last or first) + 1), JobState.COMPLETED)
        h.slurm.set_tasks(str(done.job_id), tasks, JobState.COMPLETED)
        return done

    monkeypatch.setattr(h.slurm, "submit", runs_at_once)
    end(h, OWN)  # room, and no watcher: the wait feeds it
    out = run(app_on(h), "wait", result.step_id, "--timeout", "120", "--json")
    assert out.exit_code == 0, out.output
    [job] = json.loads(out.stdout)["jobs"]
    assert (job["job_id"], job["state"]) == (result.step_id, "COMPLETED")
    assert [o.array for o in h.slurm.options.values()][len(OWN) :] == ["0-3", "0-3", "0-1"]


def test_wait_on_a_cancelled_workload_ends_as_a_cancelled_job_does(h: AgentHarness) -> None:
    _, result = submit_workload(h)
    app = app_on(h)
    js(app, "cancel", result.step_id)
    out = run(app, "wait", result.step_id, "--timeout", "30", "--json")
    assert out.exit_code == 1, out.output  # as for a cancelled job
    [job] = json.loads(out.stdout)["jobs"]
    assert (job["job_id"], job["state"]) == (result.step_id, "CANCELLED")


# --- the status tool of a chat and of the MCP server ----------------------------------


def test_the_status_tool_shows_a_workload_with_no_job_with_status_s_line(
    h: AgentHarness,
) -> None:
    session, result = submit_workload(h)
    tools = AskTools(h.executor, session, recent_jobs=list)  # no job of the user's at all
    outcome = tools.run("status", {})
    body = json.loads(outcome.content.split("\n")[1])
    [shown] = body["workloads"]
    assert shown["step_id"] == result.step_id
    assert shown["line"] == "10 tasks: 0 done, 0 running, 10 not yet submitted"
    named = tools.run("status", {"job_ids": ["900"]})
    assert result.step_id in named.content
    status = js(app_on(h), "status", "--all").stdout
    assert f"workload {result.step_id}: {shown['line']}" in status


def test_the_mcp_wait_reads_a_workload_as_one_job_until_it_is_cancelled(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.faces import mcp_wait

    session, result = submit_workload(h)
    app = app_on(h)
    found = mcp_wait.workloads_of(app, [result.step_id])
    [(step_id, job)] = mcp_wait.job_states(app, [], found).items()
    assert step_id == result.step_id and job is not None
    assert (job.state, job.reason) == (
        JobState.PENDING,
        "10 tasks: 0 done, 0 running, 10 not yet submitted",
    )
    assert not mcp_wait.all_ended({step_id: job})
    feeder.cancel(h.executor, session, result.step_id)
    ended = mcp_wait.job_states(app, [], found)
    assert ended[step_id] is not None and ended[step_id].state is JobState.CANCELLED
    assert mcp_wait.all_ended(ended)
    with pytest.raises(UnknownWorkload):
        mcp_wait.workloads_of(app, ["st-0000000000"])


def test_the_mcp_wait_takes_job_ids_or_workloads_and_refuses_neither() -> None:
    from jobsmith.agent.faces.mcp_wait import WaitInput

    assert WaitInput.model_validate({"workloads": ["st-d45587b1db"]}).job_ids == []
    for bad in ({}, {"job_ids": []}, {"workloads": ["12"]}):
        with pytest.raises(ValueError):
            WaitInput.model_validate(bad)


def test_wait_on_a_workload_that_cannot_start_gives_up_at_its_timeout(h: AgentHarness) -> None:
    _, result = submit_workload(h)  # the user's own jobs keep the queue full
    out = run(app_on(h), "wait", result.step_id, "--timeout", "1")
    assert out.exit_code == 7, out.output
    assert f"{result.step_id} PENDING (10 tasks: 0 done, 0 running, 10 not yet" in out.stderr
    assert h.slurm.count("submit") == 0


def test_a_cancel_or_hold_of_job_ids_alone_says_nothing_of_workloads(h: AgentHarness) -> None:
    h.slurm.set_state("950", JobState.PENDING)
    app = app_on(h)
    for action in ("hold", "cancel"):
        doc = json.loads(js(app, action, "950", "--json").stdout)
        assert doc == {"action": action, "job_ids": ["950"], "already_running": []}

"""What Slurm accepted against what was checked (issue 24, item 2): the comparison, and
the first poll that reads a job acting on it (with the scheduler double as Slurm; the
lab test that a real cli_filter's change is caught is in tests/test_cli.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness, HarnessParts

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.accepted import altered
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.watcher.news import News
from jobsmith.agent.watcher.polling import check_accepted
from jobsmith.site_config import SiteConfig

GIB = 1 << 30


def options(**kw: Any) -> JobOptions:
    base = {"job_name": "t.js-abc", "partition": "debug", "time_limit_s": 600, "mem_mb": 1024}
    return JobOptions.model_validate({**base, **kw})


def record(**kw: Any) -> JobRecord:
    base = {
        "job_id": "7",
        "job_id_raw": "7",
        "name": "t.js-abc",
        "state": JobState.PENDING,
        "partition": "debug",
        "timelimit_s": 600,
        "req_mem_bytes": GIB,
    }
    return JobRecord.model_validate({**base, **kw})


# --- the comparison ------------------------------------------------------------------------


def seen(rec: JobRecord, *tasks: JobRecord, **fields: Any) -> JobStatus:
    """A poll's answer for one job: its own record, or an array's task records."""
    if tasks or rec.array_job_id:  # an array, polled by its own id
        whole = rec.array_job_id or rec.job_id
        return JobStatus(job_id=whole, state=rec.state, tasks=(rec, *tasks), **fields)
    return JobStatus(job_id=rec.job_id, state=rec.state, record=rec, **fields)


def test_a_job_as_checked_has_no_differences() -> None:
    assert altered(options(account="lab"), seen(record(account="lab"))) == []


@pytest.mark.parametrize(
    ("asked", "got"),
    [
        ({"nodes": 2}, {"req_mem_bytes": 2 * GIB}),  # per node x nodes (22.05, 24.11)
        ({}, {"req_mem_bytes": 2 * GIB, "req_tres": "cpu=2,mem=2G,node=2"}),  # -n spread
        ({"nodes": 2}, {"req_mem_bytes": GIB}),  # a record that shows it per node
    ],
)
def test_a_multi_node_jobs_whole_memory_is_no_change(
    asked: dict[str, Any], got: dict[str, Any]
) -> None:
    """Seen on the three-node lab: a pending `-N 2 --mem=2000M` job's ReqMem read 4000M,
    and its first poll held it as altered."""
    assert altered(options(**asked), seen(record(**got))) == []


@pytest.mark.parametrize(
    ("asked", "got", "said"),
    [
        ({}, {"partition": "long"}, "partition debug -> long"),
        ({"partition": "debug,long"}, {"partition": "gpu"}, "partition debug,long -> gpu"),
        ({"account": "lab"}, {"account": "other"}, "account lab -> other"),
        ({}, {"timelimit_s": 7200}, "time limit 00:10:00 -> 02:00:00"),
        ({}, {"req_mem_bytes": 4 * GIB}, "memory 1024M -> 4096M"),
        # ReqMem is the whole job's: a 2-node job's doubled memory is no change, more is
        ({"nodes": 2}, {"req_mem_bytes": 6 * GIB}, "memory 1024M -> 3072M per node"),
        (
            {},
            {"req_mem_bytes": 6 * GIB, "req_tres": "mem=6G,node=2"},
            "memory 1024M -> 3072M per node",
        ),
        ({"qos": "normal"}, {"qos": "high"}, "QoS normal -> high"),
        ({"gpus": 1}, {"req_tres": "cpu=1,gres/gpu=2,mem=1G,node=1"}, "GPUs 1 -> 2"),
        ({"gpus": 2, "nodes": 2}, {"req_tres": "gres/gpu=2,node=2"}, "GPUs 2 -> 1"),
        ({}, {"req_tres": "cpu=1,gres/gpu=1,mem=1G,node=1"}, "GPUs none -> 1"),
        (
            {"gpus": 1, "gpu_type": "a100"},
            {"req_tres": "gres/gpu:v100=1,gres/gpu=1,node=1"},
            "GPU type a100 -> v100",
        ),
    ],
)
def test_each_change_is_named_from_what_to_what(
    asked: dict[str, Any], got: dict[str, Any], said: str
) -> None:
    assert altered(options(**asked), seen(record(**got))) == [said]


def test_what_slurm_may_word_otherwise_is_no_change() -> None:
    # a pending job asked for two partitions shows both, a started one the one it got;
    # Slurm keeps accounts in lower case; a field accounting has not written is no change
    assert altered(options(partition="debug,long"), seen(record(partition="long,debug"))) == []
    assert altered(options(partition="debug,long"), seen(record(partition="long"))) == []
    assert altered(options(account="Lab"), seen(record(account="lab"))) == []
    assert altered(options(qos="High"), seen(record(qos="high"))) == []
    blank = record(partition=None, timelimit_s=None, req_mem_bytes=None, qos=None, req_tres=None)
    assert altered(options(account="lab", qos="high", gpus=1), seen(blank)) == []
    # what was not asked is Slurm's to choose: the user's default account, a default time,
    # the default QoS
    unasked = options(time_limit_s=None, mem_mb=None)
    assert altered(unasked, seen(record(account="x", qos="normal"))) == []
    # GPUs as asked, per node, with their type; a site that does not account gres/gpu
    # (no gres/gpu in ReqTRES) says nothing about them
    two = "billing=9,cpu=2,gres/gpu:a100=4,gres/gpu=4,mem=2G,node=2"
    assert altered(options(gpus=2, nodes=2, gpu_type="a100"), seen(record(req_tres=two))) == []
    untracked = record(req_tres="billing=1,cpu=1,mem=1G,node=1")
    assert altered(options(gpus=1), seen(untracked)) == []
    assert altered(options(), seen(untracked)) == []


def test_what_the_site_declares_its_plugins_adjust_is_not_compared() -> None:
    got = seen(record(partition="long", timelimit_s=60, qos="high", req_tres="gres/gpu=1"))
    asked = options(qos="normal")
    assert altered(asked, got, adjusts=["partition", "qos", "gres"]) == [
        "time limit 00:10:00 -> 00:01:00"
    ]
    assert altered(asked, got, adjusts=["partition", "time", "qos", "gres"]) == []


# --- arrays and dependencies: the whole job, not one record --------------------------------


def task(
    index: int | None, state: JobState = JobState.COMPLETED, rest: str | None = None
) -> JobRecord:
    shown = f"7_{index}" if rest is None else f"7_[{rest}]"
    return record(
        job_id=shown, array_job_id="7", array_task_id=index, array_task_range=rest, state=state
    )


def test_an_array_as_asked_has_no_differences() -> None:
    asked = options(array="0-5", array_throttle=2)
    # started tasks have records of their own, the rest one pending range with the throttle
    parts = seen(task(0), task(1, JobState.RUNNING), task(None, JobState.PENDING, "2-5%2"))
    assert altered(asked, parts) == []
    steps = options(array="0-20:5,7")
    pending = task(None, JobState.PENDING, "0,5,7,10,15,20")
    assert altered(steps, seen(pending)) == []
    assert altered(steps, seen(pending, accounted=True)) == []


@pytest.mark.parametrize(
    ("asked", "got", "said"),
    [
        # a plugin capped the array: asked tasks accounting does not know
        ({"array": "0-9"}, [task(None, JobState.PENDING, "0-3")], "array 0-9 -> 0-3"),
        ({"array": "0-3"}, [task(0), task(None, JobState.PENDING, "1-7")], "array 0-3 -> 0-7"),
        (
            {"array": "0-3", "array_throttle": 4},
            [task(None, JobState.PENDING, "0-3%1")],
            "array throttle %4 -> %1",
        ),
        ({}, [task(None, JobState.PENDING, "0-3")], "array none -> 0-3"),
    ],
)
def test_each_array_change_is_named(asked: dict[str, Any], got: list[JobRecord], said: str) -> None:
    assert altered(options(**asked), seen(*got, accounted=True, in_queue=True)) == [said]


def test_an_array_made_a_single_job_is_a_change() -> None:
    assert altered(options(array="0-3"), seen(record())) == ["array 0-3 -> none"]


def test_one_task_polled_by_its_own_id_is_not_the_array() -> None:
    one = JobStatus(job_id="7_1", state=JobState.RUNNING, record=task(1), accounted=True)
    assert altered(options(array="0-3"), one) == []


def test_tasks_missing_count_only_where_accounting_and_the_controller_both_answered() -> None:
    # without accounting the controller forgets ended tasks after MinJobAge; accounting
    # alone can miss a task that just started or ended (CI: "array 0-5 -> 0-3,5", a
    # throttled array cancelled six seconds in): only tasks never asked are a change then
    later = seen(task(8, JobState.RUNNING), task(None, JobState.PENDING, "9"))
    assert altered(options(array="0-9"), later) == []
    lagging = seen(task(0), task(1), task(2), task(3), task(5, JobState.RUNNING), accounted=True)
    assert altered(options(array="0-5"), lagging) == []
    both = later.model_copy(update={"accounted": True, "in_queue": True})
    assert altered(options(array="0-9"), both) == ["array 0-9 -> 8-9"]
    extra = seen(task(8, JobState.RUNNING), task(None, JobState.PENDING, "9-12"))
    assert altered(options(array="0-9"), extra) == ["array 0-9 -> 8-12"]


def test_a_dependency_the_controller_shows_that_was_not_asked_is_a_change() -> None:
    asked = options(dependencies=[{"kind": "afterok", "job_ids": ["5", "6"]}])
    waiting = {"in_queue": True}
    # squeue shows the dependencies left, each with its state; an array's as ID_*
    same = "afterok:5(unfulfilled),afterok:6_*(unfulfilled)"
    assert altered(asked, seen(record(), dependency=same, **waiting)) == []
    assert altered(asked, seen(record(), dependency="afterok:6(unfulfilled)", **waiting)) == []
    added = "afterok:5(unfulfilled),afterany:9(unfulfilled)"
    assert altered(asked, seen(record(), dependency=added, **waiting)) == [
        "dependency afterok:5:6 -> afterok:5(unfulfilled),afterany:9(unfulfilled)"
    ]
    kind = "afterany:5(unfulfilled)"
    assert altered(asked, seen(record(), dependency=kind, **waiting)) == [
        "dependency afterok:5:6 -> afterany:5(unfulfilled)"
    ]
    anyof = "afterok:5(unfulfilled)?afterok:6(unfulfilled)"
    assert altered(asked, seen(record(), dependency=anyof, **waiting)) == [
        f"dependency afterok:5:6 -> {anyof}"
    ]
    single = seen(record(), dependency="singleton(unfulfilled)", **waiting)
    assert altered(options(), single) == ["dependency none -> singleton(unfulfilled)"]
    assert altered(options(), single, adjusts=["dependency"]) == []
    # a poll the controller did not answer for the job says nothing of its dependencies
    assert altered(options(), seen(record(), dependency="singleton(unfulfilled)")) == []


# --- the first poll that reads a job -----------------------------------------------------


@dataclass
class _Loaded:
    config: SiteConfig


@dataclass
class Parts(HarnessParts):
    """What a poll uses, from the harness's real parts (the double as Slurm), under a
    site that may declare its plugins' adjustments."""

    judged_by: Executor
    news: News
    folds: SessionFolds

    @property
    def executor(self) -> Executor:
        return self.judged_by

    @property
    def site(self) -> _Loaded:
        return _Loaded(self.judged_by.site)


def parts_for(h: AgentHarness, adjusts: list[str] | None = None) -> Parts:
    executor = h.executor
    if adjusts is not None:
        scheduler = executor.site.scheduler.model_copy(update={"adjusts": adjusts})
        executor = replace(executor, site=executor.site.model_copy(update={"scheduler": scheduler}))
    return Parts(h, executor, News(h.root / "state"), SessionFolds(h.store, h.root / "folds"))


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path)


def submitted(h: AgentHarness) -> tuple[str, str]:
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "true"}, partition="debug")
    result = h.executor.run(session, st.Submit(job=job))
    return session, str(result.summary["job_id"])


def seen_as(h: AgentHarness, job_id: str, state: JobState, **fields: Any) -> dict[str, JobStatus]:
    asked = h.slurm.options[job_id]  # what was checked and submitted: Slurm kept it
    mem = asked.mem_mb and asked.mem_mb << 20
    rec = h.slurm.record(job_id, state, timelimit_s=asked.time_limit_s, req_mem_bytes=mem)
    rec = rec.model_copy(update=fields)
    h.slurm.jobs[job_id] = JobStatus(job_id=job_id, state=state, record=rec, accounted=True)
    return {job_id: h.slurm.jobs[job_id]}


def accepted_events(h: AgentHarness, session: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in h.store.read(session) if e.kind is EventKind.JOB_ACCEPTED]


def news(parts: Parts) -> list[dict[str, Any]]:
    path = parts.news.path
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize(
    ("state", "action"), [(JobState.PENDING, "hold"), (JobState.RUNNING, "cancel")]
)
def test_a_job_slurm_moved_is_held_or_cancelled_once_and_told(
    h: AgentHarness, state: JobState, action: str
) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h)
    statuses = seen_as(h, job_id, state, partition="long")
    check_accepted(parts, statuses)
    check_accepted(parts, statuses)  # a later poll: compared once, acted on once
    assert (
        h.slurm.count(action) == 1
        and h.slurm.count("hold" if action == "cancel" else "cancel") == 0
    )
    change = ["partition debug -> long"]
    assert accepted_events(h, session) == [{"job_id": job_id, "altered": change, "action": action}]
    assert news(parts) == [
        {"kind": "job_altered", "job_id": job_id, "altered": change, "action": action}
    ]
    steps = [e.data["step"]["action"] for e in h.store.read(session) if e.kind is EventKind.INTENT]
    assert steps == ["submit", action]  # the executor's step, in the session's log


def test_a_job_as_checked_is_recorded_once_and_left_alone(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h)
    check_accepted(parts, seen_as(h, job_id, JobState.RUNNING))
    check_accepted(parts, seen_as(h, job_id, JobState.RUNNING))
    assert accepted_events(h, session) == [{"job_id": job_id, "altered": [], "action": None}]
    assert h.slurm.count("cancel") == h.slurm.count("hold") == 0 and news(parts) == []


def test_nothing_is_compared_before_accounting_has_the_job(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h)
    check_accepted(parts, seen_as(h, job_id, JobState.PENDING, partition=None))
    check_accepted(parts, seen_as(h, job_id, JobState.PENDING, partition="long", stand_in=True))
    check_accepted(parts, {job_id: JobStatus(job_id=job_id, state=JobState.PENDING)})
    # the controller's record alone (accounting has not written the job): no QoS, limits
    # or TRES to compare yet
    queue_only = seen_as(h, job_id, JobState.PENDING, qos=None, timelimit_s=None)
    queue_only[job_id] = queue_only[job_id].model_copy(update={"accounted": False})
    check_accepted(parts, queue_only)
    assert accepted_events(h, session) == [] and h.slurm.count("hold") == 0
    check_accepted(parts, seen_as(h, job_id, JobState.PENDING, partition="long"))
    assert h.slurm.count("hold") == 1  # the first real record is compared


def test_an_ended_job_is_told_not_acted_on(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h)
    check_accepted(parts, seen_as(h, job_id, JobState.COMPLETED, timelimit_s=60))
    assert accepted_events(h, session)[0]["action"] is None
    assert h.slurm.count("cancel") == h.slurm.count("hold") == 0
    assert news(parts)[0]["altered"] == ["time limit 00:30:00 -> 00:01:00"]


def test_without_accounting_the_controllers_record_is_compared(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    h.slurm.accounting = False
    parts = parts_for(h)
    statuses = seen_as(h, job_id, JobState.PENDING, partition="long")
    statuses[job_id] = statuses[job_id].model_copy(update={"accounted": False})
    check_accepted(parts, statuses)
    assert h.slurm.count("hold") == 1
    assert accepted_events(h, session)[0]["altered"] == ["partition debug -> long"]


def test_a_site_that_declares_its_adjustments_keeps_its_jobs(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h, adjusts=["partition"])
    check_accepted(parts, seen_as(h, job_id, JobState.RUNNING, partition="long"))
    assert accepted_events(h, session) == [{"job_id": job_id, "altered": [], "action": None}]
    assert h.slurm.count("cancel") == 0


def test_a_gpu_job_given_more_gpus_is_held_at_the_first_poll(h: AgentHarness) -> None:
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "true"}, partition="gpu", gpus=1)
    job_id = str(h.executor.run(session, st.Submit(job=job)).summary["job_id"])
    parts = parts_for(h)
    more = "billing=9,cpu=1,gres/gpu=2,mem=1000M,node=1"
    check_accepted(parts, seen_as(h, job_id, JobState.PENDING, partition="gpu", req_tres=more))
    assert h.slurm.count("hold") == 1
    change = {"job_id": job_id, "altered": ["GPUs 1 -> 2"], "action": "hold"}
    assert accepted_events(h, session) == [change]


def test_a_dependency_the_controller_added_is_caught_in_the_same_poll(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h)
    statuses = seen_as(h, job_id, JobState.PENDING)
    # the poll asked squeue (the job is queued): its answer carries what the job waits for
    waits = statuses[job_id].model_copy(
        update={"in_queue": True, "dependency": "singleton(unfulfilled)"}
    )
    check_accepted(parts, {job_id: waits})
    assert h.slurm.count("hold") == 1
    said = ["dependency none -> singleton(unfulfilled)"]
    assert accepted_events(h, session) == [{"job_id": job_id, "altered": said, "action": "hold"}]
    calls = [name for name, _ in h.slurm.calls]
    assert "status" not in calls and "queue" not in calls  # no call of its own


# --- on what the lab's Slurm printed ------------------------------------------------------

LAB = Path(__file__).parent / "fixtures" / "lab-22.05"


def lab_poll(capture: str) -> dict[str, JobStatus]:
    """One poll's answer for the three jobs of fixtures/lab-22.05/README.md (sacct-accepted*),
    parsed and merged as the Slurm adapter does."""
    from jobsmith.adapters.slurm.commands.argv import DELIMITER
    from jobsmith.adapters.slurm.parsing.parse import parse_sacct_parsable, parse_squeue
    from jobsmith.adapters.slurm.parsing.status import merge_status

    acct = parse_sacct_parsable((LAB / f"sacct-{capture}.txt").read_text(), DELIMITER)
    queue = parse_squeue((LAB / f"squeue-{capture}.txt").read_text(), DELIMITER)
    return merge_status(["14432", "14433", "14434"], acct, queue)


#: what the three jobs were submitted with (the README's sbatch lines)
SUBMITTED = {
    "14432": options(partition="gpu", qos="high", gpus=1, time_limit_s=300, mem_mb=500),
    "14433": options(array="0-20:5", array_throttle=2, time_limit_s=300, mem_mb=500),
    "14434": options(
        time_limit_s=300,
        mem_mb=500,
        dependencies=[
            {"kind": "afterok", "job_ids": ["14432"]},
            {"kind": "afterany", "job_ids": ["14433"]},
        ],
    ),
}


@pytest.mark.parametrize("capture", ["accepted", "accepted-released", "accepted-array"])
def test_the_lab_jobs_as_submitted_show_no_change(capture: str) -> None:
    polled = lab_poll(capture)
    assert polled["14434"].dependency is not None and polled["14434"].in_queue
    assert {job_id: altered(SUBMITTED[job_id], polled[job_id]) for job_id in SUBMITTED} == {
        "14432": [],
        "14433": [],
        "14434": [],
    }


def test_the_lab_jobs_asked_otherwise_show_each_change() -> None:
    polled = lab_poll("accepted")
    gpu = options(partition="gpu", qos="normal", gpus=2, time_limit_s=300, mem_mb=500)
    assert altered(gpu, polled["14432"]) == ["QoS normal -> high", "GPUs 2 -> 1"]
    array = options(array="0-20:10", array_throttle=1, time_limit_s=300, mem_mb=500)
    assert altered(array, polled["14433"]) == [
        "array 0-20:10 -> 0,5,10,15,20",
        "array throttle %1 -> %2",
    ]
    waits = options(
        dependencies=[{"kind": "afterok", "job_ids": ["14432"]}], time_limit_s=300, mem_mb=500
    )
    assert altered(waits, polled["14434"]) == [
        "dependency afterok:14432 -> afterok:14432(unfulfilled),afterany:14433_*(unfulfilled)"
    ]


def test_a_poll_that_follows_states_asks_for_the_terms_only_while_a_compare_is_due(
    h: AgentHarness,
) -> None:
    """`wait` polls without QoS and TRES (a third of sacct's time in slurmdbd), but the
    poll that still has to compare a job with what was checked asks for them; `status`
    (terms by default) always does."""
    from datetime import datetime, timedelta

    from jobsmith.agent.runtime.session.lastpoll import LastPollFile
    from jobsmith.agent.watcher.polling import batched_poll

    @dataclass
    class Polling(Parts):
        last_poll_file: LastPollFile

    base = parts_for(h)
    parts = Polling(h, base.judged_by, base.news, base.folds, LastPollFile(h.root / "lp.json"))
    session, job_id = submitted(h)
    seen_as(h, job_id, JobState.RUNNING)
    since = datetime.now() - timedelta(days=1)
    batched_poll(parts, [job_id], since, terms=False)  # its compare is due: with terms
    assert len(accepted_events(h, session)) == 1
    batched_poll(parts, [job_id], since, terms=False)  # compared: states only
    batched_poll(parts, [job_id], since)  # `status`
    batched_poll(parts, ["4242"], since, terms=False)  # a job jobsmith did not submit
    assert h.slurm.terms_asked == [True, False, True, False]

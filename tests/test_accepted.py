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
from jobsmith.agent.runtime.submission.jobs import JobRequest
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


def test_a_job_as_checked_has_no_differences() -> None:
    assert altered(options(account="lab"), record(account="lab")) == []


@pytest.mark.parametrize(
    ("asked", "got", "said"),
    [
        ({}, {"partition": "long"}, "partition debug -> long"),
        ({"partition": "debug,long"}, {"partition": "gpu"}, "partition debug,long -> gpu"),
        ({"account": "lab"}, {"account": "other"}, "account lab -> other"),
        ({}, {"timelimit_s": 7200}, "time limit 00:10:00 -> 02:00:00"),
        ({}, {"req_mem_bytes": 4 * GIB}, "memory 1024M -> 4096M"),
    ],
)
def test_each_change_is_named_from_what_to_what(
    asked: dict[str, Any], got: dict[str, Any], said: str
) -> None:
    assert altered(options(**asked), record(**got)) == [said]


def test_what_slurm_may_word_otherwise_is_no_change() -> None:
    # a pending job asked for two partitions shows both, a started one the one it got;
    # Slurm keeps accounts in lower case; a field accounting has not written is no change
    assert altered(options(partition="debug,long"), record(partition="long,debug")) == []
    assert altered(options(partition="debug,long"), record(partition="long")) == []
    assert altered(options(account="Lab"), record(account="lab")) == []
    blank = record(partition=None, timelimit_s=None, req_mem_bytes=None)
    assert altered(options(account="lab"), blank) == []
    # what was not asked is Slurm's to choose: the user's default account, a default time
    assert altered(options(time_limit_s=None, mem_mb=None), record(account="x")) == []


def test_what_the_site_declares_its_plugins_adjust_is_not_compared() -> None:
    got = record(partition="long", timelimit_s=60)
    assert altered(options(), got, adjusts=["partition"]) == ["time limit 00:10:00 -> 00:01:00"]
    assert altered(options(), got, adjusts=["partition", "time"]) == []


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
    h.slurm.jobs[job_id] = JobStatus(job_id=job_id, state=state, record=rec)
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


def test_a_site_that_declares_its_adjustments_keeps_its_jobs(h: AgentHarness) -> None:
    session, job_id = submitted(h)
    parts = parts_for(h, adjusts=["partition"])
    check_accepted(parts, seen_as(h, job_id, JobState.RUNNING, partition="long"))
    assert accepted_events(h, session) == [{"job_id": job_id, "altered": [], "action": None}]
    assert h.slurm.count("cancel") == 0

"""squeue only where sacct cannot answer, and `--only-job-state` where the installed squeue
offers it (issue 26): the choice, the parser and both branches of the adapter.

The lab runs Slurm 22.05, whose squeue has no --only-job-state; the 24.05+ usage text and
output below are Slurm's own: the usage as a 24.x squeue prints it (quoted in a public
bug report), the output lines as SchedMD's testsuite asserts them for
`squeue --noheader --only-job-state --format='%i=%T'` (the delimiter here is jobsmith's).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from scripted_transport import ScriptedTransport

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.parsing.offers import offers_only_job_state
from jobsmith.adapters.slurm.parsing.parse import parse_job_states
from jobsmith.adapters.slurm.scheduler import SETTLE_S, QueueNeed, SlurmScheduler, queue_need
from jobsmith.adapters.states import JobState

#: `squeue --usage` of Slurm 22.05.8 (Debian 12), captured on the lab
USAGE_22_05 = """\
Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [-p partitions] [--qos qos]
              [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
\t      [-ahjlrsv]
"""
#: `squeue --usage` of a Slurm 24.x squeue
USAGE_24 = """\
Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [--only-job-state] [-p partitions]
              [--qos qos] [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
              [--expand-patterns] [--json=data_parser] [--yaml=data_parser]
              [-ahjlrsv]
"""
D = argv.DELIMITER
#: what `squeue --only-job-state` prints for an array with a pending rest, a running and a
#: cancelled task, and a plain job (SchedMD's testsuite, test_only_job_state)
STATES_24 = f"7_[1-4,6-10]{D}PENDING\n7_5{D}RUNNING\n7_11{D}CANCELLED\n12{D}COMPLETED\n"


def test_only_the_squeue_that_lists_only_job_state_is_said_to_offer_it() -> None:
    assert not offers_only_job_state(USAGE_22_05)
    assert offers_only_job_state(USAGE_24)
    help_24 = "      --only-job-state            only retrieve job ID and job state\n"
    assert offers_only_job_state(help_24)


def test_only_job_state_lines_read_as_queue_records() -> None:
    skipped: list[str] = []
    rest, task, cancelled, plain = parse_job_states(STATES_24 + "junk\n", D, skipped=skipped)
    assert (rest.job_id, rest.job_id_raw, rest.array_job_id) == ("7_[1-4,6-10]", "7", "7")
    assert rest.array_task_range == "1-4,6-10" and rest.state is JobState.PENDING
    assert (task.job_id, task.array_task_id, task.state) == ("7_5", 5, JobState.RUNNING)
    assert cancelled.state is JobState.CANCELLED
    assert (plain.job_id, plain.job_id_raw, plain.array_job_id) == ("12", "12", None)
    assert plain.state is JobState.COMPLETED and plain.reason is None
    assert skipped == ["junk"]


def _rec(job_id: str, state: JobState, *, ended_s: float | None = None, **kw: object) -> JobRecord:
    end = datetime.now() - timedelta(seconds=ended_s) if ended_s is not None else None
    base, _, task = job_id.partition("_")
    return JobRecord.model_validate(
        {
            "job_id": job_id,
            "job_id_raw": job_id if not task else str(100 + int(task)),
            "array_job_id": base if task else None,
            "array_task_id": int(task) if task else None,
            "name": "x",
            "state": state,
            "end_time": end,
            **kw,
        }
    )


LONG_AGO = SETTLE_S + 60


@pytest.mark.parametrize(
    ("ids", "records", "need"),
    [
        # not in accounting yet: only the controller knows it
        (["5"], lambda: [], QueueNeed.DETAIL),
        # pending: why, on what and until when it waits is the controller's
        (["5"], lambda: [_rec("5", JobState.PENDING)], QueueNeed.DETAIL),
        # a stand-in row: its state and name lag
        (["5"], lambda: [_rec("5", JobState.RUNNING, stand_in=True)], QueueNeed.DETAIL),
        # running: accounting's state is current, no squeue
        (["5"], lambda: [_rec("5", JobState.RUNNING)], QueueNeed.NONE),
        # an array with a task running: accounting can miss a task that just started or
        # ended, so the controller is asked too (the compare must not see a gap)
        (["7"], lambda: [_rec("7_0", JobState.COMPLETED, ended_s=1),
                         _rec("7_1", JobState.RUNNING)],
         QueueNeed.DETAIL),
        # all ended, one just now: the controller confirms the end (states only)
        (["7"], lambda: [_rec("7_0", JobState.COMPLETED, ended_s=LONG_AGO),
                 _rec("7_1", JobState.COMPLETED, ended_s=1)], QueueNeed.STATES),
        # all ended long ago: accounting alone
        (["5"], lambda: [_rec("5", JobState.FAILED, ended_s=LONG_AGO)], QueueNeed.NONE),
    ],
)  # fmt: skip
def test_squeue_is_asked_only_where_sacct_cannot_answer(
    ids: list[str], records: Callable[[], list[JobRecord]], need: QueueNeed
) -> None:
    # the records are made as the test runs: "ended 1 s ago" made at collection would be
    # minutes old by the time a long run reaches this test
    assert queue_need(ids, records()) is need


def _scripted(usage: str) -> ScriptedTransport:
    """A Transport that answers squeue's usage as the given version's squeue, the full
    squeue with nothing, and --only-job-state with STATES_24; it records each argv."""

    def answer(call: tuple[str, ...]) -> tuple[str, str, int]:
        if "--usage" in call:
            return usage, "", 0
        if "--only-job-state" in call:
            return STATES_24, "", 0
        return "", "", 0

    return ScriptedTransport(answer)


@pytest.mark.parametrize(("usage", "light"), [(USAGE_22_05, False), (USAGE_24, True)])
def test_states_come_from_only_job_state_where_squeue_offers_it_with_slurm_double(
    usage: str, light: bool
) -> None:
    transport = _scripted(usage)
    slurm = SlurmScheduler(transport)
    first = slurm.queue_states(["7", "12"])
    slurm.queue_states(["7"])
    asked = [c for c in transport.calls if "--usage" in c]
    assert len(asked) == 1  # the usage is read once per process
    polls = [c for c in transport.calls if "--usage" not in c]
    assert len(polls) == 2
    if light:
        assert list(polls[0]) == argv.squeue_states(["7", "12"])
        assert [r.job_id for r in first] == ["7_[1-4,6-10]", "7_5", "7_11", "12"]
    else:  # 22.05: the full squeue of the caller's jobs, as before
        assert polls[0][:2] == ("squeue", "--local") and "--only-job-state" not in polls[0]
        assert first == []


def test_a_hold_names_the_jobs_it_did_not_stop_with_slurm_double() -> None:
    """scontrol hold, then one squeue: the ids naming a started job or task (7 names its
    running task 7_5, a range names it if 5 is among its indices)."""
    transport = _scripted(USAGE_24)
    held = ["7", "7_5", "7_[1-4]", "7_[1-9:2]", "7_11", "12"]
    running = SlurmScheduler(transport).hold(held)
    assert running == ["7", "7_5", "7_[1-9:2]"]
    (hold, usage, states) = transport.calls
    assert hold[:2] == ("scontrol", "hold") and "--usage" in usage
    assert list(states) == argv.squeue_states(held)


def test_a_hold_stands_when_the_squeue_after_it_gives_no_answer_with_slurm_double() -> None:
    def answer(call: tuple[str, ...]) -> tuple[str, str, int]:
        if call[0] == "squeue" and "--usage" not in call:
            return "", "slurm_load_jobs error: Unable to contact slurm controller\n", 1
        return (USAGE_24 if "--usage" in call else ""), "", 0

    transport = ScriptedTransport(answer)
    assert SlurmScheduler(transport, sleep=lambda s: None).hold(["7"]) == []
    assert transport.count("scontrol") == 1  # held once, not again

"""The Slurm adapter against the real lab cluster: real jobs, arrays, dependencies, accounting.

Where a fault cannot be produced on demand (sbatch's answer lost after Slurm accepted the
job), a transport wrapper runs the real command and then drops or alters its answer; those
tests say so in their names ("_double").
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scripted_transport import Reply, ScriptedTransport

from jobsmith.adapters.options import Dependency, JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.states import JobState
from jobsmith.adapters.transport import CommandResult
from jobsmith.errors import SchedulerError, SchedulerUnavailable

pytestmark = pytest.mark.usefixtures("lab_cluster")
SINCE = timedelta(minutes=30)


class RecordingTransport(ScriptedTransport):
    """The real local transport, remembering every command it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.local = LocalTransport()

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        return self.local.run(argv, **run)


@pytest.fixture(autouse=True)
def _run_in(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # jobs without -o write slurm-%j.out into the submission directory: make it writable
    monkeypatch.chdir(workdir)


def opts(name: str, **kwargs: object) -> JobOptions:
    tag = secrets.token_hex(6)
    return JobOptions(job_name=f"{name}.js-{tag}", partition="debug", mem_mb=100, **kwargs)  # type: ignore[arg-type]


def script(o: JobOptions, body: str) -> str:
    return "#!/bin/bash\n" + "\n".join(render_directives(o)) + "\n" + body + "\n"


def wait_terminal(s: SlurmScheduler, ids: list[str], timeout: float = 120) -> dict[str, JobStatus]:
    deadline = time.monotonic() + timeout
    since = datetime.now() - SINCE
    while True:
        st = s.status(ids, since)
        if all(x.state.is_terminal for x in st.values()):
            return st
        assert time.monotonic() < deadline, f"jobs not finished: {st}"
        time.sleep(1)


def test_plain_job_completes_and_accounting_has_it(workdir: Path) -> None:
    s = SlurmScheduler(LocalTransport())
    o = opts("plain", output=f"{workdir}/out_%j.txt")
    res = s.submit(script(o, "echo hello-from-slurm"), o)
    assert res.job_id.isdigit() and res.tag == o.tag() and not res.recovered
    final = wait_terminal(s, [res.job_id])[res.job_id]
    assert final.state is JobState.COMPLETED
    assert final.record is not None and final.record.exit_code == 0
    assert (workdir / f"out_{res.job_id}.txt").read_text().strip() == "hello-from-slurm"


def test_array_with_throttle_reports_each_task_and_the_failed_one(workdir: Path) -> None:
    t = RecordingTransport()
    s = SlurmScheduler(t)
    o = opts("arr", array="0-3", array_throttle=2, output=f"{workdir}/a_%A_%a.out")
    res = s.submit(script(o, '[ "$SLURM_ARRAY_TASK_ID" != 2 ] || exit 3'), o)
    assert t.count("sbatch") == 1
    final = wait_terminal(s, [res.job_id])[res.job_id]
    by_task = {task.array_task_id: task for task in final.tasks}
    assert sorted(by_task) == [0, 1, 2, 3]
    assert by_task[2].state is JobState.FAILED and by_task[2].exit_code == 3
    assert all(by_task[i].state is JobState.COMPLETED for i in (0, 1, 3))
    assert final.state is JobState.FAILED
    assert final.task_counts == {"COMPLETED": 3, "FAILED": 1}


def test_dependencies_afterok_afternotok_afterany(workdir: Path) -> None:
    s = SlurmScheduler(LocalTransport())
    bad = opts("bad")
    bad_id = s.submit(script(bad, "exit 1"), bad).job_id
    dep = {
        kind: opts(kind, dependencies=(Dependency(kind=kind, job_ids=(bad_id,)),))
        for kind in ("afterok", "afternotok", "afterany")
    }
    ids = {k: s.submit(script(o, "true"), o).job_id for k, o in dep.items()}
    done = wait_terminal(s, [bad_id, ids["afternotok"], ids["afterany"]])
    assert done[bad_id].state is JobState.FAILED
    assert done[ids["afternotok"]].state is JobState.COMPLETED
    assert done[ids["afterany"]].state is JobState.COMPLETED
    never = s.status([ids["afterok"]], datetime.now() - SINCE)[ids["afterok"]]
    assert never.state is JobState.PENDING
    assert never.reason == "DependencyNeverSatisfied"
    s.cancel([ids["afterok"]])


def test_status_of_many_jobs_is_one_sacct_and_at_most_one_squeue() -> None:
    t = RecordingTransport()
    s = SlurmScheduler(t)
    o = opts("many", array="0-49")
    array_id = s.submit(script(o, "true"), o).job_id
    singles = []
    for _ in range(5):
        so = opts("one")
        singles.append(s.submit(script(so, "sleep 1"), so).job_id)
    t.calls.clear()
    s.status([array_id, *singles, "999999"], datetime.now() - SINCE)
    assert t.count("sacct") == 1
    assert t.count("squeue") <= 1
    assert [c for c in t.calls if c[0] not in ("sacct", "squeue")] == []
    s.cancel([array_id, *singles])


def test_unknown_job_is_not_visible_not_failed() -> None:
    s = SlurmScheduler(LocalTransport())
    st = s.status(["999999"], datetime.now() - SINCE)["999999"]
    assert st.state is JobState.NOT_VISIBLE
    assert not st.state.is_failure


def test_refusal_names_slurms_reason_and_is_not_retried() -> None:
    t = RecordingTransport()
    s = SlurmScheduler(t, retry_delay_s=0)
    o = JobOptions(job_name=f"x.js-{secrets.token_hex(6)}", partition="nosuchpartition")
    with pytest.raises(SchedulerError, match=r"(?i)invalid partition") as info:
        s.submit(script(o, "true"), o)
    assert not isinstance(info.value, SchedulerUnavailable)
    assert t.count("sbatch") == 1


class AnswerLostTransport(RecordingTransport):
    """Runs sbatch for real, then loses its answer as a timed-out connection would."""

    def __init__(self) -> None:
        super().__init__()
        self.lost = 0

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        res = super().answer(argv, **run)
        if argv[0] == "sbatch" and self.lost == 0:
            self.lost += 1
            raise SchedulerUnavailable("sbatch gave no answer within 30s")
        return res


def test_lost_sbatch_answer_is_recovered_by_tag_not_resubmitted_double() -> None:
    t = AnswerLostTransport()
    s = SlurmScheduler(t, retry_delay_s=0)
    o = opts("lost")
    res = s.submit(script(o, "true"), o)
    assert res.recovered and res.job_id.isdigit()
    assert t.count("sbatch") == 1  # looked up by tag instead of submitting again
    assert s.find_by_name(o.job_name, datetime.now() - SINCE) == [res.job_id]


class WarningTransport(RecordingTransport):
    """Runs sbatch for real and adds the warning a busy controller prints."""

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        res = super().answer(argv, **run)
        if argv[0] != "sbatch" or not isinstance(res, CommandResult):
            return res
        warning = "sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying\n"
        return CommandResult(res.argv, res.returncode, res.stdout, warning + res.stderr)


def test_exit_zero_with_warnings_is_a_success_double() -> None:
    t = WarningTransport()
    s = SlurmScheduler(t, retry_delay_s=0)
    o = opts("warn")
    res = s.submit(script(o, "true"), o)
    assert res.job_id.isdigit() and not res.recovered
    assert any("temporarily unable" in w for w in res.warnings)
    assert t.count("sbatch") == 1


def test_hold_release_cancel_and_output_paths(workdir: Path) -> None:
    s = SlurmScheduler(LocalTransport())
    o = opts("held", output=f"{workdir}/h_%j.out", error=f"{workdir}/h_%j.err")
    job = s.submit(script(o, "sleep 30"), o).job_id
    s.hold([job])
    st = s.status([job], datetime.now() - SINCE)[job]
    assert st.state is JobState.PENDING and st.reason in ("JobHeldUser", "JobHeldAdmin")
    out, err = s.output_paths(job)
    assert out == f"{workdir}/h_{job}.out" and err == f"{workdir}/h_{job}.err"
    s.release([job])
    s.cancel([job])
    final = wait_terminal(s, [job])[job]
    assert final.state is JobState.CANCELLED


def test_queue_reports_the_exit_code_of_an_ended_job(workdir: Path) -> None:
    """squeue -O exit_code: 22.05 prints the raw wait status (768), 24.11 '3:0'; both read
    (3, 0), and stderr without -e is the stdout file (24.11 prints STDERR as '(null)')."""
    s = SlurmScheduler(LocalTransport())
    o = opts("exit3", output=f"{workdir}/e_%j.out")
    job = s.submit(script(o, "exit 3"), o).job_id
    deadline = time.monotonic() + 60
    while True:  # the controller keeps an ended job for MinJobAge (30 s on the lab cluster)
        (record,) = [q for q in s.queue() if q.job_id == job]
        if record.state.is_terminal:
            break
        assert time.monotonic() < deadline, record
        time.sleep(0.5)
    assert (record.state, record.exit_code, record.signal) == (JobState.FAILED, 3, 0)
    assert record.stdout_path == record.stderr_path == f"{workdir}/e_{job}.out"


def test_test_only_estimates_without_submitting() -> None:
    t = RecordingTransport()
    s = SlurmScheduler(t)
    o = opts("preflight")
    res = s.test_only(script(o, "true"))
    assert res.ok and res.partition == "debug" and res.estimated_start is not None
    assert s.find_by_name(o.job_name, datetime.now() - SINCE) == []
    bad = JobOptions(job_name="x", partition="debug", account="nosuchaccount")
    refused = s.test_only(script(bad, "true"))
    assert not refused.ok and "account" in refused.message.lower()


def test_an_ended_arrays_end_is_confirmed_with_the_squeue_this_slurm_offers(
    workdir: Path,
) -> None:
    """Issue 26: once every task has ended, the controller confirms the end (accounting
    can lag by whole tasks) with `squeue --only-job-state` where the installed squeue
    lists it (24.05 and later: CI's 24.11 root runs this), else `squeue --me`; and a poll
    without QoS and TRES (terms=False, what `wait` asks) reads the same states and exit
    codes, with none of those three columns."""
    from jobsmith.adapters.slurm.parsing.offers import offers_only_job_state

    usage = LocalTransport().run(("squeue", "--usage"), timeout=30)
    offered = offers_only_job_state(usage.stdout + usage.stderr)
    t = RecordingTransport()
    s = SlurmScheduler(t)
    o = opts("confirm", array="0-2", output=f"{workdir}/c_%A_%a.out")
    res = s.submit(script(o, '[ "$SLURM_ARRAY_TASK_ID" != 1 ] || exit 4'), o)
    wait_terminal(s, [res.job_id])
    t.calls.clear()
    since = datetime.now() - SINCE
    full = s.status([res.job_id], since)[res.job_id]
    light = s.status([res.job_id], since, terms=False)[res.job_id]
    squeues = [c for c in t.calls if c[0] == "squeue" and "--usage" not in c]
    assert len(squeues) == 2, t.calls  # ended within SETTLE_S: each poll confirms
    for call in squeues:
        assert ("--only-job-state" in call) is offered and ("--me" in call) is not offered
    sacct_fields = [a for c in t.calls if c[0] == "sacct" for a in c if a.startswith("--format=")]
    assert "QOS" in sacct_fields[0] and "QOS" not in sacct_fields[1]
    assert "ReqTRES" not in sacct_fields[1] and "AllocTRES" not in sacct_fields[1]
    for st in (full, light):
        assert st.state is JobState.FAILED and st.task_counts == {"COMPLETED": 2, "FAILED": 1}
        assert [task.exit_code for task in st.tasks] == [0, 4, 0]
    # (full's tasks have their QoS once accounting has written them: it may lag the end)
    assert not any(task.qos or task.req_tres for task in light.tasks)

"""Checkpointable jobs without the cluster (issue 27, item 2): the script `--checkpoint`
writes, what the site allows, the trap run by a real bash against a double of scontrol,
and a requeued job read from sacct -D as one job. The lab half is
tests/test_checkpoint_lab.py.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import unicodedata
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from golden import CHECKPOINTED, checkpointed_text
from hypothesis import given, settings
from hypothesis import strategies as st
from lab_cli import js
from scheduler_double import AgentHarness, site_config

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.commands.argv import DELIMITER, sacct_jobs
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.commands.sbatch_script import SbatchScripts
from jobsmith.adapters.slurm.parsing.parse import SACCT_FIELDS, parse_sacct_parsable
from jobsmith.adapters.slurm.scheduler import QueueNeed, queue_need
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.documents import JobStatusDocument
from jobsmith.agent.runtime.requeues import requeue_phrase
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.submission import steps
from jobsmith.agent.runtime.submission.request.checkpoint import (
    Checkpoint,
    CheckpointPlan,
    plan,
    wrap,
)
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.submission.request.user_scripts import (
    assemble_script,
    read_request,
)
from jobsmith.agent.watcher.cycle import watch_cycle
from jobsmith.errors import InputError, PolicyError

FIXTURES = Path(__file__).parent / "fixtures"

# --- the script ------------------------------------------------------------------------


def test_the_wrapped_command_template_matches_its_golden_file() -> None:
    assert CHECKPOINTED.read_text() == checkpointed_text()


def test_a_checkpointable_job_asks_for_the_signal_to_its_shell_and_a_requeue() -> None:
    opts = JobOptions(job_name="x.js-0123456789ab", signal="B:USR1@60", requeue=True)
    lines = render_directives(opts)
    assert "#SBATCH --signal=B:USR1@60" in lines and "#SBATCH --requeue" in lines
    plain = render_directives(JobOptions(job_name="x.js-0123456789ab"))
    assert not any("signal" in line or "requeue" in line for line in plain)


def test_the_site_gives_the_defaults_and_refuses_more_requeues_than_its_policy(
    tmp_path: Path,
) -> None:
    site = site_config(tmp_path, policy={"max_requeues": 5})
    decided = plan(Checkpoint(command="true"), site, 3600)
    assert (decided.signal_lead_s, decided.max_requeues) == (60, 3)  # jobs.checkpoint
    assert decided.signal_option() == "B:USR1@60"
    asked = plan(Checkpoint(command="true", signal_lead_s=30, max_requeues=5), site, 3600)
    assert (asked.signal_lead_s, asked.max_requeues) == (30, 5)
    with pytest.raises(PolicyError, match=r"at most 5 \(policy.max_requeues\)"):
        plan(Checkpoint(command="true", max_requeues=6), site, 3600)
    with pytest.raises(InputError, match="not shorter than the time limit"):
        plan(Checkpoint(command="true", signal_lead_s=60), site, 60)


@pytest.mark.parametrize(
    "text", ["", "   ", "a\nb", "a\rb", "x\x00", "\x1b[31m", "a\x7f", "a\x85b", "a\u2028b"]
)
def test_a_checkpoint_command_is_one_line_of_text(text: str) -> None:
    with pytest.raises(ValueError):
        Checkpoint(command=text)


_ONE_LINE = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(
    lambda t: t.strip() and not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in t)
)


@settings(max_examples=60, deadline=None)
@given(command=_ONE_LINE)
def test_the_checkpoint_command_reaches_bash_c_exactly_as_given(command: str) -> None:
    """Whatever the user typed is one word to `bash -c`: read back by a real bash it is
    the same text, and the script around it gains no line."""
    body = "echo body"
    script = wrap(body, CheckpointPlan(command=command, signal_lead_s=60, max_requeues=3))
    (line,) = [ln for ln in script.splitlines() if "JOBSMITH_JOB_PID=" in ln]
    word = line.split(" bash -c -- ", 1)[1].rsplit(" || echo ", 1)[0]
    echoed = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], capture_output=True, text=True, check=True
    )
    assert echoed.stdout == command
    empty = wrap(body, CheckpointPlan(command="x", signal_lead_s=60, max_requeues=3))
    assert len(script.splitlines()) == len(empty.splitlines())


# --- the trap, run by bash, with a double of scontrol -------------------------------------

_SCONTROL_DOUBLE = """#!/bin/sh
# a double of scontrol: `show job` answers PreemptTime from $PREEMPT_TIME, `requeue` logs
case "$1" in
show) echo "JobId=$3 JobState=RUNNING PreemptEligibleTime=x PreemptTime=$PREEMPT_TIME" ;;
requeue) echo "requeue $2" >> "$SCONTROL_LOG" ;;
esac
"""


def _run_trapped(tmp_path: Path, restart: int, preempt_time: str) -> tuple[int, str, str]:
    """The wrapped body (it counts to 30 in tenths of seconds, then exits 3) run by bash
    with a double of scontrol; USR1 sent to the shell once the body counts. Its exit
    status, the scontrol double's log, and what the checkpoint command wrote."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(_SCONTROL_DOUBLE)
    (bin_dir / "scontrol").chmod(0o755)
    body = "for i in $(seq 30); do echo $i > count; sleep 0.1; done\nexit 3"
    checkpoint = CheckpointPlan(
        command='echo "saved at $(cat count) pid $JOBSMITH_JOB_PID" >> saved',
        signal_lead_s=60,
        max_requeues=2,
    )
    (tmp_path / "job.sh").write_text("#!/bin/bash\n" + wrap(body, checkpoint))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "77",
        "SLURM_RESTART_COUNT": str(restart),
        "PREEMPT_TIME": preempt_time,
        "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
    }
    shell = subprocess.Popen(
        ["bash", "job.sh"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "count").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    shell.send_signal(signal.SIGUSR1)
    _, stderr = shell.communicate(timeout=20)
    log = tmp_path / "scontrol.log"
    saved = (tmp_path / "saved").read_text()
    assert (tmp_path / "count").read_text() == "30\n", stderr  # the body ran on to its end
    return shell.returncode, log.read_text() if log.exists() else "", saved


def test_at_the_warning_the_trap_checkpoints_requeues_and_the_body_runs_on_with_scontrol_double(
    tmp_path: Path,
) -> None:
    status, scontrol, saved = _run_trapped(tmp_path, restart=1, preempt_time="None")
    assert status == 3  # the body's own status, not the trap's 138
    assert scontrol == "requeue 77\n"
    assert saved.startswith("saved at ") and " pid " in saved


def test_a_preempted_job_checkpoints_but_leaves_the_requeue_to_slurm_with_scontrol_double(
    tmp_path: Path,
) -> None:
    status, scontrol, saved = _run_trapped(tmp_path, 0, preempt_time="2026-12-02T14:26:18")
    assert (status, scontrol) == (3, "")
    assert saved.startswith("saved at ")


def test_past_its_bound_the_job_is_not_requeued_with_scontrol_double(tmp_path: Path) -> None:
    status, scontrol, saved = _run_trapped(tmp_path, restart=2, preempt_time="None")
    assert (status, scontrol) == (3, "")
    assert saved.startswith("saved at ")


# --- a user's own script -----------------------------------------------------------------


def _script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(text)
    return path


def test_a_users_script_runs_under_the_trap_with_its_arguments(tmp_path: Path) -> None:
    _script(tmp_path, '#!/bin/bash\n#SBATCH -t 10\n# note\necho "$1"\n')
    words = ["--checkpoint", "touch stop", "--max-requeues=2", "job.sh", "a b"]
    read = read_request(SbatchScripts(), words, (), tmp_path, own=("--json",))
    assert read.request.checkpoint == Checkpoint(command="touch stop", max_requeues=2)
    job = assemble_script(
        read.request, site_config(tmp_path), cwd=tmp_path, header=render_directives
    )
    lines = job.script.splitlines()
    assert "#SBATCH --signal=B:USR1@60" in lines and "#SBATCH --requeue" in lines
    assert lines.index("set -- 'a b'") < lines.index("trap __jobsmith_checkpoint USR1")
    start = lines.index("(")
    assert lines[start + 1 : start + 4] == ["# note", 'echo "$1"', ") &"]
    assert "bash -c -- 'touch stop'" in job.script


@pytest.mark.parametrize(
    "text,words,needle",
    [
        ("#!/usr/bin/env python3\nprint(1)\n", [], "starts with '#!/usr/bin/env python3'"),
        ("#!/bin/bash\n#SBATCH --signal=USR2@30\ntrue\n", [], "--signal and --checkpoint"),
        ("#!/bin/bash\ntrue\n", ["--requeue"], "--requeue and --checkpoint"),
        ("#!/bin/bash\ntrue\n", ["--max-requeues", "x"], "expected a whole number"),
    ],
)
def test_what_checkpoint_cannot_wrap_is_refused(
    tmp_path: Path, text: str, words: list[str], needle: str
) -> None:
    _script(tmp_path, text)
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        read_request(SbatchScripts(), [*words, "--checkpoint", "true", "job.sh"], (), tmp_path)


def test_signal_lead_without_checkpoint_is_refused_by_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = js("render", "command", "-P", "command=true", "--signal-lead", "30", "--no-slurm")
    assert out.exit_code == 2 and "--signal-lead needs --checkpoint CMD" in out.stderr


# --- a requeued job in accounting --------------------------------------------------------


def test_sacct_lists_every_run_of_a_requeued_job() -> None:
    argv = sacct_jobs(["5"], datetime(2026, 12, 2), SACCT_FIELDS)
    assert "-D" in argv


#: what each capture holds (tests/fixtures/lab-VERSION/README.md): the job preempted 5 s
#: into its 25 s (GraceTime=20), then the one that requeued itself twice; on 22.05 the
#: first ended by itself within its grace time and was recorded TIMEOUT, not requeued
_CAPTURED = {
    "22.05": [(JobState.TIMEOUT, ()), (JobState.COMPLETED, (JobState.REQUEUED,) * 2)],
    "24.11": [
        (JobState.COMPLETED, (JobState.PREEMPTED,)),
        (JobState.COMPLETED, (JobState.REQUEUED,) * 2),
    ],
}


@pytest.mark.parametrize("version", sorted(_CAPTURED))
def test_the_runs_of_a_requeued_job_are_one_record_the_latest_run(version: str) -> None:
    """Real sacct -D output (tests/fixtures/lab-VERSION/sacct-requeued.txt, jobsmith's own
    argv): each job is the record of its latest run, with its earlier runs' ends, oldest
    first, and only that run's steps."""
    text = (FIXTURES / f"lab-{version}" / "sacct-requeued.txt").read_text()
    records = sorted(parse_sacct_parsable(text, DELIMITER), key=lambda r: int(r.job_id))
    assert [(r.state, r.requeues) for r in records] == _CAPTURED[version]
    for record in records:
        assert [s.step for s in record.steps] == ["batch"]
        assert record.steps[0].state is JobState.COMPLETED  # the last run's, not a requeued one's
    assert len(text.splitlines()) == 1 + sum(2 * (1 + len(r.requeues)) for r in records)


def _row(job_id: str, state: str, name: str, submit: str) -> str:
    cells = {f: "" for f in SACCT_FIELDS}
    cells |= {"JobID": job_id, "JobIDRaw": job_id.split(".")[0], "State": state}
    cells |= {"JobName": name, "Submit": submit, "ExitCode": "0:0", "Partition": "debug"}
    return DELIMITER.join(cells[f] for f in SACCT_FIELDS)


def test_a_row_of_another_job_that_once_had_the_id_is_not_a_run() -> None:
    """Slurm's ids restart when its state is lost: sacct -D then lists an older job of
    another name under the same id, which is neither this job's run nor counted."""
    text = "\n".join(
        [
            DELIMITER.join(SACCT_FIELDS),
            _row("9", "COMPLETED", "old.js-aaaaaaaaaaaa", "2026-11-01T10:00:00"),
            _row("9.batch", "COMPLETED", "batch", "2026-11-01T10:00:00"),
            _row("9", "RUNNING", "new.js-bbbbbbbbbbbb", "2026-12-02T10:00:00"),
        ]
    )
    (record,) = parse_sacct_parsable(text, DELIMITER)
    assert record.name == "new.js-bbbbbbbbbbbb" and record.requeues == () and record.steps == ()


def test_a_requeued_job_is_said_in_words() -> None:
    p, r, n = JobState.PREEMPTED, JobState.REQUEUED, JobState.NODE_FAIL
    assert requeue_phrase((), JobState.RUNNING) is None
    assert requeue_phrase((p, p), JobState.RUNNING) == "preempted 2×, resumed"
    assert requeue_phrase((p,), JobState.COMPLETED) == "preempted 1×, resumed"
    assert (
        requeue_phrase((r, n), JobState.PENDING) == "requeued 1×, node failed 1×, waiting to resume"
    )


def test_status_json_counts_the_restarts_of_a_job_and_of_an_arrays_tasks() -> None:
    def rec(job_id: str, requeues: tuple[JobState, ...]) -> JobRecord:
        return JobRecord(
            job_id=job_id, job_id_raw=job_id, name="x", state=JobState.RUNNING, requeues=requeues
        )

    one = JobStatusDocument.of(
        JobStatus(job_id="5", state=JobState.RUNNING, record=rec("5", (JobState.PREEMPTED,))),
        None,
    )
    assert (one.restarts, one.requeued) == (1, "preempted 1×, resumed")
    assert one.compact()["requeued"] == "preempted 1×, resumed"
    assert one.compact()["restarts"] == 1
    tasks = (rec("6_0", ()), rec("6_1", (JobState.NODE_FAIL, JobState.PREEMPTED)))
    array = JobStatusDocument.of(JobStatus(job_id="6", state=JobState.RUNNING, tasks=tasks), None)
    assert array.restarts == 2


# --- following it: never a failure ---------------------------------------------------------


def _record(state: JobState, ended_s_ago: int) -> JobRecord:
    return JobRecord(
        job_id="5",
        job_id_raw="5",
        name="x",
        state=state,
        end_time=datetime.now() - timedelta(seconds=ended_s_ago),
    )


def test_a_run_that_slurm_may_requeue_is_confirmed_by_the_controller_even_beside_running_jobs() -> (
    None
):
    running = JobRecord(job_id="6", job_id_raw="6", name="y", state=JobState.RUNNING)
    for state in (JobState.PREEMPTED, JobState.NODE_FAIL):
        assert queue_need(["5", "6"], [_record(state, 10), running]) is QueueNeed.STATES
        assert queue_need(["5", "6"], [_record(state, 3600), running]) is QueueNeed.NONE
    assert queue_need(["5", "6"], [_record(JobState.FAILED, 10), running]) is QueueNeed.NONE


def test_the_watcher_follows_a_requeued_job_as_one_job_and_decides_nothing(
    tmp_path: Path,
) -> None:
    """The rule brain is never asked about a job Slurm requeued: its runs' ends are
    history (JobRecord.requeues), and the job stays followed until its real end."""
    h = AgentHarness.build(tmp_path)
    session = h.store.create()
    req = JobRequest(template="command", params={"command": "true"})
    job = str(h.executor.run(session, steps.Submit(job=req)).summary["job_id"])
    asked: list[str] = []

    def decide(change, status):  # type: ignore[no-untyped-def]
        asked.append(change.job_id)
        return None

    folds = SessionFolds(h.store)
    states = []
    for state, requeues in [
        (JobState.RUNNING, ()),
        (JobState.PENDING, (JobState.PREEMPTED,)),
        (JobState.RUNNING, (JobState.PREEMPTED,)),
        (JobState.COMPLETED, (JobState.PREEMPTED,)),
    ]:
        h.slurm.set_state(job, state, requeues=requeues)
        out = watch_cycle(h.store, h.ledger, h.slurm.status, decide, folds=folds)
        states += [c.state for c in out.changes]
    assert states == [JobState.RUNNING, JobState.PENDING, JobState.RUNNING, JobState.COMPLETED]
    assert asked == []


def test_a_lab_capture_was_made_with_jobsmiths_own_argv() -> None:
    for version in ("22.05", "24.11"):
        header = (FIXTURES / f"lab-{version}" / "sacct-requeued.txt").read_text().splitlines()[0]
        assert header.split(DELIMITER) == list(SACCT_FIELDS), version


def test_checkpoint_words_are_kept_out_of_sbatchs_own_options(tmp_path: Path) -> None:
    _script(tmp_path, "#!/bin/bash\ntrue\n")
    words = shlex.split("-p debug --checkpoint='touch a b' --signal-lead 30 job.sh")
    read = read_request(SbatchScripts(), words, (), tmp_path)
    assert read.request.checkpoint == Checkpoint(command="touch a b", signal_lead_s=30)
    assert read.request.partition == "debug" and read.flags == frozenset()

"""Sites without accounting (issue 15, part 1), without a cluster: parsers, the adapter's
memory, FINAL_UNKNOWN through the agent, resume and the watcher's warning.

The Slurm output here is real, captured on the lab cluster switched to
AccountingStorageType=accounting_storage/none (tests/fixtures/no_accounting/README.md).
tests/test_no_accounting_lab.py does the same on the switched lab cluster itself.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness
from scripted_transport import Reply, ScriptedTransport
from test_agent_logic_resume import crashed, intent_of, resume
from test_agent_logic_watch import cycle, states, submit

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.parsing.accounting import (
    RECHECK_S,
    AccountingFacts,
    AccountingMemory,
    facts_from_config,
)
from jobsmith.adapters.slurm.parsing.status import controller_status, summarise
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.jobstate import record_job_states
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.unseen import with_recorded_ends
from jobsmith.agent.watcher.cycle import interval_warning
from jobsmith.errors import SchedulerError

FIXTURES = Path(__file__).parent / "fixtures" / "no_accounting"
SINCE = datetime(2026, 1, 1)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def finished_job_id() -> str:
    """The job whose finished record squeue_finished.txt holds (see the README there)."""
    return fixture("squeue_finished.txt").split("\x1f")[1]


class ScriptedSlurm(ScriptedTransport):
    """A Transport answering each command with real output captured on the switched lab."""

    def __init__(self, *, accounting: bool = False) -> None:
        super().__init__()
        self.accounting = accounting

    def asked(self) -> list[str]:
        """Each command asked, as `sacct`, `squeue` or `scontrol show config`."""
        return [_command(argv) for argv in self.calls]

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        cmd = _command(argv)
        if cmd == "sacct" and not self.accounting:
            return "", fixture("sacct_disabled.stderr"), 1
        if cmd == "sacct":
            return "", "", 0
        if cmd == "squeue" and any(a.startswith("--name=") for a in argv):
            return "", "", 0  # a tag lookup: not in the queue
        if cmd == "squeue":
            return fixture("squeue_finished.txt"), "", 0
        if cmd == "scontrol show config":
            name = "show_config_slurmdbd.txt" if self.accounting else "show_config_none.txt"
            return fixture(name), "", 0
        raise AssertionError(f"unexpected command {argv}")


def _command(argv: tuple[str, ...]) -> str:
    return " ".join(argv[:3]) if argv[0] == "scontrol" else argv[0]


def slurm(transport: ScriptedSlurm, memory_dir: Path) -> SlurmScheduler:
    return SlurmScheduler(transport, memory=AccountingMemory(memory_dir / "lab.json"))


# --- the neutral state ---------------------------------------------------------------------


def test_final_unknown_is_the_end_but_neither_success_nor_failure() -> None:
    state = JobState.FINAL_UNKNOWN
    assert state.is_terminal and not state.is_active
    assert not state.is_failure and not state.counts_toward_streak
    # an array with one task ended unseen has no known success either
    assert summarise([JobState.COMPLETED, JobState.FINAL_UNKNOWN]) is JobState.FINAL_UNKNOWN
    assert summarise([JobState.FAILED, JobState.FINAL_UNKNOWN]) is JobState.FAILED
    assert summarise([JobState.RUNNING, JobState.FINAL_UNKNOWN]) is JobState.RUNNING


# --- parsing what the switched lab printed --------------------------------------------------


def test_show_config_tells_accounting_and_min_job_age() -> None:
    off = facts_from_config(fixture("show_config_none.txt"))
    on = facts_from_config(fixture("show_config_slurmdbd.txt"))
    assert (off.accounting, off.min_job_age_s) == (False, 30)
    assert (on.accounting, on.min_job_age_s) == (True, 30)
    with pytest.raises(SchedulerError, match="AccountingStorageType"):
        facts_from_config("Configuration data as of nothing\n")


def test_the_controller_alone_reads_a_finished_job_and_calls_a_gone_one_final_unknown() -> None:
    from jobsmith.adapters.slurm.commands import argv
    from jobsmith.adapters.slurm.parsing.parse import parse_squeue

    queue = parse_squeue(fixture("squeue_finished.txt"), argv.DELIMITER)
    done = finished_job_id()
    out = controller_status([done, "999999"], queue)
    assert out[done].state is JobState.COMPLETED
    record = out[done].record
    assert record is not None and record.exit_code == 0
    assert out["999999"].state is JobState.FINAL_UNKNOWN and out["999999"].record is None


# --- the adapter learns once, remembers, re-checks ------------------------------------------


def test_sacct_saying_disabled_is_learned_once_and_status_uses_squeue_alone(
    tmp_path: Path,
) -> None:
    transport = ScriptedSlurm()
    sched = slurm(transport, tmp_path)
    done = finished_job_id()
    first = sched.status([done, "999999"], SINCE)
    assert transport.asked() == ["sacct", "squeue"]
    assert first[done].state is JobState.COMPLETED
    assert first["999999"].state is JobState.FINAL_UNKNOWN
    sched.status([done], SINCE)
    assert transport.asked() == ["sacct", "squeue", "squeue"]  # no second sacct
    assert sched.find_by_name("jobsmith-x", SINCE) == []
    assert transport.asked()[-1] == "squeue"
    assert not sched.has_accounting()
    # remembered for the next process: it asks sacct nothing
    later = ScriptedSlurm()
    slurm(later, tmp_path).status([done], SINCE)
    assert later.asked() == ["squeue"]


def test_a_stale_memory_is_checked_again_and_accounting_turned_on_is_noticed(
    tmp_path: Path,
) -> None:
    memory = AccountingMemory(tmp_path / "lab.json")
    old = datetime.now(UTC) - timedelta(seconds=RECHECK_S + 1)
    memory.save(AccountingFacts(accounting=False, min_job_age_s=30, checked_at=old))
    transport = ScriptedSlurm(accounting=True)
    sched = SlurmScheduler(transport, memory=memory)
    sched.status(["1"], SINCE)
    assert transport.asked()[0] == "sacct"  # stale: sacct asked again, and it answered
    remembered = memory.load()
    assert remembered is not None and remembered.accounting
    assert remembered.min_job_age_s == 30 and remembered.fresh(datetime.now(UTC))


def test_has_accounting_and_min_job_age_come_from_show_config_once(tmp_path: Path) -> None:
    transport = ScriptedSlurm()
    sched = slurm(transport, tmp_path)
    assert not sched.has_accounting() and sched.min_job_age_s() == 30
    assert transport.asked() == ["scontrol show config"]
    data = json.loads((tmp_path / "lab.json").read_text())
    assert data["accounting"] is False and data["min_job_age_s"] == 30


def test_a_damaged_memory_file_is_asked_again(tmp_path: Path) -> None:
    (tmp_path / "lab.json").write_text("{not json")
    transport = ScriptedSlurm()
    assert not slurm(transport, tmp_path).has_accounting()
    assert transport.asked() == ["scontrol show config"]


# --- the agent -------------------------------------------------------------------------------


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, {"approval": {"core_hours": 100}})


def test_without_accounting_resume_leaves_an_unseen_submission_undecided(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=False)
    h.slurm.accounting = False
    report = resume(h, session)
    assert report.resubmitted == [] and list(report.undecided) == [step]
    name = intent_of(h, session)["job_name"]
    assert report.undecided[step] == (
        f"{name}: the controller does not show it and this cluster keeps no accounting, so it"
        " may never have reached Slurm or may have run and been forgotten (MinJobAge); nothing"
        " submitted: look for its output, and submit it again yourself if it never ran"
    )
    assert h.slurm.count("submit") == 1  # only the crashed attempt


def test_without_accounting_a_submission_the_controller_shows_is_still_found(
    h: AgentHarness,
) -> None:
    session, step = crashed(h, slurm_got_it=True)
    h.slurm.accounting = False
    assert resume(h, session).found == [step]


def test_the_watcher_records_final_unknown_once_decides_nothing_and_stops_polling(
    h: AgentHarness,
) -> None:
    gone = submit(h)
    cycle(h)
    h.slurm.set_state(gone, JobState.FINAL_UNKNOWN)
    out = cycle(h)
    assert [(c.job_id, c.state) for c in out.changes] == [(gone, JobState.FINAL_UNKNOWN)]
    assert out.decisions == []
    assert cycle(h).watched == 0
    assert states(h, gone) == ["PENDING", "FINAL_UNKNOWN"]


def test_a_recorded_end_answers_for_a_job_the_controller_forgot(h: AgentHarness) -> None:
    done, gone = submit(h), submit(h)
    h.slurm.set_state(done, JobState.FAILED, exit_code=1)
    cycle(h)  # the watcher saw done fail while the controller still held it
    unseen = {j: JobStatus(job_id=j, state=JobState.FINAL_UNKNOWN) for j in (done, gone)}
    out = with_recorded_ends(SessionFolds(h.store), h.ledger, unseen)
    assert out[done].state is JobState.FAILED
    assert out[gone].state is JobState.FINAL_UNKNOWN
    # and whoever records FINAL_UNKNOWN after a recorded end keeps the end
    changes = record_job_states(h.store, h.ledger, unseen, folds=SessionFolds(h.store))
    assert [(c.job_id, c.state) for c in changes] == [(gone, JobState.FINAL_UNKNOWN)]
    assert states(h, done) == ["FAILED"]


@pytest.mark.parametrize(
    ("interval", "accounting", "age", "warned"),
    [(60, False, 30, True), (30, False, 30, True), (20, False, 30, False), (600, True, 30, False)],
)
def test_the_watcher_warns_when_its_interval_reaches_min_job_age(
    interval: float, accounting: bool, age: int, warned: bool
) -> None:
    warning = interval_warning(interval, accounting, age)
    assert (warning is not None) is warned
    if warning:
        assert "MinJobAge" in warning and f"below {age}s" in warning


def test_an_unknown_min_job_age_without_accounting_is_a_warning() -> None:
    warning = interval_warning(10, False, None)
    assert warning is not None and "could not be read" in warning

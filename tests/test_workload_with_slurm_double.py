"""When a workload has ended (agent/watcher/workload.py), without Slurm: jobs submitted
through the real executor into one session, SchedulerDouble's status as the poll, the
real store, ledger and folds. The lab half (the message itself, told once) is
tests/test_workload_message_lab.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from scheduler_double import AgentHarness
from test_agent_logic_watch import Decider, cycle, rule_brain, submit

from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.watcher.workload import ended_workloads


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, {"budgets": {"submissions_per_hour": 100}})


def test_a_session_ends_when_its_last_job_ends_and_its_failures_are_decided(
    h: AgentHarness,
) -> None:
    session, other = h.store.create(), h.store.create()
    first, last = submit(h, session), submit(h, session)
    alone = submit(h, other)
    cycle(h)
    h.slurm.set_state(first, JobState.COMPLETED, exit_code=0)
    out = cycle(h)
    assert ended_workloads(out.changes, h.ledger, SessionFolds(h.store)) == {}  # one still runs
    h.slurm.set_state(last, JobState.FAILED, exit_code=3)
    h.slurm.set_state(alone, JobState.RUNNING)
    undecided = cycle(h, decide=Decider(none_for={last}))  # no decision recorded yet
    assert ended_workloads(undecided.changes, h.ledger, SessionFolds(h.store)) == {}
    h.slurm.set_state(last, JobState.FAILED, exit_code=3)
    decided = cycle(h, decide=rule_brain(h, []))  # the next cycle decides it (recorded)
    assert decided.decisions
    folds = SessionFolds(h.store)
    changes = undecided.changes  # the change that ended it, seen with the decision now kept
    assert ended_workloads(changes, h.ledger, folds) == {session: last}


def test_a_rerun_keeps_the_workload_going_until_it_ends_too(h: AgentHarness) -> None:
    session = h.store.create()
    job = submit(h, session)
    cycle(h)
    h.slurm.set_state(job, JobState.FAILED, exit_code=3)
    out = cycle(h, decide=rule_brain(h, []))
    assert out.decisions and "new_job_id" not in out.decisions[0]  # reported, not re-run
    assert ended_workloads(out.changes, h.ledger, SessionFolds(h.store)) == {session: job}
    rerun = submit(h, session)  # a re-run is a new job of the same session
    assert ended_workloads(out.changes, h.ledger, SessionFolds(h.store)) == {}
    h.slurm.set_state(rerun, JobState.COMPLETED, exit_code=0)
    later = cycle(h)
    assert ended_workloads(later.changes, h.ledger, SessionFolds(h.store)) == {session: rerun}

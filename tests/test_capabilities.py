"""The scheduler's capabilities (adapters/capabilities.py): what the agent does where a
scheduler lacks one, on the scheduler double with its capabilities taken away (no Slurm).

With Slurm (or the double, which has them all) nothing changes; a scheduler without them
still gets scripts that say what they ask for, and crash recovery and adoption stay on
the safe side: undecided rather than submitting twice, no script rather than a guess.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from scheduler_double import AgentHarness, SchedulerDouble, SimulatedCrash

from jobsmith.adapters.capabilities import Capabilities, OptionsComment
from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.recovery.adopt import adopt
from jobsmith.agent.runtime.recovery.replay import DryRunScheduler
from jobsmith.agent.runtime.recovery.rerun import with_directives
from jobsmith.agent.runtime.recovery.resume import resume_session
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest


class Bare(SchedulerDouble):
    """The double as a scheduler with none of the capabilities."""

    def capabilities(self) -> Capabilities:
        return Capabilities()


@pytest.fixture
def bare(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, slurm=Bare())


def request() -> JobRequest:
    return JobRequest(template="command", params={"command": "echo hi"})


def test_the_slurm_adapter_the_double_and_the_dry_run_have_every_capability() -> None:
    slurm = SlurmScheduler(transport=None)  # type: ignore[arg-type]  # nothing is run
    double = SchedulerDouble()
    for caps in (slurm.capabilities(), double.capabilities()):
        assert None not in (caps.directives, caps.controller, caps.submissions, caps.scripts)
    assert DryRunScheduler(double).capabilities() == double.capabilities()
    assert double.calls == []  # asking for them asks Slurm nothing


def test_without_directives_the_script_carries_its_options_as_a_comment(
    bare: AgentHarness,
) -> None:
    session = bare.store.create()
    bare.executor.run(session, st.Submit(job=request()))
    (script,) = bare.slurm.scripts.values()
    (options,) = bare.slurm.options.values()
    lines = script.splitlines()
    assert not any(line.startswith("#SBATCH") for line in lines)
    (comment,) = [line for line in lines if line.startswith(OptionsComment.PREFIX)]
    assert JobOptions.model_validate(json.loads(comment.removeprefix(OptionsComment.PREFIX))) == (
        options
    )
    # a re-run replaces the line, as it replaces #SBATCH lines
    longer = options.model_copy(update={"time_limit_s": 1200})
    rerun = with_directives(script, longer, bare.slurm)
    assert rerun.count(OptionsComment.PREFIX) == 1 and '"time_limit_s":1200' in rerun


def test_without_a_submission_probe_the_host_is_this_one_and_resume_leaves_it_undecided(
    bare: AgentHarness,
) -> None:
    session = bare.store.create()
    bare.slurm.submit_error = SimulatedCrash()
    with pytest.raises(SimulatedCrash):
        bare.executor.run(session, st.Submit(job=request()))
    bare.slurm.submit_error = None
    (intent,) = [e for e in bare.store.read(session) if e.kind is EventKind.INTENT]
    assert intent.data["submit_host"] == socket.gethostname()
    report = resume_session(
        bare.executor,
        bare.slurm,
        session,
        host=socket.gethostname(),
        orphan_wait_s=0,
        clock=bare.clock,
        sleep=lambda s: None,
    )
    assert report.resubmitted == [] and list(report.undecided) == [intent.step_id]
    assert "cannot say" in report.undecided[intent.step_id or ""]
    assert bare.slurm.count("submit") == 1  # only the crashed attempt


class NoControllerFacts(SchedulerDouble):
    """The double as a scheduler that can look for an orphaned sbatch but has no
    ControllerFacts (no slurmdbd whose backlog could hide a job)."""

    def capabilities(self) -> Capabilities:
        return Capabilities(directives=self, submissions=self, scripts=self)


def test_without_controller_facts_accounting_is_not_waited_for_and_resume_resubmits(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, slurm=NoControllerFacts())
    session = h.store.create()
    h.slurm.submit_error = SimulatedCrash()
    with pytest.raises(SimulatedCrash):
        h.executor.run(session, st.Submit(job=request()))
    h.slurm.submit_error = None
    h.slurm.backlog = 5  # never asked: a scheduler without the facts has no such lag
    naps: list[float] = []
    report = resume_session(
        h.executor,
        h.slurm,
        session,
        host=socket.gethostname(),
        orphan_wait_s=60,
        clock=h.clock,
        sleep=naps.append,
    )
    (intent,) = [e for e in h.store.read(session) if e.kind is EventKind.INTENT]
    assert report.resubmitted == [intent.step_id] and report.undecided == {}
    assert naps == [] and h.slurm.count("dbd_backlog") == 0
    assert h.slurm.count("submission_in_flight") == 1 and h.slurm.count("submit") == 2


def test_without_batch_scripts_an_adopted_job_keeps_no_script(bare: AgentHarness) -> None:
    bare.slurm.set_state("4242", JobState.RUNNING)
    session, _ = adopt(bare.store, bare.ledger, bare.slurm, "doublelab", "4242")
    (intent,) = [e for e in bare.store.read(session) if e.kind is EventKind.INTENT]
    assert intent.data["script"] is None
    assert "hands none back" in intent.data["script_note"]
    assert bare.slurm.count("batch_script") == 0

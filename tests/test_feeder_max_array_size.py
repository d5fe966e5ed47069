"""MaxArraySize read from the cluster and used by the feeder (issue 28, item 1): it caps
an array's highest *index*, not its count, so an array whose indices reach it is fed in
parts indexed from 0 instead of being refused by sbatch.

The parser reads real `scontrol show config` captures (tests/fixtures/lab-22.05, and the
no-accounting ones); the Slurm adapter is driven through a transport answering with them,
to pin that it asks once and remembers the answer as it does MinJobAge; the executor's
decisions run against SchedulerDouble, whose sbatch refuses such an array as Slurm does.
tests/test_feeder_max_array_size_lab.py shows it on the lab's Slurm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness
from test_submit_limits import CapturedSlurm, opts

from jobsmith.adapters.slurm.parsing.accounting import AccountingMemory, facts_from_config
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission import orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.judging.policy import array_size_refusal
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.errors import SchedulerError

FIXTURES = Path(__file__).parent / "fixtures"


# --- parsing real captures (pure) --------------------------------------------------------


@pytest.mark.parametrize(
    "capture",
    [
        "lab-22.05/scontrol-show-config.txt",
        "lab-24.11/scontrol-show-config.txt",
        "no_accounting/show_config_none.txt",
    ],
)
def test_max_array_size_is_read_from_show_config(capture: str) -> None:
    facts = facts_from_config((FIXTURES / capture).read_text())
    assert facts.max_array_size == 10001  # scripts/slurm-lab's MaxArraySize=10001
    assert facts.min_job_age_s == 30


def test_a_config_without_the_line_leaves_it_unknown() -> None:
    text = (FIXTURES / "lab-22.05/scontrol-show-config.txt").read_text()
    without = "\n".join(line for line in text.splitlines() if "MaxArraySize" not in line)
    assert facts_from_config(without).max_array_size is None


def test_the_cap_is_on_the_highest_index_not_the_count() -> None:
    assert array_size_refusal(opts(array="0-10000"), 10001) is None  # 10,001 tasks: fine
    refused = array_size_refusal(opts(array="10000-10009"), 10001)  # 10 tasks: refused
    assert refused is not None and refused.rule == "max array size"
    assert "highest index 10009 is above the site's largest, 10000" in refused.message
    assert array_size_refusal(opts(array="0-5000000"), None) is None  # not known: sbatch judges
    assert array_size_refusal(opts(), 10001) is None  # no array


# --- the adapter: one `scontrol show config`, remembered ----------------------------------


class ConfigSlurm(CapturedSlurm):
    """CapturedSlurm (sacctmgr and squeue captures) answering `scontrol show config` too."""

    def answer(self, argv: tuple[str, ...], **run: Any) -> Any:
        if argv[:3] == ("scontrol", "show", "config"):
            return (FIXTURES / "lab-22.05/scontrol-show-config.txt").read_text(), "", 0
        return super().answer(argv, **run)


def test_an_array_s_submit_limits_name_max_array_size_read_once_and_remembered(
    tmp_path: Path,
) -> None:
    memory = AccountingMemory(tmp_path / "lab.json")
    slurm = ConfigSlurm()
    sched = SlurmScheduler(slurm, memory=memory)
    assert sched.submit_limits("alice", opts(qos="normal")).max_array_size is None  # no array
    assert "scontrol show config" not in slurm.asked()
    array = opts(qos="normal", array="0-99")
    assert sched.submit_limits("alice", array).max_array_size == 10001
    assert sched.submit_limits("alice", array).max_array_size == 10001
    assert slurm.asked().count("scontrol show config") == 1
    later = ConfigSlurm()  # another process: the remembered answer serves
    assert SlurmScheduler(later, memory=memory).max_array_size() == 10001
    assert "scontrol show config" not in later.asked()


def test_a_controller_that_does_not_answer_leaves_the_cap_unknown() -> None:
    class Silent(CapturedSlurm):
        def answer(self, argv: tuple[str, ...], **run: Any) -> Any:
            if argv[0] == "scontrol":
                return "", "slurm_load_ctl_conf error: Unable to contact slurm controller", 1
            return super().answer(argv, **run)

    sched = SlurmScheduler(Silent())
    limits = sched.submit_limits("alice", opts(qos="normal", array="0-9"))
    assert limits.max_array_size is None  # sbatch stays the judge
    with pytest.raises(SchedulerError):
        sched.has_accounting()  # what needed the answer before still says so


# --- the feeder with the Slurm double ---------------------------------------------------------


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    harness = AgentHarness.build(tmp_path, {"max_concurrent_jobs": 5000})
    harness.slurm.max_array_size = 1001  # Slurm's default
    return harness


def test_indices_above_max_array_size_are_fed_as_one_part_from_0_with_an_offset(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = JobRequest(
        template="command",
        params={"command": "true"},
        array="1000-1009",
        mem_mb=10,
        time_limit_s=60,
    )
    result = h.executor.submit(session, orders.NewJob(st.Submit(job=job)))
    assert (result.summary["workload_tasks"], result.summary["workload_parts"]) == (10, 1)
    [(job_id, options)] = h.slurm.options.items()
    assert options.array == "0-9"  # what sbatch accepts: 1000-1009 it refuses
    assert "SLURM_ARRAY_TASK_ID=$((JOBSMITH_PART_TASK_ID + 1000))" in h.slurm.scripts[job_id]


def test_a_count_above_max_array_size_without_any_submit_limit_is_split_by_it(
    h: AgentHarness,
) -> None:
    session = h.store.create()
    job = JobRequest(
        template="command", params={"command": "true"}, array="0-2499", mem_mb=10, time_limit_s=60
    )
    result = h.executor.submit(session, orders.NewJob(st.Submit(job=job)))
    assert (result.summary["workload_tasks"], result.summary["workload_parts"]) == (2500, 3)
    # no submit limit: every part fits the queue now, each indexed from 0
    assert [o.array for o in h.slurm.options.values()] == ["0-1000", "0-1000", "0-497"]
    offsets = [
        s.split("JOBSMITH_PART_TASK_ID + ")[1].split(")")[0] for s in h.slurm.scripts.values()
    ]
    assert offsets == ["0", "1001", "2002"]
    [workload] = [e for e in h.store.read(session) if e.kind is EventKind.WORKLOAD]
    assert workload.data["max_array_size"] == 1001


def test_an_array_within_max_array_size_is_submitted_whole(h: AgentHarness) -> None:
    session = h.store.create()
    job = JobRequest(
        template="command", params={"command": "true"}, array="0-1000", mem_mb=10, time_limit_s=60
    )
    result = h.executor.submit(session, orders.NewJob(st.Submit(job=job)))
    assert "workload" not in result.summary
    assert [o.array for o in h.slurm.options.values()] == ["0-1000"]


def test_a_plan_with_an_array_above_max_array_size_is_refused_with_nothing_queued(
    h: AgentHarness,
) -> None:
    from jobsmith.agent.runtime.workflows.plans import Plan
    from jobsmith.errors import PolicyError

    plan = Plan.model_validate(
        {
            "name": "wide",
            "steps": {
                "first": {"template": "command", "params": {"command": "true"}},
                "many": {
                    "template": "command",
                    "params": {"command": "true"},
                    "array": "0-1500",
                    "after_ok": ["first"],
                },
            },
        }
    )
    with pytest.raises(PolicyError, match=r"max array size.*highest index 1500"):
        h.executor.run(h.store.create(), st.RunPlan(plan=plan))
    assert h.slurm.count("submit") == 0  # not `first` queued, then sbatch refusing `many`

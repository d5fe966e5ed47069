"""Slurm's limits on queued jobs (issue 10, "Canary first": an array's task count is
checked against the QoS's MaxSubmit before anything is submitted).

The parsers read real captures (tests/fixtures/lab-22.05/README.md, "Submit limits"); the
Slurm adapter is driven through a transport answering with them, to pin which commands it
runs and how often; the executor's decisions run against SchedulerDouble: an array or a
plan over a limit is refused with nothing submitted, under it is submitted, and with no
limit nothing changes. test_submit_limits_lab.py shows the same against the lab's Slurm.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest
from scheduler_double import AgentHarness, SchedulerDouble
from scripted_transport import Reply, ScriptedTransport

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import SubmitLimit, SubmitLimits
from jobsmith.adapters.slurm.parsing.qoslimits import (
    SubmitFacts,
    applicable,
    counted,
    parse_qos_submit,
    parse_queued,
    parse_user_assoc,
)
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.judging.policy import submit_limit_refusal
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows.plans import Plan
from jobsmith.errors import PolicyError, SchedulerError

CAPTURES = Path(__file__).parent / "fixtures" / "lab-22.05"


def capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def alice_facts() -> SubmitFacts:
    default, assocs = parse_user_assoc(capture("sacctmgr-user-assoc-alice.txt"), "alice")
    qos = parse_qos_submit(capture("sacctmgr-qos-submit.txt"))
    return SubmitFacts(user="alice", default_account=default, qos=qos, assocs=assocs)


def opts(**kw: Any) -> JobOptions:
    return JobOptions(job_name="t.js-0123456789ab", **kw)


# --- parsing the real captures (pure) ---------------------------------------------------------


def test_qos_limits_are_read_with_unset_ones_as_none() -> None:
    qos = parse_qos_submit(capture("sacctmgr-qos-submit.txt"))
    assert list(qos) == ["normal", "high", "tiny"]
    assert (qos["tiny"].per_user, qos["tiny"].per_account) == (5, 20)
    assert (qos["normal"].per_user, qos["normal"].per_account) == (None, None)


def test_the_users_default_account_and_association_limits_are_read() -> None:
    default, assocs = parse_user_assoc(capture("sacctmgr-user-assoc-alice.txt"), "alice")
    assert default == "lab"
    assert [(a.account, a.partition, a.default_qos, a.max_submit) for a in assocs] == [
        ("proj2", None, "normal", None),
        ("lab", None, "normal", None),
    ]
    assert assocs[0].qos == ("high", "normal", "tiny")
    _, (bob,) = parse_user_assoc(capture("sacctmgr-user-assoc-bob.txt"), "bob")
    assert bob.max_submit == 1000
    assert parse_user_assoc(capture("sacctmgr-user-assoc-bob.txt"), "alice") == (None, ())


def test_each_queued_array_task_counts_and_a_pending_range_counts_its_size() -> None:
    held = parse_queued(capture("squeue-submit-counts.txt"))
    assert [(q.qos, q.account, q.tasks) for q in held][-2:] == [
        ("tiny", "proj2", 2),
        ("tiny", "lab", 3),
    ]
    assert sum(q.tasks for q in held) == 9
    running = parse_queued(capture("squeue-submit-counts-running.txt"))
    assert sum(q.tasks for q in running if q.qos == "tiny") == 5  # 3 split tasks + a range of 2


def test_unreadable_output_names_the_command_and_the_line() -> None:
    with pytest.raises(SchedulerError, match=r"sacctmgr show qos.*tiny\|5"):
        parse_qos_submit("tiny|5\n")
    with pytest.raises(SchedulerError, match=r"squeue.*bad array task id"):
        parse_queued("tiny|lab|debug|x-y\n")


def test_a_qos_limit_counts_the_users_jobs_in_that_qos_under_every_account() -> None:
    queue = parse_queued(capture("squeue-submit-counts.txt"))
    base, rules = applicable(alice_facts(), opts(qos="tiny", account="lab", partition="debug"))
    limits = counted(base, rules, queue)
    assert (limits.qos, limits.account) == ("tiny", "lab")
    assert [(x.rule, x.holder, x.limit, x.queued) for x in limits.limits] == [
        ("MaxSubmitPU", "QoS tiny (per user)", 5, 5),  # lab's 3 and proj2's 2, not normal's 4
        ("MaxSubmitPA", "QoS tiny (per account lab)", 20, 3),
    ]


def test_a_job_naming_no_qos_or_account_gets_the_defaults_and_their_limits() -> None:
    base, rules = applicable(alice_facts(), opts())
    assert (base.qos, base.account, rules) == ("normal", "lab", [])  # normal sets none
    default, assocs = parse_user_assoc(capture("sacctmgr-user-assoc-bob.txt"), "bob")
    bob = SubmitFacts(user="bob", default_account=default, qos={}, assocs=assocs)
    queue = parse_queued(capture("squeue-submit-counts.txt"))
    limits = counted(*applicable(bob, opts()), queue)
    ((limit,),) = [limits.limits]
    assert (limit.rule, limit.holder, limit.limit) == ("MaxSubmitJobs", "association bob/lab", 1000)
    assert limit.queued == 7  # every QoS, account lab only


# --- the Slurm adapter: which commands, how often -----------------------------------------------


class CapturedSlurm(ScriptedTransport):
    """A Transport answering sacctmgr and squeue with the captures; records the calls."""

    def __init__(self, *, sacctmgr_fails: bool = False) -> None:
        super().__init__()
        self.sacctmgr_fails = sacctmgr_fails

    def asked(self) -> list[str]:
        """Each call's first six words."""
        return [" ".join(argv[:6]) for argv in self.calls]

    def answer(self, argv: tuple[str, ...], **run: Any) -> Reply:
        if argv[0] == "sacctmgr" and self.sacctmgr_fails:
            message = "sacctmgr: error: Problem talking to the database: Connection refused"
            return "", message, 1
        if argv[:5] == ("sacctmgr", "-P", "-n", "show", "qos"):
            return capture("sacctmgr-qos-submit.txt"), "", 0
        if argv[:5] == ("sacctmgr", "-P", "-n", "show", "user"):
            return capture("sacctmgr-user-assoc-alice.txt"), "", 0
        if argv[0] == "squeue" and "-o" in argv:
            return capture("squeue-submit-counts.txt"), "", 0
        raise AssertionError(f"unexpected command {argv}")


def test_sacctmgr_is_asked_once_per_process_and_squeue_only_when_a_limit_applies() -> None:
    slurm = CapturedSlurm()
    sched = SlurmScheduler(slurm)
    assert sched.submit_limits("alice", opts(qos="normal")).limits == ()
    qos_fields = "sacctmgr -P -n show qos format=Name,MaxSubmitPU,MaxSubmitPA"
    # the two are asked at once (threads): in either order
    assert sorted(slurm.asked()) == [qos_fields, "sacctmgr -P -n show user alice"]
    tiny = sched.submit_limits("alice", opts(qos="tiny", account="proj2"))
    assert [(x.rule, x.queued) for x in tiny.limits] == [("MaxSubmitPU", 5), ("MaxSubmitPA", 2)]
    sched.submit_limits("alice", opts(qos="tiny"))
    counts = "squeue --local --me --noheader -t pending,running,suspended"
    assert slurm.asked()[2:] == [counts] * 2


def test_no_answer_from_sacctmgr_means_no_limit_known_and_nothing_refused() -> None:
    slurm = CapturedSlurm(sacctmgr_fails=True)
    sched = SlurmScheduler(slurm)
    assert sched.submit_limits("alice", opts(qos="tiny")).limits == ()
    assert sched.submit_limits("alice", opts(qos="tiny")).limits == ()
    assert not any(c.startswith("squeue") for c in slurm.asked())
    assert len(slurm.asked()) == 2  # both at once; the failure is remembered: not asked again


def test_the_limits_are_remembered_between_processes_for_a_few_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second process (a second SlurmScheduler on the same state file) takes the limits
    sacctmgr gave the first, with no sacctmgr of its own (issue 26: 0.2-0.3 s a submit);
    past SUBMIT_FACTS_TTL_S, or for another user, sacctmgr is asked again; a damaged file
    is no memory."""
    from jobsmith.adapters.slurm import remembered
    from jobsmith.adapters.slurm.remembered import KnownSubmitFacts, Remembered

    path = tmp_path / "lab.submit-limits.json"
    first, second = CapturedSlurm(), CapturedSlurm()
    limits = SlurmScheduler(first, submit_memory=Remembered(path, KnownSubmitFacts))
    known = limits.submit_limits("alice", opts(qos="tiny")).limits
    assert len(first.asked()) == 3  # two sacctmgr, one squeue
    again = SlurmScheduler(second, submit_memory=Remembered(path, KnownSubmitFacts))
    assert again.submit_limits("alice", opts(qos="tiny")).limits == known
    assert [c for c in second.asked() if c.startswith("sacctmgr")] == []

    monkeypatch.setattr(remembered, "SUBMIT_FACTS_TTL_S", 0)  # the minutes have passed
    late = CapturedSlurm()
    SlurmScheduler(late, submit_memory=Remembered(path, KnownSubmitFacts)).submit_limits(
        "alice", opts(qos="tiny")
    )
    assert len([c for c in late.asked() if c.startswith("sacctmgr")]) == 2
    monkeypatch.undo()

    other = CapturedSlurm()
    SlurmScheduler(other, submit_memory=Remembered(path, KnownSubmitFacts)).submit_limits(
        "bob", opts(qos="tiny")
    )
    assert len([c for c in other.asked() if c.startswith("sacctmgr")]) == 2
    assert set(KnownSubmitFacts.model_validate_json(path.read_bytes()).users) == {"alice", "bob"}

    path.write_bytes(b"\xff not json")
    damaged = CapturedSlurm()
    SlurmScheduler(damaged, submit_memory=Remembered(path, KnownSubmitFacts)).submit_limits(
        "alice", opts(qos="tiny")
    )
    assert len([c for c in damaged.asked() if c.startswith("sacctmgr")]) == 2


def test_no_answer_from_sacctmgr_is_not_remembered_for_the_next_process(tmp_path: Path) -> None:
    """slurmdbd down: nothing known and nothing refused, as before, and nothing written,
    so the next process asks again (slurmdbd may be back)."""
    from jobsmith.adapters.slurm.remembered import KnownSubmitFacts, Remembered

    path = tmp_path / "lab.submit-limits.json"
    down = SlurmScheduler(
        CapturedSlurm(sacctmgr_fails=True), submit_memory=Remembered(path, KnownSubmitFacts)
    )
    assert down.submit_limits("alice", opts(qos="tiny")).limits == ()
    assert not path.exists()
    back = CapturedSlurm()
    sched = SlurmScheduler(back, submit_memory=Remembered(path, KnownSubmitFacts))
    assert sched.submit_limits("alice", opts(qos="tiny")).limits  # known again
    assert len([c for c in back.asked() if c.startswith("sacctmgr")]) == 2


# --- the refusal's words (pure) -----------------------------------------------------------------


def test_the_refusal_names_the_limit_what_is_queued_what_is_added_and_what_to_do() -> None:
    limit = SubmitLimit(rule="MaxSubmitPU", holder="QoS tiny (per user)", limit=5, queued=2)
    assert submit_limit_refusal([(limit, 3)], 1) is None  # exactly at the limit: Slurm takes it
    refused = submit_limit_refusal([(limit, 4)], 1)
    assert refused is not None and refused.rule == "submit limit"
    assert refused.message == (
        "QoS tiny (per user) allows at most 5 jobs queued or running (MaxSubmitPU, each array "
        "task counting one): you have 2 and this submission adds 4, so Slurm would refuse it; "
        "--throttle does not help (it limits running tasks, not queued ones): submit at most "
        "3 tasks now (split it), or wait until 1 of your queued jobs have ended (squeue --me)"
    )
    plan = submit_limit_refusal([(limit, 9)], 3)
    assert plan is not None and "the plan's 3 jobs add 9" in plan.message
    assert "split it into parts of at most 5 tasks" in plan.message
    full = SubmitLimit(rule="MaxSubmitJobs", holder="association a/lab", limit=5, queued=5)
    waiting = submit_limit_refusal([(full, 2)], 1)
    assert waiting is not None and waiting.message.endswith(
        "(it limits running tasks, not queued ones): "
        "wait until 2 of your queued jobs have ended (squeue --me)"
    )


@pytest.mark.parametrize(
    ("queued", "adds", "jobs", "said"),
    [
        # more than the limit itself: no wait makes it fit whole
        (
            0, 6, 3,
            "you have 0 and the plan's 3 jobs add 6, so Slurm would refuse its last jobs after "
            "the first were queued; --throttle does not help (it limits running tasks, not "
            "queued ones): split it into parts of at most 5 tasks, each submitted once the "
            "ones before have ended",
        ),
        # exactly the limit: it fits once the queue is empty
        (
            2, 5, 1,
            "you have 2 and this submission adds 5, so Slurm would refuse it; --throttle does "
            "not help (it limits running tasks, not queued ones): submit at most 3 tasks now "
            "(split it), or wait until 2 of your queued jobs have ended (squeue --me)",
        ),
        # room for one
        (
            4, 3, 1,
            "you have 4 and this submission adds 3, so Slurm would refuse it; --throttle does "
            "not help (it limits running tasks, not queued ones): submit at most 1 tasks now "
            "(split it), or wait until 2 of your queued jobs have ended (squeue --me)",
        ),
    ],
)  # fmt: skip
def test_the_refusal_says_what_would_fit_now_and_after_how_many_jobs_end(
    queued: int, adds: int, jobs: int, said: str
) -> None:
    limit = SubmitLimit(rule="MaxSubmitPU", holder="QoS normal (per user)", limit=5, queued=queued)
    refused = submit_limit_refusal([(limit, adds)], jobs)
    assert refused is not None and refused.message == (
        "QoS normal (per user) allows at most 5 jobs queued or running (MaxSubmitPU, each "
        f"array task counting one): {said}"
    )


# --- the executor, with the double as Slurm -----------------------------------------------------

OPEN: dict[str, Any] = {
    "max_concurrent_jobs": 1000,
    "approval": {"core_hours": 1000, "gpu_hours": 8, "nodes": 4},
    "budgets": {"submissions_per_hour": 100, "max_failures_in_a_row": 5},
}


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    return AgentHarness.build(tmp_path, OPEN)


def stepped_request(tasks: int) -> JobRequest:
    """An array of tasks indices two apart: not one range, so the feeder cannot split it
    (agent/runtime/workflows/feeding/), and a submit limit refuses it whole."""
    spec = f"0-{2 * (tasks - 1)}:2" if tasks > 1 else "0"
    return JobRequest(template="command", params={"command": "true"}, array=spec)


def array_request(root: Path, tasks: int, **kw: Any) -> JobRequest:
    """A file_array over tasks files in root, the executor's working directory: named
    relative to it, so the list stays short whatever the temporary directory's path."""
    files = []
    for i in range(tasks):
        (root / f"in{i}.txt").write_text("x")
        files.append(f"in{i}.txt")
    params = {"files": ",".join(files), "program": "gzip"}
    return JobRequest(template="file_array", params=params, **kw)


def command_plan(jobs: int) -> Plan:
    steps: dict[str, Any] = {"s0": {"template": "command", "params": {"command": "echo 0"}}}
    for i in range(1, jobs):
        params = {"command": f"echo {i}"}
        steps[f"s{i}"] = {"template": "command", "params": params, "after_ok": [f"s{i - 1}"]}
    return Plan.model_validate({"name": "chain", "steps": steps})


def test_an_array_over_the_qos_limit_is_refused_with_nothing_submitted(
    h: AgentHarness, tmp_path: Path
) -> None:
    h.slurm.submit_limit = {"normal": 5}
    first = h.executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 2)))
    assert first.summary["submitted"]
    session = h.store.create()
    with pytest.raises(PolicyError) as refused:
        h.executor.run(session, st.Submit(job=stepped_request(4)))
    assert str(refused.value).startswith(
        "refused by policy (submit limit): QoS normal (per user) allows at most 5 jobs queued "
        "or running (MaxSubmitPU, each array task counting one): you have 2 and this "
        "submission adds 4"
    )
    assert h.slurm.count("submit") == 1
    assert h.ledger.all()[0].job_id == first.summary["job_id"]
    # one range: a workload, recorded now and fed once its 4 tasks fit (feeding/)
    fed = h.executor.run(session, st.Submit(job=array_request(tmp_path, 4)))
    assert (fed.summary["workload_tasks"], fed.summary["fed_parts"]) == (4, 0)
    assert h.slurm.count("submit") == 1


def test_an_array_that_fits_is_submitted_and_a_single_job_is_never_asked_about(
    h: AgentHarness, tmp_path: Path
) -> None:
    h.slurm.submit_limit = {"normal": 5}
    session = h.store.create()
    h.executor.run(session, st.Submit(job=array_request(tmp_path, 5)))
    assert h.slurm.count("submit") == 1 and h.slurm.count("submit_limits") == 1
    ((user, _),) = [args for name, args in h.slurm.calls if name == "submit_limits"]
    assert user == getpass.getuser()  # the limits of the user who submits
    # over the limit now, but a single job costs no question: Slurm refuses it whole itself
    plain = JobRequest(template="command", params={"command": "true"})
    h.executor.run(session, st.Submit(job=plain))
    assert h.slurm.count("submit") == 2 and h.slurm.count("submit_limits") == 1


def test_without_a_limit_nothing_is_refused(h: AgentHarness, tmp_path: Path) -> None:
    result = h.executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 50)))
    assert result.summary["array_tasks"] == 50 and h.slurm.count("submit") == 1
    assert h.slurm.count("submit_limits") == 1


def test_a_limit_on_another_qos_does_not_count(h: AgentHarness, tmp_path: Path) -> None:
    h.slurm.submit_limit = {"tiny": 1}
    h.executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 8)))
    assert h.slurm.count("submit") == 1


def test_a_plan_is_judged_with_all_its_jobs_tasks_and_refused_before_any_is_submitted(
    h: AgentHarness,
) -> None:
    h.slurm.submit_limit = {"normal": 3}
    session = h.store.create()
    with pytest.raises(PolicyError, match=r"plan chain: .*you have 0 and the plan's 4 jobs add 4"):
        h.executor.run(session, st.RunPlan(plan=command_plan(4)))
    assert h.slurm.count("submit") == 0
    ran = h.executor.run(session, st.RunPlan(plan=command_plan(3)))
    assert len(ran.summary["jobs"]) == 3 and h.slurm.count("submit") == 3
    # the whole plan asked Slurm once (one look at the queue), not once per job
    assert h.slurm.count("submit_limits") == 2


def test_a_canary_array_is_refused_whole_before_its_canary_is_submitted(
    h: AgentHarness, tmp_path: Path
) -> None:
    canary = {**OPEN, "canary": {"above_tasks": 3, "tasks": 1}}
    executor = h.with_policy(canary)
    h.slurm.submit_limit = {"normal": 5}
    with pytest.raises(PolicyError, match="this submission adds 6"):
        executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 6)))
    assert h.slurm.count("submit") == 0
    executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 5)))
    assert h.slurm.count("submit") == 2  # the canary, then the rest after it


def test_an_array_of_two_tasks_is_judged_against_the_limit(h: AgentHarness, tmp_path: Path) -> None:
    h.slurm.submit_limit = {"normal": 1}
    with pytest.raises(PolicyError, match="this submission adds 2"):
        h.executor.run(h.store.create(), st.Submit(job=stepped_request(2)))
    assert h.slurm.count("submit") == 0


class _TwoLimits(SchedulerDouble):
    """A job under its QoS's limit (10, none queued) and its association's (5, 2 queued)."""

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        self._call("submit_limits", user, options)
        qos = SubmitLimit(rule="MaxSubmitPU", holder="QoS normal (per user)", limit=10, queued=0)
        assoc = SubmitLimit(rule="MaxSubmitJobs", holder="association alice/lab", limit=5, queued=2)
        return SubmitLimits(qos="normal", account="lab", limits=(qos, assoc))


def test_a_job_under_two_limits_adds_its_tasks_to_each_once(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, OPEN, slurm=_TwoLimits())
    h.executor.run(h.store.create(), st.Submit(job=array_request(tmp_path, 3)))  # 2 + 3 = 5
    with pytest.raises(PolicyError, match=r"association alice/lab allows at most 5 .* adds 4"):
        h.executor.run(h.store.create(), st.Submit(job=stepped_request(4)))
    assert h.slurm.count("submit") == 1


def test_what_policy_refuses_costs_no_question_about_the_queued_jobs_limit(
    h: AgentHarness, tmp_path: Path
) -> None:
    h.slurm.submit_limit = {"normal": 1}  # the array would pass it too
    closed = h.with_policy({**OPEN, "budgets": {"submissions_per_hour": 0}})
    with pytest.raises(PolicyError, match=r"^refused by policy \(submissions per hour\)"):
        closed.run(h.store.create(), st.Submit(job=array_request(tmp_path, 3)))
    assert h.slurm.count("submit_limits") == 0

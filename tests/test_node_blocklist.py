"""The user's node blocklist without Slurm (issue 27, item 3): hostlists expanded,
failures attributed to nodes, the threshold, window, expiry and clearing, the merge with
the user's --exclude, the site's ceiling on it, and the watcher's part against
SchedulerDouble (the lab test, tests/test_node_blocklist_lab.py, fails a node for real).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scheduler_double import AgentHarness, HarnessParts

from jobsmith.adapters.hostlist import expand_hostlist
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.blocklist.attribution import (
    NodeFailure,
    node_failures,
    same_exit_failures,
)
from jobsmith.agent.runtime.blocklist.exclude import with_blocked
from jobsmith.agent.runtime.blocklist.store import BlocklistDocument, NodeBlocklist
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission import steps as steps
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.watcher.nodes import watch_nodes
from jobsmith.errors import ConfigError
from jobsmith.site_config import load_site
from jobsmith.site_config.model import Blocklist

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

# --------------------------------------------------------------------------- hostlists


def test_hostlists_expand_as_slurm_prints_them() -> None:
    assert expand_hostlist("n[1-3]") == ("n1", "n2", "n3")
    assert expand_hostlist("n[01-03,7],gpu7") == ("n01", "n02", "n03", "n7", "gpu7")
    assert expand_hostlist("n[08-11]") == ("n08", "n09", "n10", "n11")
    assert expand_hostlist("r[1-2]n[1-2]") == ("r1n1", "r1n2", "r2n1", "r2n2")
    assert expand_hostlist("n1,n1") == ("n1",)
    for placeholder in (None, "", "None assigned", "(null)"):
        assert expand_hostlist(placeholder) == ()


@pytest.mark.parametrize("bad", ["n[1-", "n]", "n[a]", "n,,m", "n[3-1]", "n[[1]]", "n 1"])
def test_a_malformed_hostlist_is_an_error_never_a_guess(bad: str) -> None:
    with pytest.raises(ValueError):
        expand_hostlist(bad)


_prefix = st.text("abcnode-", min_size=1, max_size=5).filter(lambda p: not p[-1].isdigit())


@given(
    groups=st.lists(
        st.tuples(_prefix, st.integers(0, 3), st.sets(st.integers(0, 400), min_size=1, max_size=8)),
        min_size=1,
        max_size=4,
    )
)
def test_a_compressed_list_expands_to_the_names_it_was_made_from(
    groups: list[tuple[str, int, set[int]]],
) -> None:
    """Any set of names under a few prefixes, written as Slurm compresses them (runs of
    numbers as ranges, zero-padded to a width), expands back to those names in order."""
    written, expected = [], []
    for prefix, width, numbers in groups:
        ordered = sorted(numbers)
        runs: list[list[int]] = []
        for n in ordered:
            if runs and n == runs[-1][-1] + 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        ranges = [f"{r[0]:0{width}d}" + (f"-{r[-1]:0{width}d}" if len(r) > 1 else "") for r in runs]
        written.append(f"{prefix}[{','.join(ranges)}]")
        expected += [f"{prefix}{n:0{width}d}" for n in ordered]
    assert expand_hostlist(",".join(written)) == tuple(dict.fromkeys(expected))


# ------------------------------------------------------------------------- attribution


def rec(job_id: str, state: JobState, nodes: str | None, **fields: Any) -> JobRecord:
    return JobRecord(
        job_id=job_id,
        job_id_raw=job_id.replace("_", "0"),
        name="work",
        state=state,
        node_list=nodes,
        start_time=fields.pop("start_time", T0),
        end_time=fields.pop("end_time", T0 + timedelta(minutes=1)),
        **fields,
    )


def test_node_fail_on_one_node_is_that_nodes_and_on_two_is_nobodys() -> None:
    found = node_failures(
        [
            rec("5_1", JobState.NODE_FAIL, "n2"),
            rec("5_2", JobState.BOOT_FAIL, "n3"),
            rec("6", JobState.NODE_FAIL, "n[1-2]"),  # which of the two failed is not said
            rec("5_3", JobState.FAILED, "n2", exit_code=1),
            rec("5_4", JobState.OUT_OF_MEMORY, "n2"),
            rec("5_5", JobState.TIMEOUT, "n2"),
            rec("5_6", JobState.PREEMPTED, "n2"),
        ],
        T0,
    )
    assert [(f.node, f.job_id, f.kind) for f in found] == [
        ("n2", "5_1", "node_fail"),
        ("n3", "5_2", "node_fail"),
    ]


def test_the_same_exit_on_one_node_only_while_the_work_completes_elsewhere() -> None:
    array = [
        rec("7_0", JobState.FAILED, "n2", exit_code=3),
        rec("7_1", JobState.FAILED, "n2", exit_code=3),
        rec("7_2", JobState.COMPLETED, "n1", exit_code=0),
        rec("7_3", JobState.COMPLETED, "n3", exit_code=0),
    ]
    found = same_exit_failures({"work": array}, T0)
    assert [(f.node, f.job_id, f.kind) for f in found] == [
        ("n2", "7_0", "same_exit"),
        ("n2", "7_1", "same_exit"),
    ]
    assert "exited 3 here, completed on n1, n3" in found[0].why
    # the same exit on another node too: the script's fault, not a node's
    also_n1 = [*array, rec("7_4", JobState.FAILED, "n1", exit_code=3)]
    assert same_exit_failures({"work": also_n1}, T0) == []
    # nothing completed elsewhere: no evidence against the node
    only_n2 = [array[0], array[1], rec("7_5", JobState.COMPLETED, "n2", exit_code=0)]
    assert same_exit_failures({"work": only_n2}, T0) == []
    # other templates' successes say nothing about this one
    assert same_exit_failures({"work": array[:2], "other": array[2:]}, T0) == []


# ------------------------------------------------------------------ threshold, window


def failure(node: str, task: str, at: datetime) -> NodeFailure:
    return NodeFailure(
        node=node,
        job_id=task,
        job_id_raw=task,
        kind="node_fail",
        why=f"NODE_FAIL of {task}",
        at=at,
        run="",
    )


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def blocklist(tmp_path: Path, clock: Clock, **settings: Any) -> NodeBlocklist:
    return NodeBlocklist(tmp_path / "bl.jsonl", Blocklist(**settings), clock)


def test_n_failures_within_the_window_block_a_node_until_it_expires(tmp_path: Path) -> None:
    clock = Clock()
    bl = blocklist(tmp_path, clock, failures=2, window=600, expires_after=3600)
    assert bl.note([failure("n2", "1", T0)]) and bl.blocked() == ()
    # a second failure 11 minutes later: outside the 10-minute window
    bl.note([failure("n2", "2", T0 + timedelta(minutes=11))])
    assert bl.blocked() == ()
    bl.note([failure("n2", "3", T0 + timedelta(minutes=15))])
    (entry,) = bl.entries()
    assert entry.node == "n2" and entry.since == T0 + timedelta(minutes=15)
    assert [f.job_id for f in entry.failures] == ["2", "3"]
    assert entry.expires == T0 + timedelta(minutes=75)
    clock.now = T0 + timedelta(minutes=74)
    assert bl.blocked() == ("n2",)
    clock.now = T0 + timedelta(minutes=75, seconds=1)
    assert bl.blocked() == ()  # expired


def test_the_same_failure_seen_twice_counts_once(tmp_path: Path) -> None:
    bl = blocklist(tmp_path, Clock(), failures=2)
    once = failure("n2", "1", T0)
    assert bl.note([once, once]) == [once]
    assert bl.note([once]) == []
    assert bl.blocked() == ()


def test_clearing_forgets_the_failures_before_it(tmp_path: Path) -> None:
    clock = Clock()
    bl = blocklist(tmp_path, clock, failures=2)
    bl.note([failure("n2", "1", T0), failure("n2", "2", T0), failure("n3", "3", T0)])
    bl.note([failure("n3", "4", T0)])
    assert bl.blocked() == ("n2", "n3")
    clock.now = T0 + timedelta(minutes=1)
    assert bl.clear("n2") == ["n2"]
    assert bl.blocked() == ("n3",)
    bl.note([failure("n2", "5", clock.now + timedelta(seconds=1))])  # one new: not enough
    assert bl.blocked() == ("n3",)
    assert bl.clear() == ["n3"] and bl.blocked() == ()


def test_a_blocklist_turned_off_keeps_and_blocks_nothing(tmp_path: Path) -> None:
    bl = NodeBlocklist(tmp_path / "bl.jsonl", None)
    assert bl.note([failure("n2", "1", T0), failure("n2", "2", T0)]) == []
    assert bl.blocked() == () and not (tmp_path / "bl.jsonl").exists()
    doc = BlocklistDocument.of("lab", bl)
    assert not doc.on and doc.nodes == ()


def test_a_torn_or_foreign_line_is_skipped(tmp_path: Path) -> None:
    bl = blocklist(tmp_path, Clock(), failures=1)
    (tmp_path / "bl.jsonl").write_text('{"fact": "failure", "node": 3}\n{"kin')
    bl.note([failure("n2", "1", T0)])
    assert bl.blocked() == ("n2",)


# ---------------------------------------------------------------------------- --exclude


def test_blocked_nodes_join_the_users_exclude_and_never_a_node_asked_for() -> None:
    assert with_blocked(None, []) is None
    assert with_blocked(None, ["n2"]) == "n2"
    assert with_blocked("n[1-3]", ["n2", "n4"]) == "n[1-3],n4"
    assert with_blocked("n7", ["n2", "n2"]) == "n7,n2"
    assert with_blocked(None, ["n2", "n3"], nodelist="n[2-2]") == "n3"


def test_submissions_and_reruns_exclude_the_blocked_nodes(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path)
    executor = replace(h.executor, blocked_nodes=lambda: ("n2",))
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "make"}, exclude="n7")
    done = executor.run(session, steps.Submit(job=job))
    job_id = str(done.summary["job_id"])
    assert h.slurm.options[job_id].exclude == "n7,n2"
    assert "#SBATCH --exclude=n7,n2" in h.slurm.scripts[job_id]
    h.slurm.set_state(job_id, JobState.FAILED, exit_code=1)
    rerun = executor.run(session, steps.Rerun(job_id=job_id, failed_only=False))
    assert h.slurm.options[str(rerun.summary["job_id"])].exclude == "n7,n2"
    plain = h.executor.run(
        session, steps.Submit(job=JobRequest(template="command", params={"command": "make"}))
    )
    assert h.slurm.options[str(plain.summary["job_id"])].exclude is None


# ------------------------------------------------------------------------ the ceiling


def _site(tmp_path: Path, centre_policy: str, user_policy: str) -> Any:
    base = (
        "cluster: lab\npartitions:\n  debug:\n    default: true\n"
        "paths:\n  scratch: /tmp\n  allowed_roots: [/tmp]\n"
    )
    centre = tmp_path / "centre.yaml"
    centre.write_text(base + centre_policy)
    user = tmp_path / "user.yaml"
    user.write_text(user_policy)
    env = {"USER": "alice", "HOME": "/home/alice"}
    return load_site(None, environ=env, system_file=centre, user_file=user)


def test_a_user_may_blocklist_sooner_and_longer_never_less(tmp_path: Path) -> None:
    centre = "policy:\n  blocklist:\n    failures: 3\n    window: 60\n    expires_after: 120\n"
    tighter = "policy:\n  blocklist:\n    failures: 2\n    window: 90\n    expires_after: 600\n"
    settings = _site(tmp_path, centre, tighter).config.policy.blocklist
    assert settings == Blocklist(failures=2, window=5400, expires_after=36000)
    for looser, field in (
        ("failures: 4", "failures"),
        ("window: 30", "window"),
        ("expires_after: 60", "expires_after"),
    ):
        with pytest.raises(ConfigError, match=rf"policy\.blocklist\.{field}: .*centre"):
            _site(tmp_path, centre, f"policy:\n  blocklist:\n    {looser}\n")
    with pytest.raises(ConfigError, match=r"policy\.blocklist: off \(null\) turns off"):
        _site(tmp_path, centre, "policy:\n  blocklist: null\n")


def test_a_blocklist_the_centre_turned_off_stays_off(tmp_path: Path) -> None:
    off = "policy:\n  blocklist: null\n"
    assert _site(tmp_path, off, "").config.policy.blocklist is None
    with pytest.raises(ConfigError, match=r"policy\.blocklist: on, where the centre"):
        _site(tmp_path, off, "policy:\n  blocklist:\n    failures: 5\n")


# ------------------------------------------------------------ the watcher, requeued jobs


class NodeParts(HarnessParts):
    def __init__(self, h: AgentHarness, bl: NodeBlocklist) -> None:
        super().__init__(h)
        self.bl = bl

    @property
    def blocklist(self) -> NodeBlocklist:
        return self.bl


def test_requeued_tasks_get_the_blocked_node_excluded_once_with_slurm_double(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path)
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "make"}, exclude="n9")
    array_id = str(h.executor.run(session, steps.Submit(job=job)).summary["job_id"])
    submitted = h.clock.now
    requeued_at = submitted + timedelta(minutes=1)
    # tasks 1 and 2 ran on n2, which failed: Slurm requeued them (pending, submitted anew)
    h.slurm.set_tasks(
        array_id,
        {0: JobState.RUNNING, 1: JobState.PENDING, 2: JobState.PENDING},
        JobState.RUNNING,
        submit_time=requeued_at,
    )
    h.slurm.jobs[array_id] = h.slurm.jobs[array_id].model_copy(
        update={
            "tasks": (
                h.slurm.jobs[array_id]
                .tasks[0]
                .model_copy(update={"submit_time": submitted, "node_list": "n1"}),
                *h.slurm.jobs[array_id].tasks[1:],
            )
        }
    )
    h.slurm.earlier_runs = [
        h.slurm.record(
            f"{array_id}_{i}",
            JobState.NODE_FAIL,
            array_job_id=array_id,
            array_task_id=i,
            node_list="n2",
            submit_time=submitted,
            start_time=submitted,
            end_time=requeued_at,
        )
        for i in (1, 2)
    ]
    bl = NodeBlocklist(tmp_path / "bl.jsonl", Blocklist(), h.clock)
    parts = NodeParts(h, bl)

    def poll() -> Any:
        return watch_nodes(parts, h.slurm.status([array_id], submitted), now=h.clock)

    watched = poll()
    assert watched.blocked == ["n2"]
    assert sorted(watched.failures) == [
        f"n2: NODE_FAIL of {array_id}_1",
        f"n2: NODE_FAIL of {array_id}_2",
    ]
    calls = [args for c, args in h.slurm.calls if c == "exclude_nodes"]
    assert calls == [(f"{array_id}_1", "n9,n2"), (f"{array_id}_2", "n9,n2")]
    events = h.store.read(session)
    (intent,) = [e for e in events if e.kind is EventKind.INTENT and "exclude_nodes" in str(e.data)]
    (result,) = [e for e in events if e.kind is EventKind.RESULT and e.step_id == intent.step_id]
    assert intent.seq < result.seq and result.data["outcome"] == "done"
    # the next cycle neither asks accounting again nor updates the jobs again
    h.slurm.calls.clear()
    again = poll()
    assert again.failures == [] and again.excluded == [] and again.blocked == ["n2"]
    assert h.slurm.count("runs") == 0 and h.slurm.count("exclude_nodes") == 0


def test_a_job_never_requeued_costs_no_extra_query_with_slurm_double(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path)
    job = JobRequest(template="command", params={"command": "make"})
    job_id = str(h.executor.run(h.store.create(), steps.Submit(job=job)).summary["job_id"])
    h.slurm.set_state(job_id, JobState.NODE_FAIL, node_list="n3", submit_time=h.clock.now)
    bl = NodeBlocklist(tmp_path / "bl.jsonl", Blocklist(failures=1), h.clock)
    watched = watch_nodes(NodeParts(h, bl), h.slurm.status([job_id], h.clock.now), now=h.clock)
    assert watched.blocked == ["n3"] and watched.excluded == []
    assert h.slurm.count("runs") == 0


def test_the_argv_for_earlier_runs_and_excluded_nodes() -> None:
    runs = argv.sacct_runs(["7"], T0.replace(tzinfo=None), ["JobID", "State"])
    assert runs[:3] == ["sacct", "-D", "-X"] and runs[-2:] == ["7", "--format=JobID,State"]
    assert argv.scontrol_update_excluded("7_2", "n2,n7") == [
        "scontrol",
        "update",
        "JobId=7_2",
        "ExcNodeList=n2,n7",
    ]


# ------------------------------------------------------------------ status and report


def test_status_and_the_report_say_what_the_blocklist_did(tmp_path: Path) -> None:
    from jobsmith.agent.views.nodes import blocklist_line
    from jobsmith.agent.views.report import build_report

    clock = Clock()
    bl = blocklist(tmp_path, clock, failures=2)
    assert blocklist_line(bl.entries()) is None
    bl.note([failure("n2", "7_1", T0), failure("n2", "7_2", T0), failure("n3", "8", T0)])
    line = blocklist_line(bl.entries())
    assert line is not None and line.startswith("left out of your jobs")
    assert "n2 (2 failures, until" in line
    h = AgentHarness.build(tmp_path)
    session = h.store.create()
    job = JobRequest(template="command", params={"command": "make"})
    job_id = str(h.executor.run(session, steps.Submit(job=job)).summary["job_id"])
    kept = steps.ExcludeNodes(job_ids=[f"{job_id}_1"], nodes="n2")
    h.executor.run(session, kept)
    bl.note([failure("n2", f"{job_id}_1", T0), failure("n2", f"{job_id}_2", T0)])
    info = h.store.info(session)
    notes = build_report(info, h.store.read(session), {}, [], T0, None, bl.entries()).notes
    mine = [n for n in notes if "n2" in n]
    assert len(mine) == 2, notes
    assert mine[0].startswith("node n2 is on your blocklist until")
    assert f"{job_id}_1" in mine[0] and "7_1" not in mine[0]  # only this session's tasks
    assert mine[1] == (
        f"Slurm requeued {job_id}_1 after a node failure; jobsmith kept them off n2 "
        "(ExcNodeList) instead of submitting them again"
    )

"""Canary arrays (issue 10): with `policy.canary` set, an array above its size runs its
first tasks as a job of their own, and the rest waits for them through Slurm's afterok,
judged and approved as one (and without Slurm, the double: a checked array and a tainted
conversation's take the same path). On the lab cluster: a good array runs whole, the rest
visibly waiting for the canary; a broken command fails in the canary, the watcher's
decision cancels the rest, so two tasks ran, not twelve. And the array helpers (pure).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js
from scheduler_double import AgentHarness

from jobsmith.adapters.options import array_head
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission import orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.approval.approvals import ApprovalNeeded
from jobsmith.agent.runtime.submission.judging.judge import Origin, Who
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.site_config.model import Canary

lab = pytest.mark.usefixtures("lab_cluster")
CANARY = "policy:\n  canary: {above_tasks: 5, tasks: 2}\n"


def test_an_array_spec_is_split_into_its_first_tasks_and_the_rest() -> None:
    assert array_head("0-4:2,7,9-10", 4) == ("0-4:2,7", "9-10")
    assert array_head("0-9:2,20", 2) == ("0-2:2", "4-8:2,20")
    assert array_head("0-999", 2) == ("0-1", "2-999")
    assert array_head("0-999999999", 1) == ("0", "1-999999999")  # nothing is listed
    assert array_head("3,5", 1) == ("3", "5") and array_head("3", 1) == ("3", "")
    with pytest.raises(ValueError, match=r"canary.tasks must be below canary.above_tasks"):
        Canary.model_validate({"above_tasks": 2, "tasks": 2})


def files(workdir: Path, n: int) -> str:
    for i in range(n):
        (workdir / f"f{i}.txt").write_text(f"{i}\n")
    return ",".join(f"f{i}.txt" for i in range(n))


def submit_array(workdir: Path, program: str, n: int = 12) -> dict[str, object]:
    out = js(
        "submit", "file_array", "-P", f"files={files(workdir, n)}", "-P", f"program={program}",
        "--log-dir", str(workdir / "logs"), "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return dict(json.loads(out.stdout))


@lab
def test_a_good_array_runs_its_canary_first_then_the_rest_after_it(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site(CANARY)
    doc = submit_array(workdir, "cat")
    rest, canary = str(doc["job_id"]), str(doc["canary_job_id"])
    assert (doc["array_tasks"], doc["canary_tasks"]) == (10, 2)
    shown = subprocess.run(
        ["scontrol", "show", "job", rest], capture_output=True, text=True, check=True
    ).stdout
    assert f"Dependency=afterok:{canary}" in shown or "Dependency=(null)" in shown  # ran already
    assert js("wait", canary, rest, "--timeout", "180").exit_code == 0
    statuses = json.loads(js("status", canary, rest, "--json").stdout)["jobs"]
    assert [s["task_counts"] for s in statuses] == [{"COMPLETED": 2}, {"COMPLETED": 10}]
    outs = sorted((workdir / "logs").glob("file_array_*.out"))
    assert len(outs) == 12


@lab
def test_a_broken_command_fails_in_the_canary_and_the_rest_never_runs(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site(CANARY)
    doc = submit_array(workdir, "false")
    rest, canary = str(doc["job_id"]), str(doc["canary_job_id"])
    decisions: list[dict[str, object]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not decisions:
        decisions += json.loads(js("watch", "--once", "--json").stdout)["decisions"]
        time.sleep(2)
    (decision,) = decisions
    assert decision["job_id"] == canary and decision["action"] == "report"
    assert decision["cancelled"] == [rest]
    waited = json.loads(js("wait", rest, "--timeout", "120", "--json").stdout)["jobs"][0]
    assert waited["state"] == "CANCELLED"
    sacct = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", rest, "-o", "JobID,State,Elapsed"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    # cancelled while pending: no task of the rest ever ran
    assert all(line.split("|")[2] == "00:00:00" for line in sacct.splitlines()), sacct
    assert len(list((workdir / "logs").glob("file_array_*.err"))) == 2  # two tasks ran


# --- without Slurm: the scheduler double (tests/scheduler_double.py) --------------------------

CANARY_POLICY = {"max_concurrent_jobs": 1000, "canary": {"above_tasks": 3, "tasks": 1}}


def array_of(h: AgentHarness, tasks: int) -> JobRequest:
    names = []
    for i in range(tasks):
        (h.root / f"in{i}.txt").write_text("x")
        names.append(f"in{i}.txt")
    return JobRequest(template="file_array", params={"files": ",".join(names), "program": "gzip"})


def test_a_checked_array_above_the_canary_size_runs_its_canary_first(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, CANARY_POLICY)
    checked = h.executor.check(array_of(h, 5))  # MCP's check, then its submission
    step = st.Submit(job=array_of(h, 5))
    doc = h.executor.submit(h.store.create(), orders.Checked(step, checked)).summary
    assert (doc["canary_tasks"], doc["array_tasks"]) == (1, 4)
    canary, rest = doc["canary_job_id"], doc["job_id"]
    assert h.slurm.options[canary].array == "0" and h.slurm.options[rest].array == "1-4"
    assert [c for c, _ in h.slurm.calls if c == "submit"] == ["submit", "submit"]


def test_a_canary_array_asked_by_a_conversation_that_read_job_text_waits_whole(
    tmp_path: Path,
) -> None:
    h = AgentHarness.build(tmp_path, CANARY_POLICY)
    session = h.store.create()
    tainted = Origin(who=Who.MODEL, read="the log of job 12")
    with pytest.raises(ApprovalNeeded, match="the log of job 12"):
        h.executor.run(session, st.Submit(job=array_of(h, 5)), origin=tainted)
    assert h.slurm.count("submit") == 0
    (asked,) = [e for e in h.store.read(session) if e.kind is EventKind.APPROVAL_ASKED]
    assert asked.data["plan"] == "canary-file_array"  # the canary and the rest, as one


def test_an_array_of_exactly_the_canary_size_is_submitted_whole(tmp_path: Path) -> None:
    h = AgentHarness.build(tmp_path, CANARY_POLICY)  # above 3 tasks: a canary first
    doc = h.executor.run(h.store.create(), st.Submit(job=array_of(h, 3))).summary
    assert doc["array_tasks"] == 3 and "canary_job_id" not in doc
    assert h.slurm.count("submit") == 1

"""The feeder on the lab cluster (issue 28, item 1): with QoS `tiny`, whose
MaxSubmitJobsPerUser is 5 (`scripts/slurm-lab up` makes it), a 40-task array completes
with one approval, fed in parts of 5 by the watcher, never more than 5 queued at once.
Runs as alice (`asalice-wt WORKTREE tests/test_feeder_lab.py`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js, most_queued_in_tiny, queued_in_tiny

from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore

#: alone: it holds QoS tiny's whole per-user limit for two minutes, which
#: tests/test_submit_limits_lab.py needs empty (and whose jobs would take room from this one)
pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.alone]

#: QoS tiny allowed, and an approval above 10 core-hours: the 40 one-hour tasks need one
SITE = (
    "qos:\n  allowed: [normal, tiny]\n  default: normal\npolicy:\n  approval:\n    core_hours: 10\n"
)


def test_a_40_task_array_over_maxsubmit_5_is_fed_in_parts_with_one_approval(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site(SITE)
    assert queued_in_tiny() == [], "another run left jobs in QoS tiny"
    files = []
    for i in range(40):
        (workdir / f"in{i}.txt").write_text(f"{i}\n")
        files.append(str(workdir / f"in{i}.txt"))
    held = js(
        "submit", "file_array", "-P", f"files={','.join(files)}", "-P", "program=gzip",
        "--qos", "tiny", "--log-dir", str(workdir),
    )  # fmt: skip
    assert held.exit_code == 8, held.output
    assert "a workload of 40 tasks in 8 parts" in held.stderr
    assert queued_in_tiny() == []  # nothing reached Slurm before the approval
    step_id = re.search(r"jobsmith approve (\S+)`", held.stderr).group(1)  # type: ignore[union-attr]

    with most_queued_in_tiny() as peak:
        approved = js("approve", step_id)
        assert approved.exit_code == 0, approved.output
        # the watcher feeds the first half (each cycle: the parts that ended make room) ...
        deadline = time.monotonic() + 300
        while len(list(workdir.glob("in*.txt.gz"))) < 20 and time.monotonic() < deadline:
            assert js("watch", "--once").exit_code == 0
            time.sleep(1)
        # ... then `wait`, on the newest part, feeds the rest and waits for all of it
        last = max(int(j) for j in _part_jobs(jobsmith_home, step_id))
        waited = js("wait", str(last), "--timeout", "300")
        assert waited.exit_code == 0, waited.output
    left = sorted(p.name for p in workdir.glob("in*.txt"))
    assert left == [], f"tasks not run: {left}"
    # gzip fails on a file already gzipped away: every task ran its own file, once
    assert sorted(p.name for p in workdir.glob("in*.txt.gz")) == sorted(
        f"in{i}.txt.gz" for i in range(40)
    )
    assert 0 < peak.most <= 5, peak

    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    [session] = [
        s for s in store.list_sessions() if any(e.step_id == step_id for e in store.read(s.id))
    ]
    events = store.read(session.id)
    assert [e.kind for e in events].count(EventKind.APPROVAL_GIVEN) == 1
    parts = [e for e in events if e.kind is EventKind.RESULT and ".p" in (e.step_id or "")]
    assert sorted(e.step_id for e in parts) == sorted(f"{step_id}.p{i}" for i in range(8))
    assert all(e.data["array_tasks"] == 5 for e in parts)
    # one workload in `status`, whichever part is asked about
    shown = js("status", str(parts[-1].data["job_id"]))
    assert f"workload {step_id}: 40 tasks: 40 done, 0 running, 0 not yet submitted" in shown.stdout
    report = js("report", session.id, "-o", str(workdir / "report.html"))
    assert f"workload {step_id}: 40 tasks: 40 done, 0 running, 0 not yet submitted" in report.stdout
    [fed] = json.loads(js("status", "--json", str(parts[0].data["job_id"])).stdout)["workloads"]
    assert (fed["step_id"], fed["tasks"], fed["done"], fed["not_submitted"]) == (step_id, 40, 40, 0)


def _part_jobs(home: Path, step_id: str) -> list[str]:
    """The job ids of the workload's parts submitted so far."""
    store = FileSessionStore(home / "state" / "sessions")
    return [
        str(e.data["job_id"])
        for s in store.list_sessions()
        for e in store.read(s.id)
        if e.kind is EventKind.RESULT and (e.step_id or "").startswith(f"{step_id}.p")
    ]

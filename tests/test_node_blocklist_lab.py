"""A node failed for real under an array (issue 27, item 3), on the lab switched to three
nodes: the tasks it killed end on the other nodes, and the node is on the blocklist.

Six one-CPU tasks fill the three nodes (two CPUs each). `fail-node n2` kills n2's slurmd,
its slurmstepds and both its tasks; slurmctld sets n2 DOWN 20-40 s later, and Slurm
requeues both tasks itself (JobRequeue=1), pending for about two minutes (BeginTime).
The watcher, run cycle by cycle as cron would, sees them submitted again, reads their
earlier runs (NODE_FAIL on n2), puts n2 on the blocklist (two failures: the default
threshold), and sets ExcNodeList=n2 on both pending tasks, so they run on n1 or n3 even
though n2 is back by then. A requeued task does not sleep again, to keep this short.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from lab_cli import js

pytestmark = pytest.mark.usefixtures("multinode_lab", "user_site")

_FAIL_NODE = ["sudo", "-n", "/usr/local/sbin/jobsmith-slurm-lab", "fail-node", "n2", "10"]


def _squeue(array_id: str) -> list[tuple[str, str, str]]:
    """(task id, state, node) of the array's tasks the controller holds."""
    out = subprocess.run(
        ["squeue", "-h", "-r", "-j", array_id, "-o", "%i|%T|%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line]  # type: ignore[misc]


def _excluded_by_slurm(task: str) -> str:
    """The ExcNodeList the controller holds for a job or array task."""
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", task], capture_output=True, text=True, check=True
    ).stdout
    return next(w for w in out.split() if w.startswith("ExcNodeList=")).partition("=")[2]


def test_a_failed_node_goes_on_the_blocklist_and_its_requeued_tasks_run_elsewhere(
    workdir: Path,
) -> None:
    (workdir / "six.sh").write_text(
        "#!/bin/bash\n#SBATCH -a 0-5\n#SBATCH -c 1\n#SBATCH --mem=100M\n#SBATCH -t 10\n"
        "#SBATCH -o six-%A_%a.out\n"
        'echo "$SLURMD_NODENAME"\n'
        '[ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] || sleep 60\n'
    )
    submitted = js("sbatch", "six.sh")
    assert submitted.exit_code == 0, submitted.output
    array_id = submitted.stdout.strip()
    deadline = time.monotonic() + 120  # an earlier test's jobs may still be ending
    while len([t for t in _squeue(array_id) if t[1] == "RUNNING"]) < 6:
        assert time.monotonic() < deadline, _squeue(array_id)
        time.sleep(1)
    on_n2 = sorted(t[0] for t in _squeue(array_id) if t[2] == "n2")
    assert len(on_n2) == 2, _squeue(array_id)  # two CPUs a node, one CPU a task
    assert json.loads(js("watch", "--once", "--json").stdout)["scheduler_ok"]
    failing = subprocess.Popen(_FAIL_NODE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    excluded: list[dict[str, object]] = []
    set_on: dict[str, str] = {}  # task -> the controller's ExcNodeList right after the step
    states: list[str] = []
    decisions: list[object] = []
    deadline = time.monotonic() + 330
    while "COMPLETED" not in states:
        assert time.monotonic() < deadline, (states, excluded, _squeue(array_id))
        cycle = json.loads(js("watch", "--once", "--json").stdout)
        now_excluded = (cycle.get("nodes") or {}).get("excluded", [])
        for task in (str(t) for e in now_excluded for t in e["tasks"]):
            set_on[task] = _excluded_by_slurm(task)
        excluded += now_excluded
        states += [c["state"] for c in cycle["changes"] if c["job_id"] == array_id]
        decisions += cycle["decisions"]
        time.sleep(3)
    assert failing.wait(timeout=120) == 0, failing.stdout.read() if failing.stdout else ""
    # Slurm requeued both tasks; the watcher kept them off n2 instead of submitting again
    assert decisions == []  # a requeued task is no failure: the brain decided nothing
    assert [(e["nodes"], e["error"]) for e in excluded] == [("n2", None)], excluded
    assert set_on == dict.fromkeys(on_n2, "n2"), set_on  # as scontrol shows the pending task
    assert sorted(str(t) for e in excluded for t in e["tasks"]) == on_n2, excluded  # type: ignore[attr-defined]
    for task in on_n2:
        lines = (workdir / f"six-{task}.out").read_text().split()
        assert lines and lines[-1] in ("n1", "n3"), (task, lines)  # its last run's node
    listed = json.loads(js("nodes", "--json").stdout)
    (entry,) = listed["nodes"]
    assert entry["node"] == "n2"
    assert sorted(f["job_id"] for f in entry["failures"]) == on_n2
    assert {f["kind"] for f in entry["failures"]} == {"node_fail"}
    assert "left out of your jobs (your node blocklist): n2 (2 failures" in js("status").stdout
    session = json.loads(js("status", array_id, "--json").stdout)["jobs"][0]["session_id"]
    report = js("report", session, "--json", "-o", str(workdir / "run.html"))
    notes = json.loads(report.stdout)["notes"]
    assert any(n.startswith("node n2 is on your blocklist") for n in notes), notes
    assert any("jobsmith kept them off n2 (ExcNodeList)" in n for n in notes), notes
    # a new submission leaves n2 out by itself, until the node is cleared
    rendered = json.loads(js("render", "command", "-P", "command=hostname", "--json").stdout)
    assert rendered["options"]["exclude"] == "n2"
    cleared = json.loads(js("nodes", "clear", "n2", "--json").stdout)
    assert cleared["cleared"] == ["n2"] and cleared["nodes"] == []
    rendered = json.loads(js("render", "command", "-P", "command=hostname", "--json").stdout)
    assert "exclude" not in rendered["options"]

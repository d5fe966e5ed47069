"""`jobsmith sbatch SCRIPT` on the lab cluster (issue 25, item 1): three batch scripts as
a login-node user writes them, through the real sbatch, squeue and sacct.

- one runs out of memory, and the rule brain (`watch --once`) reruns it with more, its
  logs where `-o logs/%x-%j.out` put them under the name the user gave;
- an array with `%2`: Slurm holds the throttle, every task's output lands in sbatch's
  default `slurm-%A_%a.out`;
- one waits on another with `--dependency` given on the command line, with arguments.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from lab_cli import Watched, js, watch_until

pytestmark = pytest.mark.usefixtures("lab_cluster", "user_site")


def _scontrol(job_id: str) -> str:
    return subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout


def _sbatch(*args: str) -> str:
    result = js("sbatch", *args)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_a_script_out_of_memory_is_rerun_with_more_by_the_rule_brain(workdir: Path) -> None:
    (workdir / "hog.sh").write_text(
        "#!/bin/bash\n"
        "# holds ~300 MB for 6 s (the 2-second memory sampler must see it)\n"
        "#SBATCH --job-name=hog\n"
        "#SBATCH --mem=100M\n"
        "#SBATCH -t 5\n"
        "#SBATCH -o logs/%x-%j.out\n"
        "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(6)'\n"
        'echo "done in $SLURM_JOB_NAME"\n'
    )
    (workdir / "logs").mkdir()
    job_id = _sbatch("hog.sh")
    (decision,) = watch_until(Watched.rerun_completed, timeout_s=240).decisions
    assert decision["job_id"] == job_id and decision["action"] == "rerun"
    assert decision["verdicts"] == ["out_of_memory"]
    new_id = str(decision["new_job_id"])
    waited = json.loads(js("wait", new_id, "--json", "--timeout", "120").stdout)["jobs"][0]
    assert waited["state"] == "COMPLETED"
    assert waited["record"]["req_mem_bytes"] >= 300 << 20
    # %x is the name the user gave; inside the job, SLURM_JOB_NAME carries the tag
    assert (workdir / "logs" / f"hog-{job_id}.out").exists()
    rerun_log = (workdir / "logs" / f"hog-{new_id}.out").read_text()
    assert "done in hog.js-" in rerun_log
    diagnosis = json.loads(js("diagnose", job_id, "--json").stdout)["diagnoses"][0]
    assert diagnosis["verdict"] == "out_of_memory"
    session = json.loads(js("status", job_id, "--json").stdout)["jobs"][0]["session_id"]
    report = js("report", session, "--json", "-o", str(workdir / "run.html"))
    assert report.exit_code == 0, report.output
    assert "sbatch:hog.sh" in (workdir / "run.html").read_text()


def test_an_array_with_a_throttle_runs_under_it_with_sbatchs_default_output(
    workdir: Path,
) -> None:
    (workdir / "tasks.sh").write_text(
        "#!/bin/bash\n#SBATCH -a 0-5%2\n#SBATCH -t 5\n#SBATCH --mem=50M\n"
        'echo "task $SLURM_ARRAY_TASK_ID"\nsleep 1\n'
    )
    array_id = _sbatch("tasks.sh")
    assert "ArrayTaskThrottle=2" in _scontrol(array_id)
    waited = json.loads(js("wait", array_id, "--json", "--timeout", "180").stdout)["jobs"][0]
    assert waited["state"] == "COMPLETED"
    assert sorted(t["array_task_id"] for t in waited["tasks"]) == list(range(6))
    for task in range(6):
        out = workdir / f"slurm-{array_id}_{task}.out"
        assert out.read_text() == f"task {task}\n"


def test_a_script_waits_on_another_with_its_dependency_and_arguments(workdir: Path) -> None:
    (workdir / "first.sh").write_text(
        "#!/bin/bash\n#SBATCH -t 5\n#SBATCH --mem=50M\nsleep 4\ndate +%s > first.done\n"
    )
    (workdir / "then.sh").write_text(
        "#!/usr/bin/env bash\n#SBATCH -t 5\n#SBATCH --mem=50M\n#SBATCH -o then.out\n"
        'echo "$# args: $1|$2"\ncat first.done\n'
    )
    first = _sbatch("first.sh")
    then = _sbatch("-d", f"afterok:{first}", "then.sh", "a b", "c'd")
    assert f"Dependency=afterok:{first}" in _scontrol(then)
    waited = json.loads(js("wait", first, then, "--json", "--timeout", "180").stdout)["jobs"]
    assert [j["state"] for j in waited] == ["COMPLETED", "COMPLETED"]
    lines = (workdir / "then.out").read_text().splitlines()
    assert lines[0] == "2 args: a b|c'd"
    times = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", f"{first},{then}", "-o", "JobIDRaw,Start,End"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    rows = {row.split("|")[0]: row.split("|")[1:] for row in times}
    ended = datetime.fromisoformat(rows[first][1])
    started = datetime.fromisoformat(rows[then][0])
    assert started >= ended


def test_a_plan_step_runs_a_users_script_after_a_template_step(workdir: Path) -> None:
    (workdir / "use.sh").write_text(
        "#!/bin/bash\n#SBATCH -t 5\n#SBATCH --mem=50M\n#SBATCH -o use.out\n"
        'echo "$1: $(cat made.txt)"\n'
    )
    (workdir / "plan.yaml").write_text(
        "name: mixed\nsteps:\n"
        "  make:\n    template: command\n    params: {command: 'echo made > made.txt'}\n"
        "  use:\n    script: use.sh\n    args: [used]\n    after_ok: [make]\n"
    )
    ran = js("plan", "run", "plan.yaml")
    assert ran.exit_code == 0, ran.output
    ids = dict(line.split("\t")[::-1] for line in ran.stdout.splitlines())
    assert f"Dependency=afterok:{ids['make']}" in _scontrol(ids["use"])
    waited = json.loads(js("wait", ids["use"], "--json", "--timeout", "120").stdout)["jobs"]
    assert waited[0]["state"] == "COMPLETED"
    assert (workdir / "use.out").read_text() == "used: made\n"


def test_tasks_per_node_start_that_many_tasks_on_the_node(workdir: Path) -> None:
    """--ntasks-per-node is judged and reaches sbatch as written: two tasks on one node."""
    (workdir / "pair.sh").write_text(
        "#!/bin/bash\n#SBATCH -N 1\n#SBATCH --ntasks-per-node=2\n#SBATCH -t 5\n"
        "#SBATCH --mem=100M\n#SBATCH -o pair-%j.out\n"
        "srun bash -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS\"'\n"
    )
    job_id = _sbatch("pair.sh")
    shown = _scontrol(job_id)
    assert "NumTasks=2" in shown and "NtasksPerN:B:S:C=2:" in shown, shown
    waited = json.loads(js("wait", job_id, "--json", "--timeout", "120").stdout)["jobs"][0]
    assert waited["state"] == "COMPLETED", waited
    printed = sorted((workdir / f"pair-{job_id}.out").read_text().splitlines())
    assert printed == ["task 0 of 2", "task 1 of 2"], printed

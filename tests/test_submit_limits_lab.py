"""Slurm's limits on queued jobs on the lab cluster (issue 10): `scripts/slurm-lab up` makes
QoS `tiny` with MaxSubmitJobsPerUser=5, allowed to alice's associations. An 8-task array
in it that is not one range (so the feeder, tests/test_feeder_lab.py, cannot split it) is
refused by jobsmith's policy naming the limit, before any sbatch; a 3-task one is
submitted. Runs as alice (`/tmp/asalice tests/test_submit_limits_lab.py -q` as root)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js

lab = pytest.mark.usefixtures("lab_cluster")

TINY = "qos:\n  allowed: [normal, tiny]\n  default: normal\n"


def queued_in_tiny() -> list[str]:
    """The caller's jobs in QoS tiny, as squeue shows them (array tasks one per line)."""
    out = subprocess.run(
        ["squeue", "--me", "--noheader", "-r", "-q", "tiny", "-o", "%i"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return out.split()


def submit_array(workdir: Path, tasks: int) -> tuple[int, str, str]:
    files = []
    for i in range(tasks):
        (workdir / f"in{i}.txt").write_text("x")
        files.append(str(workdir / f"in{i}.txt"))
    out = js(
        "submit", "file_array", "-P", f"files={','.join(files)}", "-P", "program=true",
        "--qos", "tiny", "--log-dir", str(workdir),
    )  # fmt: skip
    return out.exit_code, out.stdout, out.stderr


@lab
def test_an_array_over_the_qos_submit_limit_is_refused_before_sbatch_and_one_under_it_runs(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site(TINY)
    assert queued_in_tiny() == [], "another run left jobs in QoS tiny"
    out = js(
        "submit", "command", "-a", "0-14:2", "-P", "command=true", "--qos", "tiny",
        "--log-dir", str(workdir),
    )  # fmt: skip
    code, err = out.exit_code, out.stderr
    assert code == 3, err  # 8 tasks, not one range: the feeder cannot split it (issue 28)
    assert "refused by policy (submit limit): QoS tiny (per user) allows at most 5" in err
    assert "(MaxSubmitPU, each array task counting one): you have 0" in err
    assert "this submission adds 8" in err and "--throttle does not help" in err
    assert queued_in_tiny() == []  # nothing reached Slurm

    code, out, err = submit_array(workdir, 3)
    assert code == 0, err
    job_id = out.strip()
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout
    assert "QOS=tiny" in shown
    assert js("wait", job_id, "--timeout", "120").exit_code == 0

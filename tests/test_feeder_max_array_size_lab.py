"""MaxArraySize on the lab cluster (issue 28, item 1): it caps an array's highest index,
not its count. The lab's is 10001 (`scripts/slurm-lab`), so `--array 9995-10004`, ten
tasks, is refused by sbatch itself; jobsmith reads the cap from `scontrol show config`
and feeds it as one part indexed 0-9, each task offset back to its own index.

(Several parts would need more than 10,001 tasks here: the split itself is covered with
the Slurm double in test_feeder_max_array_size.py.) Runs as alice
(`asalice-wt WORKTREE tests/test_feeder_max_array_size_lab.py`)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js

pytestmark = pytest.mark.usefixtures("lab_cluster")


def lab_max_array_size() -> int:
    out = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, check=True
    ).stdout
    [line] = [ln for ln in out.splitlines() if ln.startswith("MaxArraySize")]
    return int(line.split("=")[1])


def test_indices_above_max_array_size_are_fed_from_0_and_every_task_runs_its_own(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site("")
    cap = lab_max_array_size()
    first, last = cap - 6, cap + 3  # ten tasks, the last four at or above the cap
    # what Slurm says of it, unfed: its highest index, not its count, is refused
    plain = subprocess.run(
        ["sbatch", "--parsable", f"--array={first}-{last}", "--mem=10M", "-t", "1",
         "-o", "/dev/null", "--wrap", "true"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert plain.returncode != 0 and "Invalid job array specification" in plain.stderr
    sub = js(
        "submit", "command", "-P", f"command=touch {workdir}/t$SLURM_ARRAY_TASK_ID",
        "--array", f"{first}-{last}", "--mem", "10M", "-t", "1", "--log-dir", str(workdir),
        "--json",
    )  # fmt: skip
    assert sub.exit_code == 0, sub.output
    submitted = json.loads(sub.stdout)
    assert (submitted["workload_tasks"], submitted["workload_parts"]) == (10, 1)
    job_id = str(submitted["job_id"])
    waited = js("wait", job_id, "--timeout", "180")
    assert waited.exit_code == 0, waited.output
    # the array Slurm accepted: indices 0-9 (accounting may lag the controller a little) ...
    expected = sorted(f"{job_id}_{i}|COMPLETED" for i in range(10))
    deadline = time.monotonic() + 30
    while (accounted := _accounted(job_id)) != expected and time.monotonic() < deadline:
        time.sleep(1)
    assert accounted == expected
    ran = sorted(int(p.name[1:]) for p in workdir.glob("t*"))
    assert ran == list(range(first, last + 1))  # ... each task ran the workload's own index
    status = json.loads(js("status", "--json", job_id).stdout)
    [fed] = status["workloads"]
    assert (fed["tasks"], fed["done"], fed["not_submitted"]) == (10, 10, 0)


def _accounted(job_id: str) -> list[str]:
    """The array's tasks as accounting has them: `ID_INDEX|STATE`, sorted."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=JobID,State"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sorted(out.split())

"""Jobs across nodes, on the lab switched to three nodes (issue 27, item 4).

All the lab's slurmd run on one machine and report its one host name, so a job that ran
on two nodes is told by `SLURMD_NODENAME`, which each slurmd sets for the tasks it starts
(docs/lab-multinode.md), never by `hostname`. scripts/test runs these in the multi-node
stage (the `multinode_lab` fixture; on the one-node lab they skip, saying how to switch).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_cli import js

pytestmark = pytest.mark.usefixtures("multinode_lab", "user_site")

# One line a task, from each node's slurmd: the node that started the task.
_PRINT_NODE = "srun printenv SLURMD_NODENAME"


def _nodes_in(output: Path) -> list[str]:
    return sorted(line.strip() for line in output.read_text().splitlines() if line.strip())


def _waited(job_id: str) -> dict[str, object]:
    result = js("wait", job_id, "--json", "--timeout", "120")
    assert result.exit_code == 0, result.output
    job: dict[str, object] = json.loads(result.stdout)["jobs"][0]
    return job


def test_a_template_job_runs_its_tasks_on_two_nodes(workdir: Path) -> None:
    submitted = js(
        "submit", "command", "-N", "2", "-n", "2", "-P", f"command={_PRINT_NODE}",
        "--log-dir", str(workdir), "--json",
    )  # fmt: skip
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.stdout)["job_id"]
    job = _waited(job_id)
    assert job["state"] == "COMPLETED", job
    (log,) = [p for p in workdir.iterdir() if job_id in p.name and p.suffix == ".out"]
    printed = _nodes_in(log)
    assert len(printed) == 2 and len(set(printed)) == 2, printed  # two tasks, two nodes


def test_a_users_batch_script_runs_on_two_nodes(workdir: Path) -> None:
    (workdir / "spread.sh").write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=spread\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks=2\n"
        "#SBATCH -t 5\n"
        "#SBATCH -o spread-%j.out\n"
        f"{_PRINT_NODE}\n"
    )
    result = js("sbatch", "spread.sh")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    job = _waited(job_id)
    assert job["state"] == "COMPLETED", job
    printed = _nodes_in(workdir / f"spread-{job_id}.out")
    assert len(printed) == 2 and len(set(printed)) == 2, printed


def test_a_users_batch_script_runs_one_task_per_node_on_two_nodes(workdir: Path) -> None:
    """The MPI script's usual form: --ntasks-per-node, no -n; judged, and passed as written."""
    (workdir / "per-node.sh").write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=per-node\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=1\n"
        "#SBATCH -t 5\n"
        "#SBATCH -o per-node-%j.out\n"
        f"{_PRINT_NODE}\n"
    )
    result = js("sbatch", "per-node.sh")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    job = _waited(job_id)
    assert job["state"] == "COMPLETED", job
    printed = _nodes_in(workdir / f"per-node-{job_id}.out")
    assert len(printed) == 2 and len(set(printed)) == 2, printed  # one task on each node

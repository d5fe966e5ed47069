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


def _script_ran_on(workdir: Path, name: str, *directives: str) -> list[str]:
    """A user's batch script through `jobsmith sbatch` with these #SBATCH lines, waited
    for to COMPLETED: the node each of its tasks printed, sorted."""
    (workdir / f"{name}.sh").write_text(
        "#!/bin/bash\n"
        f"#SBATCH --job-name={name}\n"
        + "".join(f"#SBATCH {directive}\n" for directive in directives)
        + f"#SBATCH -t 5\n#SBATCH -o {name}-%j.out\n{_PRINT_NODE}\n"
    )
    result = js("sbatch", f"{name}.sh")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    job = _waited(job_id)
    assert job["state"] == "COMPLETED", job
    return _nodes_in(workdir / f"{name}-{job_id}.out")


def test_a_users_batch_script_runs_on_two_nodes(workdir: Path) -> None:
    printed = _script_ran_on(workdir, "spread", "--nodes=2", "--ntasks=2")
    assert len(printed) == 2 and len(set(printed)) == 2, printed


def test_a_users_batch_script_runs_one_task_per_node_on_two_nodes(workdir: Path) -> None:
    """The MPI script's usual form: --ntasks-per-node, no -n; judged, and passed as written."""
    printed = _script_ran_on(workdir, "per-node", "--nodes=2", "--ntasks-per-node=1")
    assert len(printed) == 2 and len(set(printed)) == 2, printed  # one task on each node

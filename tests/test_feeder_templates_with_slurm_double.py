"""The templates that pick their item by `$SLURM_ARRAY_TASK_ID` (file_array's files,
blender_frames' blocks of frames), fed in parts (issue 28, item 1): every task of every
part runs the workload's own item, once.

Slurm is the double (its MaxArraySize 4 forces parts of 4, indexed from 0); each part's
script is the one the feeder submitted, run by bash as Slurm would run each of its array
tasks (SLURM_ARRAY_TASK_ID = the part's index). blender_frames' `blender` is a stub on
PATH that prints the range it was asked to render. The lab shows file_array fed for real
(tests/test_feeder_lab.py: every file gzipped once).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from scheduler_double import AgentHarness

from jobsmith.agent.runtime.submission import orders
from jobsmith.agent.runtime.submission import steps as st
from jobsmith.agent.runtime.submission.request.jobs import JobRequest


@pytest.fixture
def h(tmp_path: Path) -> AgentHarness:
    harness = AgentHarness.build(tmp_path, {"approval": {"core_hours": 100000}})
    harness.slurm.max_array_size = 4
    return harness


def run_every_task(h: AgentHarness, path: str) -> list[str]:
    """Each fed part's script run once per array task, in order: what they printed."""
    printed: list[str] = []
    for job_id, options in h.slurm.options.items():
        assert options.array is not None and options.array.startswith("0")  # from 0
        last = int(options.array.rpartition("-")[2])
        for index in range(last + 1):
            env = {"PATH": path, "SLURM_ARRAY_TASK_ID": str(index), "HOME": "/nonexistent"}
            out = subprocess.run(
                ["bash", "-c", h.slurm.scripts[job_id]], env=env, capture_output=True, text=True
            )
            assert out.returncode == 0, out.stderr
            printed += out.stdout.split("\n")[:-1]
    return printed


def test_file_array_fed_in_parts_runs_every_file_once_with_slurm_double(
    h: AgentHarness, tmp_path: Path
) -> None:
    files = [tmp_path / f"in{i}.txt" for i in range(10)]
    for f in files:
        f.write_text("x")
    job = JobRequest(
        template="file_array",
        params={"files": [str(f) for f in files], "program": "echo"},
        mem_mb=10, time_limit_s=60,
    )  # fmt: skip
    result = h.executor.submit(h.store.create(), orders.NewJob(st.Submit(job=job)))
    assert (result.summary["workload_tasks"], result.summary["workload_parts"]) == (10, 3)
    assert [o.array for o in h.slurm.options.values()] == ["0-3", "0-3", "0-1"]
    assert run_every_task(h, os.environ["PATH"]) == [str(f) for f in files]


def test_blender_frames_fed_in_parts_renders_every_block_once_with_slurm_double(
    h: AgentHarness, tmp_path: Path
) -> None:
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "blender").write_text('#!/bin/bash\nwhile [ $# -gt 0 ]; do case $1 in\n'
        '  -s) s=$2 ;; -e) e=$2 ;; esac; shift; done\necho "$s-$e"\n')  # fmt: skip
    (stub / "blender").chmod(0o755)
    scene = tmp_path / "scene.blend"
    scene.write_bytes(b"BLENDER")
    blocks = [f"{n}-{n + 9}" for n in range(1, 61, 10)]  # frames 1-60, six blocks
    job = JobRequest(
        template="blender_frames",
        params={"blend_file": str(scene), "output_dir": str(tmp_path / "out"), "blocks": blocks},
        cpus_per_task=1, mem_mb=10, time_limit_s=60,
    )  # fmt: skip
    result = h.executor.submit(h.store.create(), orders.NewJob(st.Submit(job=job)))
    assert (result.summary["workload_tasks"], result.summary["workload_parts"]) == (6, 2)
    assert [o.array for o in h.slurm.options.values()] == ["0-3", "0-1"]
    path = f"{stub}:{os.environ['PATH']}"
    assert run_every_task(h, path) == blocks

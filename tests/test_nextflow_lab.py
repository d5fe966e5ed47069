"""A tiny pipeline through NextflowEngine.launch as a real Slurm head job, when Nextflow is
installed. It is not a `lab` test: lab tests must run under CI, and Nextflow cannot be
installed on the build machines (its launcher downloads its jar from the internet), so this
test skips there, saying why."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from jobsmith.adapters.nextflow import NextflowEngine
from jobsmith.adapters.workflow import (
    EngineKind,
    EngineSite,
    LaunchRequest,
    MessageKind,
    TaskStatus,
)

PIPELINE = """
process HELLO {
    input: val x
    output: stdout
    script: "echo hello ${x}"
}
workflow { HELLO(Channel.of(1, 2)) }
"""


def test_nextflow_pipeline_on_the_lab_cluster_when_nextflow_is_installed(workdir: Path) -> None:
    if shutil.which("nextflow") is None:
        pytest.skip("nextflow is not on PATH (it cannot be installed on the build machines)")
    if shutil.which("sbatch") is None:
        pytest.skip("no sbatch: this needs the lab cluster (scripts/slurm-lab up)")
    (workdir / "main.nf").write_text(PIPELINE)
    site = EngineSite(
        partition="debug",
        head_partition="debug",
        max_concurrent_tasks=2,
        default_mem_mb=256,  # the lab's one node is small
        default_time_s=600,
    )
    request = LaunchRequest(engine=EngineKind.NEXTFLOW, pipeline="main.nf", launch_dir=str(workdir))
    engine = NextflowEngine()
    head = engine.launch(site, request, attempt=1)
    for relative, text in head.files.items():
        (workdir / relative).parent.mkdir(parents=True, exist_ok=True)
        (workdir / relative).write_text(text)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in head.environment.items())
    script = workdir / "head.sh"
    script.write_text(f"#!/bin/bash\n{exports}{shlex.join(head.argv)}\n")
    run = subprocess.run(
        ["sbatch", "--wait", "-p", site.head_partition, "-D", str(workdir), str(script)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    trace, log = engine.records(request, attempt=1)
    tasks = engine.parse(trace, (workdir / trace.path).read_text().splitlines(), ()).tasks
    assert [t.status for t in tasks] == [TaskStatus.COMPLETED] * 2
    assert all(t.process == "HELLO" and (t.native_id or "").isdigit() for t in tasks)
    messages = engine.parse(log, (workdir / log.path).read_text().splitlines(), ()).messages
    kinds = {m.kind for m in messages}
    assert MessageKind.COMPLETED in kinds and MessageKind.FAILED not in kinds, messages

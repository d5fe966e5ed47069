"""`pipeline run` checks the files it names before anything is submitted (issue 24, part
6): a head job was submitted for a Snakefile that does not exist, a FIFO and an empty
name. And the head job's script says so at once when the engine is not on its PATH
(it failed with a bare 127)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lab_cli import js

from jobsmith.job_templates import TemplateLibrary, render_body, shipped_library


@pytest.mark.usefixtures("lab_cluster")
@pytest.mark.parametrize("which", ["missing", "fifo", "empty", "directory"])
def test_a_snakefile_that_is_no_file_is_refused_before_any_submission(
    which: str, user_site: Any, workdir: Path, jobsmith_home: Path
) -> None:
    fifo = workdir / "Snakefile.fifo"
    os.mkfifo(fifo)
    (workdir / "rules").mkdir()
    name = {"missing": "nope.smk", "fifo": str(fifo), "empty": "", "directory": "rules"}[which]
    out = js("pipeline", "run", "snakemake", name)
    assert out.exit_code == 2, out.output
    said = {
        "missing": "does not exist",
        "fifo": "is a FIFO, device or socket, not a regular file",
        "empty": "is an empty name",
        "directory": "is a directory, not a regular file",
    }[which]
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("jobsmith: error: pipeline: the Snakefile '"), line
    assert f"' {said}: " in line, line
    assert not list((jobsmith_home / "state" / "jobs").glob("*.json"))  # nothing submitted


def test_the_head_job_says_at_once_that_its_engine_is_missing(tmp_path: Path) -> None:
    template = TemplateLibrary([shipped_library()]).get("pipeline_head")
    params = {
        "engine": "snakemake",
        "launch_dir": str(tmp_path / "run"),
        "config_file": "profile/config.yaml",
        "config_text": "jobs: 1\n",
        "engine_args": ["--profile", "profile"],
    }
    body = render_body(template, params, allowed_roots=[tmp_path], base_dir=tmp_path).body
    script = tmp_path / "head.sh"
    script.write_text("#!/bin/bash\n" + body)
    ran = subprocess.run(
        ["/bin/bash", str(script)],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 127
    assert "jobsmith: snakemake is not on this job's PATH (/usr/bin:/bin)" in ran.stderr

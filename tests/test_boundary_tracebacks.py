"""What gave a traceback at the boundary is one line and a documented exit (issue 24,
part 5): a 5,000-digit number in a YAML or JSON file (Python's limit on converting
digits), a `--site` name too long for the file system, and `site init -o` into a
directory the user cannot write. Through the CLI in a process of its own; no Slurm."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lab_cli import LAB_SITE

DIGITS = "9" * 5000


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "jobsmith", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


def _one_line(out: subprocess.CompletedProcess[str], status: int) -> str:
    assert out.returncode == status, (out.returncode, out.stderr[-400:])
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    return line


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("p.yaml", f"command: {DIGITS}\n"),
        ("p.json", f'{{"command": {DIGITS}}}\n'),
        ("p2.yaml", f"command: -{DIGITS}\n"),
    ],
)
def test_a_huge_number_in_a_params_file_is_named_by_line(
    name: str, text: str, tmp_path: Path
) -> None:
    (tmp_path / name).write_text(text)
    argv = ["--site", str(LAB_SITE), "render", "command", "--params-file", name]
    line = _one_line(_run(*argv, cwd=tmp_path), 2)
    assert f"{name}:1:" in line and "a number of 500" in line and "at most 100" in line


def test_a_huge_number_in_a_plan_file_is_named_by_line(tmp_path: Path) -> None:
    plan = f"name: p\nsteps:\n  a:\n    template: command\n    time_limit_s: {DIGITS}\n"
    (tmp_path / "plan.yaml").write_text(plan)
    line = _one_line(_run("--site", str(LAB_SITE), "plan", "check", "plan.yaml", cwd=tmp_path), 2)
    assert "plan.yaml:5:" in line


def test_a_site_name_too_long_for_the_file_system_is_a_config_error(tmp_path: Path) -> None:
    too_long = str(tmp_path / ("a" * 300))
    argv = ["--site", too_long, "render", "command", "-P", "command=true"]
    line = _one_line(_run(*argv, cwd=tmp_path), 2)
    assert "File name too long" in line


@pytest.mark.skipif(os.getuid() == 0, reason="root writes anywhere: run as the lab user")
def test_site_init_into_an_unwritable_directory_says_so(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    argv = ["--site", str(LAB_SITE), "site", "init", "-o", str(locked / "site.yaml")]
    out = _run(*argv, cwd=tmp_path)
    if out.returncode == 5:  # no Slurm to ask here (JOBSMITH_SKIP_LAB runs)
        pytest.skip("site init needs Slurm's answers before it writes")
    line = _one_line(out, 2)
    assert "cannot write it (Permission denied)" in line

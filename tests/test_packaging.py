"""jobsmith installs only the `jobsmith` import name, beside PyPI's top-level `adapters`/`agent`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_holds_only_the_jobsmith_package_with_its_data(tmp_path: Path) -> None:
    # build from a copy (symlinks kept): the build writes build/ and *.egg-info beside it
    source = tmp_path / "src-copy"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(".venv", ".git", ".hypothesis", "*.egg-info", "build"),
    )
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run([*pip, "-w", str(tmp_path), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("jobsmith-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.startswith("jobsmith-")}
    assert top == {"jobsmith"}
    for needed in (
        "jobsmith/adapters/slurm/scheduler.py",
        "jobsmith/agent/faces/cli.py",
        "jobsmith/job_templates/library/ffmpeg_chunks.yaml",
        "jobsmith/job_templates/library/ffmpeg_chunks.sh.j2",
        "jobsmith/site_config/examples/lab.yaml",
        "jobsmith/py.typed",
    ):
        assert needed in names


def test_coexists_with_other_top_level_adapters_and_agent(tmp_path: Path) -> None:
    # Stand-ins for AdapterHub's `adapters` and another `agent` distribution, first on the path.
    for name in ("adapters", "agent"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"WHO = 'other {name}'\n")
    code = (
        "import adapters, agent, jobsmith.adapters.slurm.commands.options as o,"
        " jobsmith.agent.faces.cli;"
        "print(adapters.WHO, '|', agent.WHO, '|', o.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    expected = "other adapters | other agent | jobsmith.adapters.slurm.commands.options"
    assert out.stdout.strip() == expected

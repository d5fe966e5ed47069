"""Shared fixtures: the real lab cluster, and an isolated jobsmith home per test.

Tests that touch Slurm run against the real lab cluster that `scripts/slurm-lab up`
starts, as its unprivileged user (scripts/test runs pytest as that user). They fail,
rather than skip, when the cluster is missing; JOBSMITH_SKIP_LAB=1 skips them on purpose
for a quick run of the pure tests.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# Property tests explore at random while developing; under CI the same examples run every
# time (a red run must be reproducible, and the checkout may not be writable for the
# example database).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def lab_cluster() -> str:
    """The lab cluster's Slurm version; fails the test if the cluster is not usable."""
    if os.environ.get("JOBSMITH_SKIP_LAB") == "1":
        pytest.skip("JOBSMITH_SKIP_LAB=1: real-cluster tests skipped on request")
    if os.getuid() == 0:
        pytest.fail("lab tests submit as an unprivileged user, as real users do: run scripts/test")
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"lab cluster not reachable ({exc}); start it with: scripts/slurm-lab up")
    assert "debug" in out.stdout
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True, check=True)
    return version.stdout.split()[-1]


@pytest.fixture
def jobsmith_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private config and state directory, so tests never see the user's real ones."""
    home = tmp_path / "jobsmith-home"
    (home / "config").mkdir(parents=True)
    (home / "state").mkdir()
    monkeypatch.setenv("JOBSMITH_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("JOBSMITH_STATE_DIR", str(home / "state"))
    monkeypatch.delenv("JOBSMITH_SITE", raising=False)
    return home


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A directory jobs on the lab cluster can read and write (same host, same user)."""
    path = tmp_path / "work"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def user_site(jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run from workdir with a user site file allowing it; call with YAML to add more."""
    from lab_cli import write_user_site

    monkeypatch.chdir(workdir)
    write_user_site(jobsmith_home / "config", workdir)
    return lambda extra_yaml="": write_user_site(jobsmith_home / "config", workdir, extra_yaml)

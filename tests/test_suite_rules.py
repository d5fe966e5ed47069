"""The suite's own rules (tests/conftest.py, scripts/regen-fixtures): no green run without
Slurm under CI, a `lab` marker that follows from the `lab_cluster` fixture, and golden
files that tests only compare.

Each case runs pytest on a small generated test directory with this conftest, where the
test module stands in its own `lab_cluster` (so nothing here needs the cluster).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

FAKE_LAB = """
import pytest

@pytest.fixture(scope="session")
def lab_cluster():
    return "fake"

@pytest.fixture
def via_fixture(lab_cluster):
    return lab_cluster
"""

LAB_TESTS = (
    FAKE_LAB
    + """
pytestmark_lab = pytest.mark.usefixtures("lab_cluster")

def test_pure():
    pass

def test_direct(lab_cluster):
    pass

@pytestmark_lab
def test_by_usefixtures():
    pass

def test_through_another_fixture(via_fixture):
    pass
"""
)


def run_pytest(
    tmp_path: Path, body: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest on a directory holding this conftest and test_x.py = body; not under CI
    unless env says so (whatever the environment of this run)."""
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_x.py").write_text(body)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    lab: lab\n    slow: slow\n    disruptive: disruptive\n"
    )
    base = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("JOBSMITH_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", *args],
        cwd=tmp_path,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_using_the_lab_fixture_in_any_way_marks_a_test_lab(tmp_path: Path) -> None:
    lab = run_pytest(tmp_path, LAB_TESTS, "-m", "lab")
    assert "3 passed, 1 deselected" in lab.stdout, lab.stdout
    pure = run_pytest(tmp_path, LAB_TESTS, "-m", "not lab")
    assert "1 passed, 3 deselected" in pure.stdout, pure.stdout
    assert "PASSED test_x.py::test_pure" in pure.stdout


def test_the_lab_mark_without_the_fixture_is_a_collection_error(tmp_path: Path) -> None:
    body = FAKE_LAB + "\n@pytest.mark.lab\ndef test_claims_slurm():\n    pass\n"
    run = run_pytest(tmp_path, body)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "marked lab without using the lab_cluster fixture" in run.stderr
    assert "test_x.py::test_claims_slurm" in run.stderr


def test_every_run_with_lab_tests_says_how_many_ran(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, LAB_TESTS)
    assert run.returncode == 0, run.stdout
    assert "lab tests (real Slurm): 3 ran (3 passed, 0 failed), 0 did not run" in run.stdout


def test_outside_ci_skip_lab_skips_and_passes(tmp_path: Path) -> None:
    body = LAB_TESTS.replace('return "fake"', 'pytest.skip("JOBSMITH_SKIP_LAB=1")')
    run = run_pytest(tmp_path, body, env={"JOBSMITH_SKIP_LAB": "1"})
    assert run.returncode == 0, run.stdout
    assert "1 passed, 3 skipped" in run.stdout
    assert "0 ran (0 passed, 0 failed), 3 did not run" in run.stdout


def test_under_ci_skip_lab_is_refused(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, LAB_TESTS, env={"CI": "true", "JOBSMITH_SKIP_LAB": "1"})
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "JOBSMITH_SKIP_LAB is set under CI" in run.stderr


def test_under_ci_a_skipped_lab_test_fails_the_run(tmp_path: Path) -> None:
    body = LAB_TESTS.replace(
        "def test_by_usefixtures():\n    pass",
        "def test_by_usefixtures():\n    pytest.skip('no GPU today')",
    )
    run = run_pytest(tmp_path, body, env={"CI": "true"})
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout
    assert "FAILED test_x.py::test_by_usefixtures" in run.stdout
    assert "skipped under CI, where every lab test must run: Skipped: no GPU today" in (run.stdout)
    assert "2 ran (2 passed, 0 failed), 1 did not run" in run.stdout
    outside = run_pytest(tmp_path, body)
    assert outside.returncode == 0 and "1 skipped" in outside.stdout


def test_under_ci_a_run_where_no_lab_test_ran_fails(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, LAB_TESTS, "-m", "not lab", env={"CI": "true"})
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout
    assert "1 passed, 3 deselected" in run.stdout
    assert "0 ran (0 passed, 0 failed), 0 did not run" in run.stdout
    assert "CI: no lab test ran" in run.stdout
    none = run_pytest(tmp_path, LAB_TESTS, "-k", "nothing_matches", env={"CI": "true"})
    assert none.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, none.stdout
    assert run_pytest(tmp_path, LAB_TESTS, env={"CI": "true"}).returncode == 0


def test_the_old_regeneration_switch_is_refused(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, LAB_TESTS, env={"JOBSMITH_REGEN_FIXTURES": "1"})
    assert run.returncode == pytest.ExitCode.USAGE_ERROR
    assert "scripts/regen-fixtures" in run.stderr

"""Shared fixtures: the real lab cluster, and an isolated jobsmith home per test.

Tests that touch Slurm run against the real lab cluster that `scripts/slurm-lab up`
starts, as its unprivileged user (scripts/test runs pytest as that user). They fail,
rather than skip, when the cluster is missing; JOBSMITH_SKIP_LAB=1 skips them on purpose
for a quick run of the pure tests (`pytest -m "not lab"` deselects them instead).

The `lab` marker is mechanical, so that `-m "not lab"` means "no Slurm": a test that uses
the `lab_cluster` fixture (directly, through usefixtures or pytestmark, or through
another fixture) is marked `lab` at collection, and a test marked `lab` by hand that does
not use the fixture is a collection error. Likewise `multinode` follows from the
`multinode_lab` fixture: those tests need the lab switched to several nodes, and
scripts/test runs them in a stage of their own, after switching it (issue 27).

Under CI (`CI` set, as `.ci/run` does) a green run must have exercised Slurm:
JOBSMITH_SKIP_LAB is refused, a lab test that skips counts as failed, and a run in which
no lab test ran fails. Every run with lab tests selected ends with how many ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from messages_server import MessagesServer

REPO = Path(__file__).resolve().parent.parent

# Property tests explore at random while developing; under CI the same examples run every
# time (a red run must be reproducible, and the checkout may not be writable for the
# example database), with no per-example deadline: CI runs them beside the lab's tests on
# two cores, where a slow example says nothing of the code.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
UNDER_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
if UNDER_CI:
    settings.load_profile("ci")
FIXTURES = Path(__file__).resolve().parent / "fixtures"

LAB_FIXTURE = "lab_cluster"
MULTINODE_FIXTURE = "multinode_lab"
#: What the multi-node stage of scripts/test brings up (JOBSMITH_LAB_NODES=3).
LAB_NODES = 3
# Tags on a lab test's reports (user_properties travel from xdist's workers with them).
_LAB_TEST = ("jobsmith lab test", True)
_SKIPPED_UNDER_CI = ("jobsmith lab test skipped under CI", True)
#: lab tests of this run, as the reporting process (xdist's controller) saw them end
_lab_tally = {"passed": 0, "failed": 0, "not run": 0}


def pytest_configure(config: pytest.Config) -> None:
    _lab_tally.update(dict.fromkeys(_lab_tally, 0))
    if os.environ.get("JOBSMITH_REGEN_FIXTURES"):
        raise pytest.UsageError(
            "JOBSMITH_REGEN_FIXTURES is no longer read: the golden-file tests only compare. "
            "Run scripts/regen-fixtures to rewrite tests/fixtures/rendered, review the diff, "
            "then run the tests"
        )
    if UNDER_CI and os.environ.get("JOBSMITH_SKIP_LAB"):
        raise pytest.UsageError(
            "JOBSMITH_SKIP_LAB is set under CI, where every lab test must run: unset it "
            "(for a quick run without Slurm outside CI: pytest -m 'not lab')"
        )


@pytest.hookimpl(tryfirst=True)  # before -m deselects: `-m "not lab"` must see the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unfounded = []
    for item in items:
        if LAB_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.lab)
            if MULTINODE_FIXTURE in item.fixturenames:  # type: ignore[attr-defined]
                item.add_marker(pytest.mark.multinode)
        elif item.get_closest_marker("lab") is not None:
            unfounded.append(item.nodeid)
    if unfounded:
        raise pytest.UsageError(
            f"marked lab without using the {LAB_FIXTURE} fixture: {', '.join(unfounded)}; "
            f'the mark follows from the fixture: use @pytest.mark.usefixtures("{LAB_FIXTURE}") '
            "if the test needs Slurm, else drop the mark"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item,
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    if item.get_closest_marker("lab") is None:
        return report
    report.user_properties.append(_LAB_TEST)
    # an expected failure (xfail) ran: it is reported as skipped, but Slurm was asked
    if UNDER_CI and report.skipped and not hasattr(report, "wasxfail"):
        # Whatever the reason, a skipped lab test is a Slurm property CI did not check.
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"lab test skipped under CI, where every lab test must run: {reason}"
        report.user_properties.append(_SKIPPED_UNDER_CI)
    return report


def _tagged(report: pytest.TestReport, tag: tuple[str, bool]) -> bool:
    # by name: a tuple may come back from a worker as a list
    return any(prop[0] == tag[0] for prop in report.user_properties)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _tagged(report, _LAB_TEST):
        return
    skipped = (report.skipped and not hasattr(report, "wasxfail")) or _tagged(
        report, _SKIPPED_UNDER_CI
    )
    if report.when == "call" and not skipped:
        _lab_tally[report.outcome] += 1
    elif skipped or (report.when == "setup" and report.failed):
        _lab_tally["not run"] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    ran = _lab_tally["passed"] + _lab_tally["failed"]
    if (
        UNDER_CI
        and ran == 0
        and not hasattr(session.config, "workerinput")  # xdist's workers: the controller decides
        and not session.config.option.collectonly
        # exit 5 (nothing collected) stays: non-zero already, and scripts/test tells apart
        # a selection that left one of its runs empty
        and session.exitstatus == pytest.ExitCode.OK
    ):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    ran = _lab_tally["passed"] + _lab_tally["failed"]
    if terminalreporter.config.option.collectonly or not (UNDER_CI or ran or _lab_tally["not run"]):
        return
    terminalreporter.write_sep(
        "-",
        f"lab tests (real Slurm): {ran} ran ({_lab_tally['passed']} passed, "
        f"{_lab_tally['failed']} failed), {_lab_tally['not run']} did not run",
        bold=True,
    )
    if UNDER_CI and ran == 0:
        terminalreporter.write_line(
            "CI: no lab test ran, so this run checked nothing against Slurm: it fails", red=True
        )


@pytest.fixture(scope="session")
def lab_cluster() -> str:
    """The lab cluster's Slurm version; fails the test if the cluster is not usable."""
    if os.environ.get("JOBSMITH_SKIP_LAB") == "1":
        pytest.skip("JOBSMITH_SKIP_LAB=1: real-cluster tests skipped on request")
    if os.getuid() == 0:
        pytest.fail("lab tests submit as an unprivileged user, as real users do: run scripts/test")
    if os.environ.get("JOBSMITH_LAPTOP_CLUSTER"):  # the laptop stage: its cluster's Slurm
        from login_node import checked, login_node  # tests/login_node.py: over SSH

        node = login_node()
        found = node.run(["sinfo", "-h", "-o", "%P %a"])
        assert found.returncode == 0 and "debug" in found.stdout, found
        return checked(node, ["sbatch", "--version"]).split()[-1]
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"lab cluster not reachable ({exc}); start it with: scripts/slurm-lab up")
    assert "debug" in out.stdout
    version = subprocess.run(["sbatch", "--version"], capture_output=True, text=True, check=True)
    return version.stdout.split()[-1]


@pytest.fixture(scope="session")
def multinode_lab(lab_cluster: str) -> list[str]:
    """The lab's node names when it runs several slurmd (n1..n3; the last has the GPUs).

    The suite's other stages run on the one-node lab; scripts/test switches the lab to
    three nodes for the tests using this fixture (marked `multinode`), then back. Run on a
    one-node lab, they skip, saying how to bring the right lab up."""
    out = subprocess.run(
        ["sinfo", "-N", "-h", "-o", "%N"], capture_output=True, text=True, timeout=20, check=True
    )
    nodes = sorted(set(out.stdout.split()))
    if len(nodes) < LAB_NODES:
        pytest.skip(
            f"needs the lab with {LAB_NODES} nodes, it has {len(nodes)} ({', '.join(nodes)}): "
            f"JOBSMITH_LAB_NODES={LAB_NODES} scripts/slurm-lab up (scripts/test does, for these)"
        )
    return nodes


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
def known_hosts(tmp_path: Path, sshd: Any) -> Path:
    """A known_hosts file that holds the key of the module's `sshd` (tests/sshd.py)."""
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line())
    return path


@pytest.fixture
def user_site(jobsmith_home: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run from workdir with a user site file allowing it; call with YAML to add more."""
    from lab_cli import write_user_site

    monkeypatch.chdir(workdir)
    write_user_site(jobsmith_home / "config", workdir)
    return lambda extra_yaml="": write_user_site(jobsmith_home / "config", workdir, extra_yaml)


# --- the model: the real anthropic SDK against the loopback Messages-API server -------------


# imported where used: tests/test_suite_rules.py runs this conftest alone, without its siblings


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    """A Messages-API server on loopback (tests/messages_server.py) for the test."""
    from messages_server import MessagesServer

    with MessagesServer() as running:
        yield running


@pytest.fixture
def model_yaml(server: MessagesServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's site-file section pointing jobsmith at the loopback server (key in env)."""
    from messages_server import KEY

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n"


@pytest.fixture
def offline(jobsmith_home: Path, model_yaml: str) -> Callable[[str], None]:
    """No Slurm: the user's site file names the server; call with more YAML to add."""
    site = jobsmith_home / "config" / "site.yaml"
    site.write_text(model_yaml)
    return lambda extra: site.write_text(model_yaml + extra)

"""The warm process (agent/faces/warm.py, warmserver.py, launch.py; issue 26).

Each test runs the real entry point in fresh Python processes, as the `jobsmith` command
does, with its own warm directory (JOBSMITH_WARM_DIR) so it meets only the warm process
it started. A probe in the caller records, at its exit, whether it imported the CLI
itself ("cold") or handed the command over ("warm"): a structural check, not a timing.
What a warm run prints, exits with and sees (argv, working directory, environment) must
be what the same command prints, exits with and sees cold.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lab_cli import LAB_SITE, write_user_site

REPO = Path(__file__).resolve().parent.parent

#: the `jobsmith` entry point, plus a probe of how the command ran
_CALLER = """
import atexit, os, sys
def _probe():
    with open(os.environ["WARM_PROBE"], "a") as f:
        f.write("cold\\n" if "jobsmith.agent.faces.cli" in sys.modules else "warm\\n")
atexit.register(_probe)
sys.argv = ["jobsmith", *sys.argv[1:]]
from jobsmith.agent.faces.launch import main
main()
"""


@dataclass
class Ran:
    code: int
    out: bytes
    err: bytes
    how: str

    def seen(self) -> tuple[int, bytes, bytes]:
        """What the user sees, but the tag each run draws anew (job-name NAME.js-TAG)."""
        return self.code, _TAG.sub(b"js-TAG", self.out), _TAG.sub(b"js-TAG", self.err)


_TAG = re.compile(rb"js-[0-9a-f]{12}")
#: the warm directories the Callers of the running test made (removed after it)
_WARM_DIRS: list[Path] = []


@pytest.fixture(autouse=True)
def _remove_warm_dirs() -> Iterator[None]:
    yield
    while _WARM_DIRS:
        shutil.rmtree(_WARM_DIRS.pop(), ignore_errors=True)


class Caller:
    """Runs `jobsmith ARGS` as a fresh process with a private home and warm directory."""

    def __init__(self, tmp: Path, pythonpath: str | None = None) -> None:
        # short, whatever pytest's own directory is: a Unix socket's path has 108 bytes
        self.warm_dir = Path(tempfile.mkdtemp(prefix="js-warm-", dir="/tmp"))
        _WARM_DIRS.append(self.warm_dir)
        self.probe = tmp / "probe"
        home = tmp / "home"
        (home / "config").mkdir(parents=True)
        (home / "state").mkdir()
        self.env = {
            "HOME": os.environ.get("HOME", str(home)),
            "USER": os.environ.get("USER", ""),
            "PATH": os.environ["PATH"],
            "LANG": "C.UTF-8",
            "JOBSMITH_SITE": str(LAB_SITE),
            "JOBSMITH_CONFIG_DIR": str(home / "config"),
            "JOBSMITH_STATE_DIR": str(home / "state"),
            "JOBSMITH_WARM_DIR": str(self.warm_dir),
            "JOBSMITH_WARM_IDLE_S": "120",
            "WARM_PROBE": str(self.probe),
        }
        path = pythonpath or os.environ.get("PYTHONPATH")
        if path:
            self.env["PYTHONPATH"] = path

    def popen(
        self, *args: str, cwd: Path | None = None, sigint: Any = signal.SIG_DFL, **env: str
    ) -> subprocess.Popen[bytes]:
        """The caller as a shell's foreground job starts it (SIGINT at its default, not
        as this test process has it: pytest-xdist's workers ignore it), or with sigint."""
        return subprocess.Popen(
            [sys.executable, "-c", _CALLER, *args],
            env={**self.env, **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),
        )

    def run(self, *args: str, cwd: Path | None = None, **env: str) -> Ran:
        self.probe.unlink(missing_ok=True)
        proc = self.popen(*args, cwd=cwd, **env)
        out, err = proc.communicate(timeout=120)
        return Ran(proc.returncode, out, err, self.probe.read_text().strip())

    def warm_pids(self) -> list[int]:
        pids = []
        for lock in self.warm_dir.glob("*.lock"):
            text = lock.read_text().strip()
            if text.isdigit() and _alive(int(text)):
                pids.append(int(text))
        return pids

    def wait_warm(self, timeout_s: float = 60) -> None:
        """Until a warm process listens (it imports for a second or so after a cold run)."""
        deadline = time.monotonic() + timeout_s
        while not list(self.warm_dir.glob("*.sock")) or not self.warm_pids():
            assert time.monotonic() < deadline, "no warm process started after a cold run"
            time.sleep(0.1)

    def stop(self) -> None:
        for pid in self.warm_pids():
            os.kill(pid, signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _until_gone(pid: int, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while _alive(pid):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.fixture
def caller(tmp_path: Path) -> Iterator[Caller]:
    c = Caller(tmp_path)
    yield c
    c.stop()


def _render(caller: Caller, *extra: str, cwd: Path | None = None, **env: str) -> Ran:
    return caller.run("render", "command", "-P", "command=echo hi", *extra, cwd=cwd, **env)


def test_a_one_shot_command_runs_warm_after_a_cold_run_and_prints_the_same(
    caller: Caller,
) -> None:
    cold = _render(caller)
    assert (cold.code, cold.how) == (0, "cold") and b"echo hi" in cold.out, cold.err
    caller.wait_warm()
    warm = _render(caller)
    assert warm.how == "warm"
    assert warm.seen() == cold.seen()
    assert _render(caller).how == "warm"  # and again: each command a fresh child


def test_the_callers_directory_and_environment_reach_the_warm_command(
    caller: Caller, tmp_path: Path
) -> None:
    _render(caller)
    caller.wait_warm()
    for minutes in ("7", "13"):
        here = tmp_path / f"in-{minutes}"
        here.mkdir()
        (here / "p.yaml").write_text(f"command: echo from {minutes}\n")
        # a relative path from the caller's directory, and an SBATCH_* default from its
        # environment (docs/batch-scripts.md: the user's SBATCH_* are a request's defaults)
        argv = ("render", "command", "--params-file", "p.yaml")
        warm = caller.run(*argv, cwd=here, SBATCH_TIMELIMIT=minutes)
        cold = caller.run(*argv, cwd=here, SBATCH_TIMELIMIT=minutes, JOBSMITH_WARM="0")
        assert (warm.how, cold.how) == ("warm", "cold")
        assert f"echo from {minutes}".encode() in warm.out
        assert f"--time=00:{int(minutes):02d}:00".encode() in warm.out, warm.out
        assert warm.seen() == cold.seen()


@pytest.mark.parametrize(
    "args",
    [
        ("render", "no-such-template"),  # a usage error: one line, exit 2
        ("render", "command", "-P", "command=echo \udcff\udcfe"),  # bytes that are not UTF-8
        ("status", "not-a-job-id"),
        ("wait", "not-a-job-id", "--timeout", "5"),
        ("plan", "check", "no-such-plan.yaml"),
        ("submit", "--help"),
    ],
)
def test_errors_exit_statuses_and_odd_bytes_are_the_same_warm(
    caller: Caller, args: tuple[str, ...]
) -> None:
    _render(caller)
    caller.wait_warm()
    warm = caller.run(*args)
    cold = caller.run(*args, JOBSMITH_WARM="0")
    assert (warm.how, cold.how) == ("warm", "cold")
    assert warm.seen() == cold.seen()


def test_a_caller_under_other_resource_limits_is_not_served_by_the_warm_process(
    caller: Caller,
) -> None:
    _render(caller)
    caller.wait_warm()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lower = min(soft, 512) - 1

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (lower, hard))

    caller.probe.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CALLER, "render", "command", "-P", "command=echo hi"],
        env=caller.env,
        preexec_fn=limited,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.communicate(timeout=120)
    # a job inherits its submitter's limits (PropagateResourceLimits): a warm process
    # started under others must not submit for this caller
    assert proc.returncode == 0 and caller.probe.read_text().strip() == "cold"


def test_a_warm_process_whose_code_changed_declines_and_ends(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(REPO / "src" / "jobsmith", copy / "jobsmith", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    c = Caller(tmp_path, pythonpath=str(copy))
    try:
        assert _render(c).how == "cold"
        c.wait_warm()
        assert _render(c).how == "warm"
        (old,) = c.warm_pids()
        module = copy / "jobsmith" / "job_templates" / "render.py"
        os.utime(module, ns=(time.time_ns(), time.time_ns()))  # as an upgrade would
        again = _render(c)
        assert again.how == "cold" and again.code == 0  # declined: run here, not lost
        _until_gone(old, "the stale warm process did not end")
    finally:
        c.stop()


def _slow_slurm(tmp_path: Path) -> tuple[Path, Path]:
    """A directory of sacct and squeue that write their parent's pid (the process running
    the command) to a marker and then hang; returns the directory and the marker."""
    slow = tmp_path / "bin"
    slow.mkdir()
    marker = tmp_path / "asked"
    for name in ("sacct", "squeue"):
        (slow / name).write_text(f'#!/bin/sh\necho $PPID > "{marker}"\nexec sleep 60\n')
        (slow / name).chmod(0o755)
    return slow, marker


def _runner(marker: Path, proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return int(marker.read_text())


def test_a_long_warm_command_does_not_keep_the_next_warm_process_from_starting(
    caller: Caller, tmp_path: Path
) -> None:
    slow, marker = _slow_slurm(tmp_path)
    _render(caller)
    caller.wait_warm()
    (first,) = caller.warm_pids()
    waiting = caller.popen("status", "4242", PATH=f"{slow}:{caller.env['PATH']}")
    try:
        runner = _runner(marker, waiting)
        assert runner != waiting.pid  # the warm child runs it, and still does
        os.kill(first, signal.SIGTERM)
        _until_gone(first, "the warm process did not end on SIGTERM")
        assert _render(caller).how == "cold"
        caller.wait_warm()  # a new one, though the child of the old one still runs
        assert caller.warm_pids() != [first] and _alive(runner)
        assert _render(caller).how == "warm"
    finally:
        waiting.send_signal(signal.SIGINT)
        waiting.communicate(timeout=30)


def test_ctrl_c_at_the_caller_reaches_the_warm_command(caller: Caller, tmp_path: Path) -> None:
    """SIGINT to the caller (what a terminal sends on Ctrl-C) is relayed to the child that
    runs the command: it ends, as a cold process would, and the caller with it."""
    slow, marker = _slow_slurm(tmp_path)
    path = f"{slow}:{caller.env['PATH']}"
    _render(caller)
    caller.wait_warm()
    outcomes = []
    for warm in ("1", "0"):
        marker.unlink(missing_ok=True)
        caller.probe.unlink(missing_ok=True)
        proc = caller.popen("status", "4242", PATH=path, JOBSMITH_WARM=warm)
        runner = _runner(marker, proc)  # the process that runs the command
        assert (runner != proc.pid) == (warm == "1")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        if runner != proc.pid:
            _until_gone(runner, "the warm child did not end on the relayed SIGINT")
        outcomes.append((proc.returncode, caller.probe.read_text().strip()))
    assert outcomes[0][1] == "warm" and outcomes[1][1] == "cold"
    assert outcomes[0][0] == outcomes[1][0] != 0, outcomes


def test_the_warm_process_imports_all_a_submit_imports_with_slurm_double(tmp_path: Path) -> None:
    """A module a submit needs but the warm process did not import costs every warm
    submit its import again: the list (warmserver.WARMED) must cover it."""
    from test_submit_imports_with_slurm_double import SUBMIT

    from jobsmith.agent.faces.warmserver import WARMED

    (tmp_path / "config").mkdir()
    write_user_site(tmp_path / "config", tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", SUBMIT, str(tmp_path), str(LAB_SITE)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported = set(json.loads(out.stdout.strip().splitlines()[-1])["modules"])
    covered = {p for name in WARMED for p in _and_parents(name)}
    assert "jobsmith.agent.runtime.submission.executor" in imported  # the probe works
    assert sorted(imported - covered) == []


def _and_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["submit", "x"], "submit"),
        (["--site", "s.yaml", "status"], "status"),
        (["--site=s.yaml", "render", "command"], "render"),
        (["--site"], None),
        (["--version"], "--version"),
        ([], None),
    ],
)
def test_the_command_is_found_past_the_root_option(argv: list[str], command: str | None) -> None:
    from jobsmith.agent.faces.warm import command_of

    assert command_of(argv) == command


def test_a_run_measured_by_coverage_stays_cold(caller: Caller) -> None:
    """A child forked from a warm process would write the warm process's coverage data,
    not its own: scripts/test's measured subprocesses run cold (the suite's coverage
    figures mean what they say), this file's callers run without coverage."""
    _render(caller)
    caller.wait_warm()
    assert _render(caller, COVERAGE_PROCESS_CONFIG="{}").how == "cold"


def test_a_signal_the_caller_ignores_is_ignored_warm_as_cold(
    caller: Caller, tmp_path: Path
) -> None:
    """A background job of a non-interactive shell ignores SIGINT (`cmd &`): warm, the
    caller does not relay it and the child ignores it too, as a cold process would."""
    slow, marker = _slow_slurm(tmp_path)
    path = f"{slow}:{caller.env['PATH']}"
    _render(caller)
    caller.wait_warm()
    outcomes = []
    for warm in ("1", "0"):
        marker.unlink(missing_ok=True)
        caller.probe.unlink(missing_ok=True)
        proc = caller.popen("status", "4242", PATH=path, JOBSMITH_WARM=warm, sigint=signal.SIG_IGN)
        runner = _runner(marker, proc)
        proc.send_signal(signal.SIGINT)
        os.kill(runner, signal.SIGINT)  # as `kill -INT` of the process running it would
        time.sleep(1.5)
        assert proc.poll() is None and _alive(runner), "SIGINT ended what ignores it"
        proc.send_signal(signal.SIGTERM)
        if runner != proc.pid:
            _until_gone(runner, "SIGTERM was not relayed")
        proc.communicate(timeout=30)
        outcomes.append(proc.returncode)
    # both end by the SIGTERM itself, as the shell sees it (128+15), not with a status
    assert outcomes == [-signal.SIGTERM, -signal.SIGTERM], outcomes


def test_it_is_on_unless_turned_off(caller: Caller) -> None:
    """On by default (the Caller sets no JOBSMITH_WARM); JOBSMITH_WARM=0 runs every command
    cold and leaves no warm process behind."""
    assert "JOBSMITH_WARM" not in caller.env
    assert _render(caller, JOBSMITH_WARM="0").how == "cold"
    time.sleep(1.0)
    assert _render(caller, JOBSMITH_WARM="0").how == "cold" and caller.warm_pids() == []
    assert _render(caller).how == "cold"
    caller.wait_warm()
    assert _render(caller).how == "warm"
    assert _render(caller, JOBSMITH_WARM="0").how == "cold"


def test_a_command_the_kernel_kills_ends_its_caller_by_the_same_signal(
    caller: Caller, tmp_path: Path
) -> None:
    """SIGKILL (the OOM killer's) to the process running the command: a cold caller dies
    by it; a warm one too, told by the warm process that reaped the child, not with an
    exit status (tests/test_plans.py's crash-safety tests tell the two apart)."""
    slow, marker = _slow_slurm(tmp_path)
    path = f"{slow}:{caller.env['PATH']}"
    _render(caller)
    caller.wait_warm()
    outcomes = []
    for warm in ("1", "0"):
        marker.unlink(missing_ok=True)
        caller.probe.unlink(missing_ok=True)
        proc = caller.popen("status", "4242", PATH=path, JOBSMITH_WARM=warm)
        runner = _runner(marker, proc)
        assert (runner != proc.pid) == (warm == "1")
        os.kill(runner, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        outcomes.append((proc.returncode, err))
    assert outcomes == [(-signal.SIGKILL, b"")] * 2, outcomes


def test_a_warm_process_past_its_idle_time_still_tells_how_its_last_command_ended(
    tmp_path: Path,
) -> None:
    """The warm process stops listening when idle (the socket goes, the lock is free for
    a new one) but ends only after its children: a long `wait` killed after that is still
    reported as killed."""
    c = Caller(tmp_path)
    c.env["JOBSMITH_WARM_IDLE_S"] = "3"
    slow, marker = _slow_slurm(tmp_path)
    try:
        _render(c)
        c.wait_warm()
        (server,) = c.warm_pids()
        proc = c.popen("status", "4242", PATH=f"{slow}:{c.env['PATH']}")
        runner = _runner(marker, proc)
        assert runner != proc.pid
        deadline = time.monotonic() + 30
        while list(c.warm_dir.glob("*.sock")):
            assert time.monotonic() < deadline, "the idle warm process kept listening"
            time.sleep(0.1)
        assert _alive(server) and proc.poll() is None
        os.kill(runner, signal.SIGKILL)
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        _until_gone(server, "the warm process did not end after its last child")
    finally:
        c.stop()


def test_a_warm_directory_too_deep_for_a_unix_socket_gives_way_to_tmps(tmp_path: Path) -> None:
    """A JOBSMITH_WARM_DIR (or XDG_RUNTIME_DIR) so deep that a socket's path in it would
    pass the 108 bytes a Unix socket's path may have: its warm process could never
    listen, so /tmp's directory is used instead; one just short enough is kept."""
    from jobsmith.agent.faces import warm

    fallback = Path("/tmp") / f"jobsmith-warm-{os.getuid()}"
    room = 107 - 1 - 29  # the socket's name: 24 hex digits and ".sock"
    fits = tmp_path / ("d" * (room - len(str(tmp_path)) - 1))
    assert len(str(fits)) == room
    assert warm.directory({"JOBSMITH_WARM_DIR": str(fits)}) == fits
    too_deep = Path(str(fits) + "x")
    assert warm.directory({"JOBSMITH_WARM_DIR": str(too_deep)}) == fallback
    assert not too_deep.exists()
    runtime = tmp_path / ("r" * (room - len(str(tmp_path))))
    assert warm.directory({"XDG_RUNTIME_DIR": str(runtime)}) == fallback

"""A remote command past its deadline (issue 12): the caller gets CommandTimedOut naming
it, and nothing of it keeps running on the login node, over both SSH transports.

Closing an SSH channel does not stop a command without a pty, so the command line runs
it under coreutils' `timeout` (adapters/ssh/command.py); these tests look for the
remote process itself on the login node (this machine on loopback) after the deadline.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from login_node import login_node, pids_matching
from sshd import Sshd, connected, kill_all, start_sshd

from jobsmith.adapters.ssh.command import GRACE_S, KILL_AFTER_S, CommandTimedOut, remote_command
from jobsmith.adapters.transport import Transport
from jobsmith.errors import SchedulerUnavailable


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(params=["paramiko", "openssh"])
def transport(request: pytest.FixtureRequest, sshd: Sshd, known_hosts: Path) -> Iterator[Transport]:
    with connected(request.param, sshd, known_hosts, "timeout") as t:
        yield t  # type: ignore[misc]


def running(pattern: str) -> list[int]:
    """pids of this user's processes on the login node whose whole command line is
    pattern (pgrep -x)."""
    return pids_matching(login_node(), pattern)


def gone_within(pattern: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while running(pattern):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_the_command_line_puts_the_deadline_on_the_login_node() -> None:
    line = run_part(posix(remote_command(["sleep", "60"], {}, timeout_s=2.5)))
    assert line.startswith(f"exec timeout -k {KILL_AFTER_S} {3 + GRACE_S} env -i ")
    assert run_part(posix(remote_command(["true"], {}))).startswith("exec env -i ")


def run_part(line: str) -> str:
    """The POSIX line past the environment rule's snippet (adapters/environment_rule.py)."""
    tools, run = line.split("; exec ", 1)
    assert tools.startswith("command -v env ") and "; set --; " in tools  # tools, then rule
    return f"exec {run}"


def posix(line: str) -> str:
    """The POSIX line inside command.any_shell's wrapping."""
    found = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", line)
    assert found, line
    return base64.b64decode(found[1]).decode()


@pytest.mark.parametrize(
    ("argv", "pattern", "within"),
    [
        (["sleep", "60.{n}"], "sleep 60.{n}", 2 + GRACE_S + 3),
        # a command that ignores SIGTERM gets SIGKILL, its children with it
        (
            ["sh", "-c", "trap '' TERM; sleep 61.{n}; true"],
            "sleep 61.{n}",
            2 + GRACE_S + KILL_AFTER_S + 3,
        ),
    ],
    ids=["sleep", "ignores-TERM"],
)
def test_a_command_past_its_deadline_leaves_nothing_running(
    transport: Transport, argv: list[str], pattern: str, within: float
) -> None:
    # a number of this test's own: the other transport's run of it may be on another
    # worker at the same time, and must be neither seen nor killed here
    n = f"{os.getpid()}{secrets.randbelow(10**6):06d}"
    argv = [a.replace("{n}", n) for a in argv]
    pattern = pattern.replace("{n}", n)
    assert not running(pattern), f"a {pattern!r} of this user is already running"
    started = time.monotonic()
    try:
        with pytest.raises(CommandTimedOut) as timed_out:
            transport.run(argv, timeout=2)
        assert time.monotonic() - started < 6
        assert isinstance(timed_out.value, SchedulerUnavailable)  # retryable, as before
        assert timed_out.value.argv == tuple(argv) and timed_out.value.timeout_s == 2
        assert f"{' '.join(argv[:2])} on " in str(timed_out.value)
        assert "within 2s" in str(timed_out.value)
        assert gone_within(pattern, within), f"{pattern!r} still runs on the login node"
    finally:
        kill_all(running(pattern))

"""tcsh as the remote login shell (issue 12): the command line reaches the program with
exactly the argv given, hostile words included, over both SSH transports.

sshd runs a client's command line with the user's login shell (`SHELL -c LINE`); tcsh
quotes differently from sh (no newline inside quotes; `!`, `${X+...}`), so a POSIX line
would break there. tests/sshd.py's `login_shell` plays a tcsh user without root (an
unprivileged sshd cannot log in another user).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from login_node import login_node
from sshd import HOSTILE_ENV, Sshd, connected, start_sshd
from test_ssh_transport import HOST, HOSTILE_WORDS

from jobsmith.adapters.transport import Transport

TCSH = shutil.which("tcsh") or "/usr/bin/tcsh"
#: HOSTILE_WORDS plus what tcsh alone treats specially
TCSH_WORDS = [*HOSTILE_WORDS, "!", "!!", "a!b", "!$", "~", "${HOME+x}", "$?", "'\n'", "a\\\nb"]
ARGV_PRINTER = "import json, sys; print(json.dumps(sys.argv[1:]))"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if login_node().run(["test", "-x", TCSH]).returncode != 0:
        pytest.fail(f"{TCSH} missing on the login node: scripts/setup installs Debian's tcsh")
    server = start_sshd(tmp_path_factory.mktemp("sshd"), login_shell=TCSH)
    yield server
    server.stop()


@pytest.fixture(params=["paramiko", "openssh"])
def transport(request: pytest.FixtureRequest, sshd: Sshd, known_hosts: Path) -> Iterator[Transport]:
    with connected(request.param, sshd, known_hosts, "tcsh") as t:
        yield t  # type: ignore[misc]


def test_the_login_shell_is_tcsh(sshd: Sshd, known_hosts: Path) -> None:
    """The fixture is what it claims: a line sent is read by tcsh ($version is tcsh's),
    where a line of sh's syntax (the POSIX line unwrapped) fails."""

    def ssh(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", "-i", str(sshd.client_key), "-o", "IdentitiesOnly=yes", "-o",
             "BatchMode=yes", "-o", f"UserKnownHostsFile={known_hosts}", "-p", str(sshd.port),
             HOST, line],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    assert ssh("echo $version").stdout.startswith("tcsh ")
    posix = ssh('exec env -i ${HOME+"HOME=$HOME"} true')
    assert posix.returncode != 0 and "Missing" in posix.stderr


def test_hostile_arguments_arrive_as_exactly_that_argv(transport: Transport) -> None:
    res = transport.run(["python3", "-c", ARGV_PRINTER, *TCSH_WORDS], timeout=30)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == TCSH_WORDS


def test_the_login_environment_stays_out_and_stdin_comes_through(transport: Transport) -> None:
    res = transport.run(["env"], timeout=30, env={"SLURM_TIME_FORMAT": "it's $x!"})
    seen = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert not set(HOSTILE_ENV) - {"LANG"} & set(seen)
    assert seen["SLURM_TIME_FORMAT"] == "it's $x!" and seen["HOME"] == os.environ["HOME"]
    res = transport.run(["sh", "-c", "cat; exit 3"], timeout=30, stdin="a\n!b\n")
    assert (res.returncode, res.stdout) == (3, "a\n!b\n")

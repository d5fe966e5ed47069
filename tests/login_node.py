"""Where the SSH tests' login node is: this machine (loopback), or a cluster of its own.

The loopback sshd shares the laptop's filesystem and /proc, so a test passes even where
jobsmith still does something locally that only the login node can do (issue 29). The
laptop stage (`scripts/slurm-other laptop-test`) runs the same tests against a cluster in
a Debian root of its own: its Slurm, its sshd and its files, reached from this machine
over a veth pair only, while this machine's Slurm commands are masked by stubs that log
and fail. The stage says where the cluster is in JOBSMITH_LAPTOP_CLUSTER, a JSON file:
host, port, user, key (for the cluster's own sshd), known_hosts, calls (the stubs' log),
jobsmith_bin (the cluster's jobsmith) and release.

A test does on the login node what a person would do there (start an sshd of its own, look
for a process, write a file) through `LoginNode`; with loopback that is this machine.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: the variable the laptop stage sets; unset, the login node is this machine
CLUSTER_ENV = "JOBSMITH_LAPTOP_CLUSTER"
LOOPBACK = "127.0.0.1"


class LoginNode(Protocol):
    """The machine the test's sshd runs on, as a shell there sees it."""

    #: the address the laptop reaches the login node's sshd at
    address: str
    #: the directory of the jobsmith installed on the login node
    jobsmith_bin: Path

    def run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """argv run there as the test's user (not checked: the caller reads returncode)."""
        ...


@dataclass(frozen=True)
class ThisMachine:
    """Loopback: the login node is the laptop itself."""

    address: str = LOOPBACK
    jobsmith_bin: Path = Path(sys.executable).parent

    def run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


@dataclass(frozen=True)
class Cluster:
    """The laptop stage's cluster, reached with the system's ssh over one master per
    process (the cluster's own sshd on `port`, not any sshd a test starts there)."""

    address: str
    port: int
    user: str
    key: Path
    known_hosts: Path
    calls: Path
    jobsmith_bin: Path
    release: str

    def ssh_options(self) -> list[str]:
        """Options for the system's ssh to the cluster's own sshd (BatchMode: no prompt)."""
        return [
            "-i", str(self.key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "ControlMaster=auto", "-o", f"ControlPath=/tmp/js-node-{os.getpid()}-%C",
            "-o", "ControlPersist=60", "-p", str(self.port), "-l", self.user,
        ]  # fmt: skip

    def run(self, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ssh", *self.ssh_options(), self.address, shlex.join(argv)],
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=60,
        )

    def slurm_calls_here(self) -> list[str]:
        """What the laptop's masked Slurm commands were asked to do (each one failed)."""
        return self.calls.read_text().splitlines() if self.calls.exists() else []


def login_node(environ: Mapping[str, str] = os.environ) -> ThisMachine | Cluster:
    """The login node the laptop stage named, or this machine."""
    where = environ.get(CLUSTER_ENV)
    if not where:
        return ThisMachine()
    d = json.loads(Path(where).read_text())
    return Cluster(
        address=d["host"],
        port=int(d["port"]),
        user=d["user"],
        key=Path(d["key"]),
        known_hosts=Path(d["known_hosts"]),
        calls=Path(d["calls"]),
        jobsmith_bin=Path(d["jobsmith_bin"]),
        release=d["release"],
    )


def checked(node: LoginNode, argv: list[str], stdin: str | None = None) -> str:
    """argv's stdout on the node; a failure raises, naming the command and its stderr."""
    res = node.run(argv, stdin)
    if res.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(argv)} on {node.address}: exit {res.returncode}, {res.stderr}"
        )
    return res.stdout


def write_file(node: LoginNode, path: Path, text: str, mode: int = 0o644) -> None:
    """path on the node holds text (its directory made if needed)."""
    checked(node, ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat >"$1" && chmod "$2" "$1"',
                   "sh", str(path), f"{mode:o}"], stdin=text)  # fmt: skip


def read_file(node: LoginNode, path: Path) -> str | None:
    """path's text on the node, or None when it is not there."""
    res = node.run(["cat", str(path)])
    return res.stdout if res.returncode == 0 else None


def make_dirs(node: LoginNode, path: Path) -> None:
    """mkdir -p path on the node (a directory the job's side must have too)."""
    checked(node, ["mkdir", "-p", str(path)])


def pids_matching(node: LoginNode, pattern: str) -> list[int]:
    """The test user's processes on the node whose whole command line is pattern."""
    res = node.run(["sh", "-c", 'pgrep -u "$(id -u)" -fx "$1" || true', "sh", pattern])
    return [int(p) for p in res.stdout.split()]


def kill_pids(node: LoginNode, pids: list[int]) -> None:
    """SIGKILL each of pids on the node (the test's own leftovers, by id)."""
    if pids:
        node.run(["kill", "-KILL", *map(str, pids)])

"""The OpenSSH transport (issue 12): the system's `ssh` over a ControlMaster connection
opened once, against the real sshd of tests/sshd.py (on loopback, or on the laptop stage's
cluster), and on the lab cluster.

What is proved: hostile arguments arrive exactly as given and the remote login
environment's SBATCH_* never reaches Slurm (the same command line as over paramiko);
exit status, stderr and stdin come back; every command rides the one master (the server
counts one login for any number of commands); with no master, a command fails at once
(no prompt) naming the command that opens one; a command past its deadline is cut and
named; and a laptop without Slurm submits, watches, waits and reads logs through it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_cli import write_user_site
from login_node import login_node, make_dirs
from sshd import Sshd, close_master, open_master, start_sshd
from test_ssh_transport import HOST, HOSTILE_WORDS, jobsmith, laptop_env, remote_site

from jobsmith.adapters.ssh.openssh import OpenSshTransport
from jobsmith.errors import SchedulerUnavailable
from jobsmith.site_config.model import SchedulerAccess


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def master(sshd: Sshd, known_hosts: Path, tmp_path: Path) -> Iterator[Path]:
    # a short path: a unix socket's name is at most 107 bytes
    socket = Path(f"/tmp/js-cm-{os.getpid()}-{tmp_path.name[-12:]}.sock")
    open_master(sshd, known_hosts, socket)
    yield socket
    close_master(socket, sshd.port)


@pytest.fixture
def transport(sshd: Sshd, known_hosts: Path, master: Path) -> OpenSshTransport:
    return OpenSshTransport(HOST, control_path=master, port=sshd.port, known_hosts=known_hosts)


def test_hostile_arguments_arrive_exactly_as_given(transport: OpenSshTransport) -> None:
    res = transport.run(["printf", r"%s\n", *HOSTILE_WORDS], timeout=20)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "".join(f"{w}\n" for w in HOSTILE_WORDS)


def test_the_remote_login_environment_does_not_reach_the_command(
    transport: OpenSshTransport,
) -> None:
    res = transport.run(["env"], timeout=20, env={"SLURM_TIME_FORMAT": "standard"})
    seen = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    assert "SBATCH_PARTITION" not in seen and "JOBSMITH_TEST_LEAK" not in seen
    assert seen["SLURM_TIME_FORMAT"] == "standard" and seen["LANG"] == "C.UTF-8"


def test_exit_status_stderr_and_stdin_come_back(transport: OpenSshTransport) -> None:
    res = transport.run(["sh", "-c", "cat; echo oops >&2; exit 3"], timeout=20, stdin="a\nb\n")
    assert (res.returncode, res.stdout, res.stderr) == (3, "a\nb\n", "oops\n")


def test_every_command_rides_the_one_master(sshd: Sshd, known_hosts: Path, tmp_path: Path) -> None:
    socket = Path(f"/tmp/js-cm-{os.getpid()}-rides.sock")
    before = sshd.logins()
    open_master(sshd, known_hosts, socket)
    try:
        t = OpenSshTransport(HOST, control_path=socket, port=sshd.port, known_hosts=known_hosts)
        for i in range(8):
            assert t.run(["echo", str(i)], timeout=20).stdout == f"{i}\n"
        assert sshd.logins() - before == 1  # the master's login; the commands made none
    finally:
        close_master(socket, sshd.port)


def test_without_a_master_a_command_fails_at_once_naming_how_to_open_one(
    sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> None:
    socket = tmp_path / "none.sock"
    t = OpenSshTransport(HOST, control_path=socket, port=sshd.port, known_hosts=known_hosts)
    started = time.monotonic()
    with pytest.raises(SchedulerUnavailable) as err:
        t.run(["true"], timeout=20)
    assert time.monotonic() - started < 5
    said = str(err.value)
    assert f"ssh -M -S {socket} -o ControlPersist=yes -fN -p {sshd.port}" in said
    assert "second factor" in said


def test_a_dead_master_is_the_same_clear_error(sshd: Sshd, known_hosts: Path, master: Path) -> None:
    t = OpenSshTransport(HOST, control_path=master, port=sshd.port, known_hosts=known_hosts)
    close_master(master, sshd.port)
    # `ssh -O exit` returns before the master has removed its socket: wait for that, or
    # the master's own clean-up removes the stale file this test puts there
    deadline = time.monotonic() + 10
    while master.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not master.exists()
    master.touch()  # a stale socket file left behind (a crash, a reboot)
    with pytest.raises(SchedulerUnavailable, match="open it once with"):
        t.run(["true"], timeout=20)
    assert master.exists()  # the stale file was there when the command ran
    master.unlink()


def test_a_command_past_its_deadline_is_cut_and_named(transport: OpenSshTransport) -> None:
    started = time.monotonic()
    with pytest.raises(SchedulerUnavailable, match=r"sleep 30 on .* gave no answer within 1s"):
        transport.run(["sleep", "30"], timeout=1)
    assert time.monotonic() - started < 10


def test_the_site_config_takes_openssh_with_a_host_and_a_socket() -> None:
    access = SchedulerAccess.model_validate(
        {"kind": "openssh", "host": "login1", "control_path": "/tmp/cm.sock"}
    )
    assert access.control_path == Path("/tmp/cm.sock")
    for bad, said in (
        ({"kind": "openssh"}, "kind 'openssh' needs host"),
        ({"kind": "openssh", "host": "h", "key_file": "/k"}, "key_file applies to kind 'ssh'"),
        ({"kind": "ssh", "host": "h", "control_path": "/s"}, "control_path applies only"),
        ({"control_path": "/s"}, "control_path applies only to a remote kind"),
    ):
        with pytest.raises(ValueError, match=said):
            SchedulerAccess.model_validate(bad)


@pytest.mark.usefixtures("lab_cluster")
def test_a_laptop_submits_watches_and_reads_logs_over_the_master(
    sshd: Sshd, known_hosts: Path, master: Path, tmp_path: Path, workdir: Path
) -> None:
    paramiko_site = remote_site(tmp_path, sshd, known_hosts).read_text()
    site = tmp_path / "openssh.yaml"
    site.write_text(
        paramiko_site.replace("  kind: ssh\n", "  kind: openssh\n").replace(
            f"  key_file: {sshd.client_key}\n", f"  control_path: {master}\n"
        )
    )
    env = laptop_env(tmp_path / "home")
    ssh_only = tmp_path / "ssh-bin"  # the laptop has ssh, and no Slurm command
    ssh_only.mkdir()
    (ssh_only / "ssh").symlink_to(shutil.which("ssh") or "/usr/bin/ssh")
    env["PATH"] += f":{ssh_only}"
    write_user_site(tmp_path / "home" / "config", workdir)
    logs = str(workdir / "logs")
    make_dirs(login_node(), workdir / "logs")  # the job's directories, there too (issue 29)
    logins = sshd.logins()

    def run(*args: str) -> str:
        res = jobsmith(env, workdir, site, *args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        return str(res.stdout)

    job_id = run("submit", "command", "-P", "command=echo over the master", "--log-dir", logs)
    job_id = job_id.strip()
    assert job_id.isdigit()
    cycle = json.loads(run("watch", "--once", "--json"))
    assert cycle["scheduler_ok"] is True and cycle["watched"] == 1, cycle
    run("wait", job_id, "--timeout", "120")
    out = json.loads(run("logs", job_id, "--json"))
    assert out["lines"] == ["over the master"]
    assert sshd.logins() == logins  # four commands, not one new login among them

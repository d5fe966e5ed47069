"""The SSH transport (issue 12, first slice) against a real OpenSSH server on loopback.

tests/sshd.py starts an unprivileged sshd as the test user, with its own host key and an
authorized key made for the test. The pure tests need only that server; the lab test
runs the jobsmith CLI with no Slurm command on its PATH, so every sbatch, squeue, sacct
and cat goes through sshd to the lab cluster, as from a laptop.

On loopback the "laptop" and the login node share one filesystem: what jobsmith still
does locally (creating the log directory, checking input paths) is not caught there. The
laptop stage (tests/login_node.py) runs the same tests against a cluster of its own, with
this machine's Slurm commands masked.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from lab_cli import LAB_SITE, write_user_site
from login_node import ThisMachine, checked, login_node, make_dirs
from pydantic import ValidationError
from scripted_transport import ScriptedTransport
from sshd import HOSTILE_ENV, Sshd, keygen, kill_all, pids_running, start_sshd

from jobsmith.adapters.environment_rule import JobEnvironmentRule
from jobsmith.adapters.login_tools import WHAT, ToolMissing
from jobsmith.adapters.ssh.command import remote_command
from jobsmith.adapters.ssh.hostkeys import HostKeyRefused
from jobsmith.adapters.ssh.transport import LoginRefused, ParamikoTransport
from jobsmith.errors import SchedulerUnavailable
from jobsmith.site_config.model import SchedulerAccess

VENV_BIN = Path(sys.executable).parent
HOST = login_node().address


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """One server for the module; tests that drop connections kill only its children."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def transport(sshd: Sshd, known_hosts: Path) -> Iterator[ParamikoTransport]:
    """A transport to the test server, closed after the test."""
    t = ParamikoTransport(HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts)
    yield t
    t.close()


def host_fingerprint(pub: Path) -> str:
    """ssh-keygen's own SHA256 fingerprint of a public key file."""
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True)
    return out.stdout.split()[1]


# --- the command line ---------------------------------------------------------------------

HOSTILE_WORDS = [
    "two words",
    "it's",
    'say "hi"',
    "$(touch pwned)",
    "`id`",
    "$HOME ${PATH}",
    "line\nbreak",
    "semi; rm -rf ~",
    "*",
    "",
    "-n",
    "back\\slash",
    "tab\there",
    "ünïcødé",
]


def test_hostile_arguments_arrive_exactly_as_given(transport: ParamikoTransport) -> None:
    res = transport.run(["printf", r"%s\n", *HOSTILE_WORDS], timeout=20)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "".join(f"{w}\n" for w in HOSTILE_WORDS)


def test_exit_status_stderr_and_stdin_come_back(transport: ParamikoTransport) -> None:
    res = transport.run(["sh", "-c", "cat; echo oops >&2; exit 3"], timeout=20, stdin="a\nb\n")
    assert (res.returncode, res.stdout, res.stderr) == (3, "a\nb\n", "oops\n")
    bad = transport.run(["printf", r"\377ok"], timeout=20)
    assert bad.stdout == "\ufffdok"  # adapters.transport.decode, as locally


def test_program_names_env_would_misread_are_refused() -> None:
    with pytest.raises(ValueError, match="holds '='"):
        remote_command(["A=b", "sh"], {})
    with pytest.raises(ValueError, match="not environment variable names"):
        remote_command(["true"], {"X; rm -rf ~": "1"})


# --- one connection -----------------------------------------------------------------------


def test_many_commands_share_one_connection(sshd: Sshd, known_hosts: Path) -> None:
    before = sshd.logins()
    t = ParamikoTransport(HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known_hosts)
    try:
        results = [t.run(["echo", str(i)], timeout=20).stdout for i in range(25)]
    finally:
        t.close()
    assert results == [f"{i}\n" for i in range(25)]
    assert sshd.logins() - before == 1


def test_a_command_past_its_timeout_is_unavailable_naming_the_host(
    transport: ParamikoTransport, sshd: Sshd
) -> None:
    argv = ["sleep", "7.231"]
    try:
        started = time.monotonic()
        with pytest.raises(
            SchedulerUnavailable, match=rf"sleep 7\.231 on {re.escape(HOST)} .*0\.5s"
        ):
            transport.run(argv, timeout=0.5)
        assert time.monotonic() - started < 3
    finally:
        kill_all(pids_running(argv))
    before = sshd.logins()
    assert transport.run(["true"], timeout=20).returncode == 0  # the connection still serves
    assert sshd.logins() == before


def test_a_connection_dropped_mid_command_is_unavailable_then_reconnects(
    transport: ParamikoTransport, sshd: Sshd
) -> None:
    argv = ["sleep", "29.517"]
    assert transport.run(["true"], timeout=20).returncode == 0
    before = sshd.logins()
    caught: list[BaseException] = []
    runner = threading.Thread(target=_run_catching, args=(transport, argv, caught))
    runner.start()
    try:
        _wait_for(lambda: pids_running(argv), "the remote sleep to start")
        kill_all(sshd.session_pids())  # the server side of the connection dies
        runner.join(timeout=10)
        assert not runner.is_alive(), "the transport did not notice the lost connection"
    finally:
        kill_all(pids_running(argv))
    assert len(caught) == 1 and isinstance(caught[0], SchedulerUnavailable), caught
    assert f"connection to alice@{HOST}" in str(caught[0]) and "lost" in str(caught[0])
    assert transport.run(["echo", "back"], timeout=20).stdout == "back\n"
    assert sshd.logins() == before + 1


@pytest.mark.parametrize("noticed", [True, False], ids=["noticed", "not-noticed-yet"])
def test_a_connection_that_died_idle_is_reopened_without_an_error(
    transport: ParamikoTransport, sshd: Sshd, monkeypatch: pytest.MonkeyPatch, noticed: bool
) -> None:
    assert transport.run(["true"], timeout=20).returncode == 0
    before = sshd.logins()
    if not noticed:  # paramiko has not read the close yet: only opening a channel fails
        monkeypatch.setattr(paramiko.Transport, "is_active", lambda self: True)
    kill_all(sshd.session_pids())
    time.sleep(0.3)
    assert transport.run(["echo", "again"], timeout=20).stdout == "again\n"
    assert sshd.logins() == before + 1


def _run_catching(transport: ParamikoTransport, argv: list[str], caught: list[Any]) -> None:
    try:
        transport.run(argv, timeout=60)
    except BaseException as exc:  # handed to the test's thread, which checks it
        caught.append(exc)


def _wait_for(found: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not found():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


# --- host keys and login ------------------------------------------------------------------


def test_an_unknown_host_is_refused_with_its_fingerprint_and_how_to_accept_it(
    sshd: Sshd, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"  # missing: an unknown host as well
    before = sshd.logins()
    t = ParamikoTransport(HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known)
    with pytest.raises(HostKeyRefused) as refused:
        t.run(["true"], timeout=20)
    message = str(refused.value)
    assert refused.value.exit_code == 2
    assert host_fingerprint(sshd.root / "host_key.pub") in message
    accept = f"ssh-keyscan -p {sshd.port} {HOST} >> {known}"
    assert message.endswith(accept)
    assert sshd.logins() == before  # refused before any key was offered
    subprocess.run(accept, shell=True, check=True, capture_output=True)  # what it says works
    assert t.run(["echo", "ok"], timeout=20).stdout == "ok\n"
    t.close()


def test_a_changed_host_key_is_refused_with_both_fingerprints(sshd: Sshd, tmp_path: Path) -> None:
    impostor = keygen(tmp_path / "old_host_key")
    old = (tmp_path / "old_host_key.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[{HOST}]:{sshd.port} {' '.join(old)}\n")
    t = ParamikoTransport(HOST, port=sshd.port, key_file=sshd.client_key, known_hosts=known)
    with pytest.raises(HostKeyRefused, match="CHANGED") as refused:
        t.run(["true"], timeout=20)
    message = str(refused.value)
    assert host_fingerprint(impostor.with_suffix(".pub")) in message
    assert host_fingerprint(sshd.root / "host_key.pub") in message
    assert f"ssh-keygen -R '[{HOST}]:{sshd.port}' -f {known}" in message


def test_a_key_the_server_does_not_accept_is_a_refused_login(
    sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> None:
    stranger = keygen(tmp_path / "stranger")
    t = ParamikoTransport(HOST, port=sshd.port, key_file=stranger, known_hosts=known_hosts)
    with pytest.raises(LoginRefused, match=f"refused the login with the key {stranger}"):
        t.run(["true"], timeout=20)


def test_nothing_listening_is_unavailable_naming_the_host(known_hosts: Path) -> None:
    from sshd import free_port

    port = free_port()
    t = ParamikoTransport(HOST, port=port, known_hosts=known_hosts)
    with pytest.raises(SchedulerUnavailable, match=f"login node alice@{HOST}:{port}"):
        t.run(["true"], timeout=5)


# --- ~/.ssh/config --------------------------------------------------------------------------


def test_an_alias_of_the_users_ssh_config_is_followed(
    sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> None:
    """The site names `hpc`; the user's ~/.ssh/config says where and how it is."""
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host hpc\n  HostName {HOST}\n  Port {sshd.port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {sshd.client_key}\n"
    )
    t = ParamikoTransport("hpc", known_hosts=known_hosts, ssh_config=config)
    assert t.where == f"{getpass.getuser()}@{HOST}:{sshd.port}"
    assert t.run(["echo", "through the alias"], timeout=20).stdout == "through the alias\n"
    t.close()


def test_the_sites_explicit_settings_win_over_the_ssh_config(tmp_path: Path) -> None:
    from jobsmith.adapters.ssh.sshconfig import resolve

    key = tmp_path / "site_key"
    key.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text("Host hpc\n  HostName login.example\n  Port 2222\n  User fromfile\n")
    found = resolve("hpc", port=22, user=None, key_file=None, config=config)
    assert (found.hostname, found.port, found.user) == ("login.example", 2222, "fromfile")
    mine = resolve("hpc", port=2200, user="me", key_file=key, config=config)
    assert (mine.port, mine.user, mine.identity_files) == (2200, "me", (key,))
    nothing = resolve("other", port=22, user=None, key_file=None, config=tmp_path / "none")
    assert (nothing.hostname, nothing.port, nothing.user) == ("other", 22, None)


def _jump_config(path: Path, target: Sshd, jump_port: int, jump_extra: str = "") -> Path:
    """~/.ssh/config: `hpc` is the target, reached through `bastion` (ProxyJump)."""
    me, key = getpass.getuser(), target.client_key
    path.write_text(
        f"Host hpc\n  HostName {HOST}\n  Port {target.port}\n  User {me}\n"
        f"  IdentityFile {key}\n  ProxyJump bastion\n"
        f"Host bastion\n  HostName {HOST}\n  Port {jump_port}\n  User {me}\n"
        f"  IdentityFile {key}\n{jump_extra}"
    )
    return path


def test_a_proxyjump_is_followed_through_the_jump_host(
    sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> None:
    """The login node reached through a jump host (here the same sshd: it forwards to
    itself), each host's key checked in known_hosts."""
    config = _jump_config(tmp_path / "ssh_config", sshd, sshd.port)
    t = ParamikoTransport("hpc", known_hosts=known_hosts, ssh_config=config)
    logins = sshd.logins()
    assert t.run(["echo", "through the jump"], timeout=20).stdout == "through the jump\n"
    assert t.run(["echo", "again"], timeout=20).stdout == "again\n"  # the same connection
    assert sshd.logins() == logins + 2  # jump, then hpc
    t.close()


def test_a_jump_host_that_forwards_nothing_is_named_in_the_error(
    sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> None:
    """Proof the jump is used: a jump host that allows no forwarding stops the login."""
    closed = start_sshd(
        tmp_path / "jump", extra_config="AllowTcpForwarding no\n", client_key=sshd.client_key
    )
    try:
        hosts = tmp_path / "known_hosts_both"
        hosts.write_text(known_hosts.read_text() + closed.known_hosts_line())
        config = _jump_config(tmp_path / "ssh_config", sshd, closed.port)
        t = ParamikoTransport("hpc", known_hosts=hosts, ssh_config=config)
        via = f"through the jump host {getpass.getuser()}@{HOST}:{closed.port} \\(ProxyJump\\)"
        with pytest.raises(SchedulerUnavailable, match=via):
            t.run(["true"], timeout=10)
    finally:
        closed.stop()


def test_proxycommand_and_a_jump_through_a_jump_are_refused_naming_openssh(
    tmp_path: Path,
) -> None:
    from jobsmith.errors import ConfigError

    config = tmp_path / "ssh_config"
    config.write_text("Host hpc\n  HostName login.example\n  ProxyCommand nc %h %p\n")
    with pytest.raises(ConfigError, match=r"proxycommand \(nc login.example 22\).*kind: openssh"):
        ParamikoTransport("hpc", ssh_config=config)
    config.write_text("Host hpc\n  ProxyJump bastion\nHost bastion\n  ProxyJump outer.example\n")
    with pytest.raises(ConfigError, match=r"host bastion goes through proxyjump"):
        ParamikoTransport("hpc", ssh_config=config)
    config.write_text("Host hpc\n  HostName login.example\n  ProxyJump none\n")
    assert ParamikoTransport("hpc", ssh_config=config).where.endswith("@login.example:22")


# --- the remote environment ---------------------------------------------------------------


def test_the_remote_environment_is_the_allowlist_plus_the_given_variables(
    transport: ParamikoTransport, sshd: Sshd, known_hosts: Path
) -> None:
    # control: a plain session on this server does get the hostile variables
    assert _plain_session_env(sshd, known_hosts)["SBATCH_PARTITION"] == "high"
    given = {"SLURM_TIME_FORMAT": "standard", "JOBSMITH_SUBMISSION": "job name; $(x)"}
    res = transport.run(["env", "-0"], timeout=20, env=given)
    env = dict(line.split("=", 1) for line in res.stdout.split("\0") if line)
    login = _plain_session_env(sshd, known_hosts)
    allowed = {name for name in login if JobEnvironmentRule().allows(name)}
    assert {"PATH", "HOME", "USER", "LOGNAME", "LANG"} <= allowed
    assert set(env) == allowed | set(given)
    assert not set(HOSTILE_ENV) - {"LANG"} & set(env)
    assert env["LANG"] == HOSTILE_ENV["LANG"]  # passed because the login environment has it
    assert env["HOME"] == str(Path.home()) and env["USER"] == "alice"
    assert {k: env[k] for k in given} == given


def test_secret_variables_given_are_not_sent(transport: ParamikoTransport) -> None:
    res = transport.run(["env"], timeout=20, env={"MY_API_KEY": "sk-1", "KEEP": "1"})
    assert "KEEP=1" in res.stdout and "sk-1" not in res.stdout


#: what every command over SSH runs on the login node besides itself (adapters/login_tools.py)
WRAPPER_TOOLS = ("base64", "env", "sed", "timeout")


def test_a_login_node_without_a_tool_every_command_needs_is_one_error_naming_it(
    tmp_path: Path,
) -> None:
    """A login PATH without base64 made every command run nothing and exit 0 (`eval` of
    an empty decoding): now each command checks first, and the transport raises
    ToolMissing (exit 2) naming the tool and the login node; never a silent success."""
    node = login_node()
    bin_dir = (
        tmp_path / "login-bin"
        if isinstance(node, ThisMachine)
        else Path(f"/tmp/js-login-bin-{uuid.uuid4().hex[:12]}")
    )
    link = 'mkdir -p "$1" && cd "$1" && shift && for t do ln -sf "$(command -v "$t")" .; done'
    checked(node, ["sh", "-c", link, "sh", str(bin_dir), "sh", *WRAPPER_TOOLS])
    server = start_sshd(tmp_path / "sshd", login_env={"PATH": str(bin_dir)}, node=node)
    known = tmp_path / "known_hosts"
    known.write_text(server.known_hosts_line())
    t = ParamikoTransport(HOST, port=server.port, key_file=server.client_key, known_hosts=known)
    try:
        done = t.run(["/bin/echo", "every tool there"], timeout=20)
        assert (done.returncode, done.stdout) == (0, "every tool there\n"), done
        for tool in WRAPPER_TOOLS:
            checked(node, ["mv", str(bin_dir / tool), str(bin_dir / f"{tool}.away")])
            try:
                with pytest.raises(ToolMissing) as err:
                    t.run(["/bin/echo", "never"], timeout=20)
            finally:
                checked(node, ["mv", str(bin_dir / f"{tool}.away"), str(bin_dir / tool)])
            assert err.value.tool == tool and err.value.exit_code == 2
            assert f"the login node {t.where} has no {WHAT[tool]}" in str(err.value)
    finally:
        t.close()
        server.stop()
        node.run(["rm", "-rf", str(bin_dir)])


def _plain_session_env(sshd: Sshd, known_hosts: Path) -> dict[str, str]:
    client = paramiko.SSHClient()
    client.load_host_keys(str(known_hosts))
    client.connect(HOST, port=sshd.port, key_filename=str(sshd.client_key), look_for_keys=False)
    try:
        _, out, _ = client.exec_command("env")
        text = out.read().decode()
    finally:
        client.close()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# --- the site config and the composition root ---------------------------------------------


def test_site_config_accepts_ssh_with_a_host_only() -> None:
    access = SchedulerAccess.model_validate(
        {"kind": "ssh", "host": "login1", "known_hosts": "/etc/ssh/ssh_known_hosts"}
    )
    assert (access.port, access.user, access.known_hosts) == (
        22,
        None,
        Path("/etc/ssh/ssh_known_hosts"),
    )
    with pytest.raises(ValidationError, match="kind 'ssh' needs host"):
        SchedulerAccess.model_validate({"kind": "ssh"})
    with pytest.raises(ValidationError, match="known_hosts applies only to a remote kind"):
        SchedulerAccess.model_validate({"known_hosts": "/x"})


def remote_site(tmp_path: Path, sshd: Sshd, known_hosts: Path) -> Path:
    """The lab's site file with its scheduler reached over SSH through the test server."""
    lab = LAB_SITE.read_text()
    local = "  kind: local            # run sbatch & co. on this host (the login node)\n"
    assert local in lab
    remote = (
        f"  kind: ssh\n  host: {HOST}\n  port: {sshd.port}\n"
        f"  key_file: {sshd.client_key}\n  known_hosts: {known_hosts}\n"
    )
    path = tmp_path / "remote.yaml"
    path.write_text(lab.replace(local, remote))
    return path


def test_only_an_ssh_site_loads_paramiko(tmp_path: Path, sshd: Sshd, known_hosts: Path) -> None:
    site = remote_site(tmp_path, sshd, known_hosts)
    probe = (
        "import os, sys\n"
        "from click.testing import CliRunner\n"
        "from jobsmith.agent.app import App, UserDirs\n"
        "from jobsmith.agent.faces.cli import cli\n"
        "assert CliRunner().invoke(cli, ['--help']).exit_code == 0\n"
        "paths = UserDirs(config_dir=Path(sys.argv[3]), state_dir=Path(sys.argv[3]))\n"
        "local = App(paths=paths, environ=os.environ, site_file=Path(sys.argv[1])).transport\n"
        "print(type(local).__name__, 'paramiko' in sys.modules)\n"
        "remote = App(paths=paths, environ=os.environ, site_file=Path(sys.argv[2])).transport\n"
        "print(type(remote).__name__, remote.where, 'paramiko' in sys.modules)\n"
    )
    args = (LAB_SITE, site, tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", "from pathlib import Path\n" + probe, *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "LocalTransport False",
        f"ParamikoTransport alice@{HOST}:{sshd.port} True",
    ]


# --- the CLI, as from a laptop ------------------------------------------------------------


def laptop_env(home: Path) -> dict[str, str]:
    """A clean environment whose PATH has jobsmith and Python but no Slurm command."""
    assert not any((VENV_BIN / c).exists() for c in ("sbatch", "squeue", "sacct", "cat"))
    (home / "config").mkdir(parents=True, exist_ok=True)
    (home / "state").mkdir(exist_ok=True)
    return {
        "PATH": str(VENV_BIN),
        "HOME": os.environ["HOME"],
        "USER": os.environ["USER"],
        "LOGNAME": os.environ["LOGNAME"],
        "LANG": "C.UTF-8",
        "JOBSMITH_CONFIG_DIR": str(home / "config"),
        "JOBSMITH_STATE_DIR": str(home / "state"),
        # the checkout under test: the laptop stage and a worktree's runs put its src
        # first; without it the CLI would import the venv's own install of jobsmith
        **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
    }


def jobsmith(env: dict[str, str], cwd: Path, site: Path, *args: str) -> Any:
    """`jobsmith --site SITE ARGS…` as a process of its own (one connection each)."""
    return subprocess.run(
        [str(VENV_BIN / "jobsmith"), "--site", str(site), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_an_unknown_host_exits_2_from_the_cli(sshd: Sshd, tmp_path: Path) -> None:
    site = remote_site(tmp_path, sshd, tmp_path / "empty_known_hosts")
    res = jobsmith(laptop_env(tmp_path / "home"), tmp_path, site, "status", "1", "--json")
    assert res.returncode == 2, res.stderr
    error = json.loads(res.stdout)
    assert error["error"] == "HostKeyRefused" and "ssh-keyscan -p" in error["message"]


@pytest.mark.usefixtures("lab_cluster")
def test_submit_status_logs_and_a_watcher_cycle_through_sshd(
    sshd: Sshd, known_hosts: Path, tmp_path: Path, workdir: Path
) -> None:
    site = remote_site(tmp_path, sshd, known_hosts)
    env = laptop_env(tmp_path / "home")
    write_user_site(tmp_path / "home" / "config", workdir)
    logs = str(workdir / "logs")
    make_dirs(login_node(), workdir / "logs")  # the job's directories, there too (issue 29)

    def run(*args: str) -> Any:
        """One CLI process; it must succeed, over exactly one SSH login."""
        logins = sshd.logins()
        res = jobsmith(env, workdir, site, *args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        assert sshd.logins() - logins == 1, args  # it reached Slurm, over one connection
        return res

    sub = run("submit", "command", "-P", "command=echo hi", "--log-dir", logs)
    job_id = sub.stdout.strip()
    assert job_id.isdigit()
    cycle = json.loads(run("watch", "--once", "--json").stdout)
    assert cycle["scheduler_ok"] is True and cycle["watched"] == 1, cycle
    run("wait", job_id, "--timeout", "120", "--json")
    (job,) = json.loads(run("status", job_id, "--json").stdout)["jobs"]
    assert job["state"] == "COMPLETED" and job["record"]["exit_code"] == 0
    out = json.loads(run("logs", job_id, "--json").stdout)
    assert out["lines"] == ["hi"] and out["path"] == f"{logs}/command_{job_id}.out"


# --- what a remote transport changes in the adapter: no second sbatch on a guess --------


def _lost_answers(found: str = "") -> ScriptedTransport:
    """A transport whose sbatch never answers (a dropped connection); squeue and sacct
    answer with what `found` says."""

    def answer(argv: tuple[str, ...]) -> tuple[str, str, int]:
        if argv[0] == "sbatch":
            raise SchedulerUnavailable("the connection to login:22 was lost")
        return found, "", 0

    return ScriptedTransport(answer)


@pytest.mark.parametrize("remote", [True, False])
def test_over_ssh_a_lost_sbatch_answer_is_never_followed_by_a_second_sbatch(
    remote: bool,
) -> None:
    from jobsmith.adapters.options import JobOptions
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler

    lost = _lost_answers()
    slurm = SlurmScheduler(lost, remote=remote, sleep=lambda s: None)
    options = JobOptions(job_name="job.js-0123456789ab")
    with pytest.raises(SchedulerUnavailable) as err:
        slurm.submit("#!/bin/bash\ntrue\n", options)
    # locally the timed-out sbatch is killed and reaped, so it is tried again; over SSH
    # it may still be running on the login node, so it is not
    assert lost.count("sbatch") == (1 if remote else 3)
    assert ("not sent again" in str(err.value)) is remote
    # over SSH the login node is asked (this transport's answer: exit 0, "one is there")
    assert slurm.submission_in_flight(options.job_name) is remote


def test_over_ssh_a_lost_sbatch_answer_is_recovered_by_its_tag() -> None:
    from jobsmith.adapters.options import JobOptions
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler

    lost = _lost_answers(found="4711\n")
    result = SlurmScheduler(lost, remote=True).submit(
        "#!/bin/bash\ntrue\n", JobOptions(job_name="job.js-0123456789ab")
    )
    assert (result.job_id, result.recovered) == ("4711", True)
    assert lost.count("sbatch") == 1


# --- crash recovery: an sbatch orphaned on the login node ----------------------------------


def test_an_sbatch_orphaned_on_the_login_node_is_found_there(
    transport: ParamikoTransport,
) -> None:
    """Over SSH the adapter asks the login node's /proc (this machine's on loopback, the
    cluster's in the laptop stage) for a process of the user's carrying the submission's
    tag: the orphan is started there."""
    from jobsmith.adapters.slurm.inflight import SUBMIT_TAG_ENV
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler

    slurm = SlurmScheduler(transport, remote=True)
    name = "job.js-00aa11bb22cc"
    node = login_node()
    line = f"env -i PATH=/usr/bin:/bin {SUBMIT_TAG_ENV}={name} sleep 30.{os.getpid()}"
    started = node.run(["sh", "-c", f"{line} </dev/null >/dev/null 2>&1 & echo $!"])
    orphan = int(started.stdout)
    try:
        time.sleep(0.2)
        assert slurm.submission_in_flight(name) is True
        assert slurm.submission_in_flight("job.js-ffffffffffff") is False
        assert slurm.submission_in_flight(name[:-1]) is False  # whole entries only
    finally:
        kill_all([orphan])
        _wait_for(lambda: not pids_running(["sleep", f"30.{os.getpid()}"]), "the orphan's end")
    assert slurm.submission_in_flight(name) is False
    assert slurm.submission_host() == f"ssh:{transport.where}"


def test_recovery_waits_out_an_orphans_life_on_the_login_node_then_asks_there() -> None:
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from jobsmith.adapters.capabilities import Capabilities
    from jobsmith.agent.runtime.recovery.resume import _wait_until_sure

    asked: list[str] = []
    probe = SimpleNamespace(
        submission_in_flight=lambda name: asked.append(name) or False,
        dbd_backlog=lambda: 0,
    )
    slurm = SimpleNamespace(capabilities=lambda: Capabilities(submissions=probe, controller=probe))
    at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    data = {"job_name": "job.js-00aa11bb22cc", "host": "laptop", "submit_host": "ssh:a@h:22"}
    early = _wait_until_sure(
        slurm, data, at, "laptop", 0.1, lambda: at + timedelta(minutes=1), lambda s: None
    )  # type: ignore[arg-type]
    assert early == "its sbatch ran on ssh:a@h:22; resume after 10:05 UTC" and asked == []
    later = _wait_until_sure(
        slurm, data, at, "laptop", 0.1, lambda: at + timedelta(minutes=6), lambda s: None
    )  # type: ignore[arg-type]
    assert later is None and asked == ["job.js-00aa11bb22cc"]

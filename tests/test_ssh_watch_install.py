"""`jobsmith watch --install` from a laptop (issue 12): which crontab, and saying why.

With an SSH site the line goes in this machine's crontab (the sessions are kept here;
its jobsmith polls over SSH) unless `--remote` asks for the login node's, run by the
jobsmith installed there. The lab user's real crontab is shared with the disruptive
test of test_watch.py, so each table here is a stand-in `crontab` program (same `-l`
and FILE interface, same "no crontab for" answer) writing a file of the test's own: one
on the laptop's PATH, another on the login node's (sshd's SetEnv PATH), so the test can
tell which was written. The login node's table and jobsmith are the login node's (this
machine's on loopback, the cluster's in the laptop stage: tests/login_node.py).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_cli import write_user_site
from login_node import LoginNode, ThisMachine, read_file, write_file
from login_node import login_node as node_from_environment
from sshd import Sshd, start_sshd
from test_ssh_transport import HOST, jobsmith, laptop_env, remote_site

VENV_BIN = Path(sys.executable).parent
pytestmark = pytest.mark.usefixtures("lab_cluster")


def fake_crontab(bin_dir: Path, node: LoginNode | None = None) -> Path:
    """A `crontab` in bin_dir (on node, default this machine) keeping its table in
    bin_dir/table; returns that path."""
    table = bin_dir / "table"
    write_file(
        node or ThisMachine(),
        bin_dir / "crontab",
        "#!/bin/sh\n"
        f"T={shlex.quote(str(table))}\n"
        'if [ "$1" = "-l" ]; then\n'
        '  [ -f "$T" ] && exec /bin/cat "$T"\n'
        '  echo "no crontab for alice" >&2; exit 1\n'
        "fi\n"
        'exec /bin/cp "$1" "$T"\n',
        mode=0o755,
    )
    return table


@pytest.fixture(scope="module")
def login_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sshd, Path]]:
    """An sshd whose sessions find jobsmith and a stand-in crontab on their PATH."""
    root = tmp_path_factory.mktemp("login")
    node = node_from_environment()
    there = root if isinstance(node, ThisMachine) else Path(f"/tmp/js-login-{uuid.uuid4().hex}")
    table = fake_crontab(there / "remote-bin", node)
    path = f"{there / 'remote-bin'}:{node.jobsmith_bin}:/usr/bin:/bin"
    server = start_sshd(root / "sshd", login_env={"PATH": path}, node=node)
    yield server, table
    server.stop()


@pytest.fixture
def known_hosts(tmp_path: Path, login_node: tuple[Sshd, Path]) -> Path:
    path = tmp_path / "known_hosts"
    path.write_text(login_node[0].known_hosts_line())
    return path


@pytest.fixture
def laptop(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A laptop environment with its own stand-in crontab and no Slurm command."""
    env = laptop_env(tmp_path / "home")
    table = fake_crontab(tmp_path / "laptop-bin")
    env["PATH"] += f":{tmp_path / 'laptop-bin'}"
    return env, table


def marked(table: Path, node: LoginNode | None = None) -> list[str]:
    text = read_file(node or ThisMachine(), table) or ""
    return [x for x in text.splitlines() if "# jobsmith watch" in x]


def remove(table: Path) -> None:
    """The login node's table is gone (its crontab then says 'no crontab for')."""
    node_from_environment().run(["rm", "-f", str(table)])


def test_an_ssh_site_installs_on_this_machine_and_says_why(
    login_node: tuple[Sshd, Path],
    known_hosts: Path,
    laptop: tuple[dict[str, str], Path],
    tmp_path: Path,
    workdir: Path,
) -> None:
    sshd, remote_table = login_node
    env, table = laptop
    table.write_text("0 3 * * * /usr/bin/true # the user's own line\n")
    site = remote_site(tmp_path, sshd, known_hosts)
    for _ in range(2):  # idempotent: the second install replaces the first line
        res = jobsmith(env, tmp_path, site, "watch", "--install", "--interval", "600", "--json")
        assert res.returncode == 0, (res.stdout, res.stderr)
    done = json.loads(res.stdout)
    assert (done["with"], done["where"]) == ("crontab", "local")
    assert f"over ssh alice@{HOST}:{sshd.port}" in done["why"] and "--remote" in done["why"]
    (line,) = marked(table)
    assert "/usr/bin/true # the user's own line" in table.read_text()
    assert line == done["installed"] and read_file(sshd.node, remote_table) is None
    words = shlex.split(line.split(" ", 5)[5])
    # a local install logs each run to watch.log in the state directory (`>>LOG 2>&1`)
    redirect = next(i for i, w in enumerate(words) if w.startswith(">>"))
    assert words[redirect].endswith("/watch.log")
    command = words[:redirect]
    assert command == [str(VENV_BIN / "jobsmith"), "--site", str(site), "watch", "--once"]

    text = jobsmith(env, tmp_path, site, "watch", "--install", "--interval", "600")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[1].startswith("why this machine: the sessions are kept")

    # what cron would run (a bare PATH: no Slurm, no ssh) reaches Slurm over SSH
    write_user_site(Path(env["JOBSMITH_CONFIG_DIR"]), workdir)
    cron_env = {**env, "PATH": "/usr/bin:/bin"}
    cycle = subprocess.run(
        [*command, "--json"], env=cron_env, capture_output=True, text=True, timeout=120
    )
    assert cycle.returncode == 0, cycle.stderr
    assert json.loads(cycle.stdout)["scheduler_ok"] is True


def test_remote_installs_in_the_login_nodes_crontab_running_its_jobsmith(
    login_node: tuple[Sshd, Path], known_hosts: Path, laptop: tuple[dict[str, str], Path],
    tmp_path: Path,
) -> None:  # fmt: skip
    sshd, remote_table = login_node
    env, table = laptop
    remove(remote_table)
    site = remote_site(tmp_path, sshd, known_hosts)
    try:
        for _ in range(2):
            res = jobsmith(env, tmp_path, site, "watch", "--install", "--remote", "--json")
            assert res.returncode == 0, (res.stdout, res.stderr)
        done = json.loads(res.stdout)
        assert (done["with"], done["where"]) == ("crontab", "remote")
        assert "its own jobsmith" in done["why"] and "not this machine's" in done["why"]
        (line,) = marked(remote_table, sshd.node)
        there = sshd.node.jobsmith_bin / "jobsmith"  # the login node's jobsmith
        assert line == f"*/5 * * * * {there} watch --once >/dev/null 2>&1 # jobsmith watch"
        assert not table.exists()  # the laptop's table was not touched
    finally:
        remove(remote_table)


def test_remote_without_jobsmith_on_the_login_node_says_what_to_do(
    laptop: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    plain = start_sshd(tmp_path / "plain")  # the login PATH has no jobsmith
    try:
        known = tmp_path / "known_hosts"
        known.write_text(plain.known_hosts_line())
        site = remote_site(tmp_path, plain, known)
        res = jobsmith(laptop[0], tmp_path, site, "watch", "--install", "--remote")
    finally:
        plain.stop()
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "no jobsmith on the login node's PATH" in res.stderr
    assert "drop --remote" in res.stderr and not laptop[1].exists()


def test_remote_is_refused_for_a_local_site_and_without_install(
    laptop: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    from lab_cli import LAB_SITE

    env = laptop[0]
    res = jobsmith(env, tmp_path, LAB_SITE, "watch", "--install", "--remote")
    assert res.returncode != 0 and "drop --remote" in res.stderr
    res = jobsmith(env, tmp_path, LAB_SITE, "watch", "--remote", "--once")
    assert res.returncode != 0 and "--remote goes with --install" in res.stderr
    assert not laptop[1].exists()

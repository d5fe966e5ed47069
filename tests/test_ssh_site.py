"""`jobsmith site check` and `site init` from a laptop (issue 12), through the loopback
sshd of tests/sshd.py to the lab cluster, with both SSH transports.

The laptop has no Slurm command on its PATH, so every scontrol, sacctmgr and sbatch
--version goes through sshd. `site init` starts from a file holding only the scheduler
block (the rest is what it writes), writes its file here, and the file it writes keeps
that block: `site check` with it reaches the same Slurm the same way.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd import Sshd, close_master, open_master, start_sshd
from test_ssh_transport import HOST, jobsmith, laptop_env

from jobsmith.site_config.yamlfile import SITE_FILE, read_yaml

pytestmark = pytest.mark.usefixtures("lab_cluster")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(params=["ssh", "openssh"])
def scheduler_block(
    request: pytest.FixtureRequest, sshd: Sshd, known_hosts: Path, tmp_path: Path
) -> Iterator[dict[str, object]]:
    """The scheduler block of a laptop's site file, for each transport."""
    block: dict[str, object] = {
        "kind": request.param,
        "host": HOST,
        "port": sshd.port,
        "known_hosts": str(known_hosts),
    }
    if request.param == "ssh":
        yield {**block, "key_file": str(sshd.client_key)}
        return
    socket = Path(f"/tmp/js-cm-{os.getpid()}-site.sock")
    open_master(sshd, known_hosts, socket)
    try:
        yield {**block, "control_path": str(socket)}
    finally:
        close_master(socket, sshd.port)


def laptop(tmp_path: Path) -> dict[str, str]:
    """laptop_env plus the system's ssh (the openssh transport runs it), no Slurm."""
    env = laptop_env(tmp_path / "home")
    ssh_only = tmp_path / "ssh-bin"
    ssh_only.mkdir()
    (ssh_only / "ssh").symlink_to(shutil.which("ssh") or "/usr/bin/ssh")
    env["PATH"] += f":{ssh_only}"
    return env


def test_site_init_then_site_check_over_ssh(
    scheduler_block: dict[str, object], sshd: Sshd, tmp_path: Path
) -> None:
    env = laptop(tmp_path)
    start = tmp_path / "start.yaml"
    start.write_text(json.dumps({"scheduler": scheduler_block}))  # JSON is YAML
    written = tmp_path / "written.yaml"
    where = f"{scheduler_block['kind']} alice@{HOST}:{sshd.port}"

    init = jobsmith(env, tmp_path, start, "site", "init", "-o", str(written), "--json")
    assert init.returncode == 0, (init.stdout, init.stderr)
    result = json.loads(init.stdout)
    assert (result["path"], result["via"]) == (str(written), where)
    config = read_yaml(written, SITE_FILE).data
    assert config["cluster"] == "jobsmithlab" and "debug" in config["partitions"]
    assert config["paths"]["allowed_roots"][0] == os.environ["HOME"]  # the remote home
    kept = {k: v for k, v in config["scheduler"].items() if k != "command_timeout_s"}
    assert kept == scheduler_block  # the block it used, so the next command goes the same way

    check = jobsmith(env, tmp_path, written, "site", "check", "--json")
    assert check.returncode == 0, (check.stdout, check.stderr)
    report = json.loads(check.stdout)
    assert report["via"] == where and report["files"] == [str(written)]
    assert not [m for m in report["mismatches"] if m["severity"] == "error"], report
    text = jobsmith(env, tmp_path, written, "site", "check")
    assert text.returncode == 0 and f"Slurm asked over {where}" in text.stdout


def test_a_start_file_with_a_bad_scheduler_block_is_not_run_here(tmp_path: Path) -> None:
    """A kind: ssh block without a host is an error naming the field, not a silent local
    run (which, on a laptop, would fail as 'scontrol not found')."""
    start = tmp_path / "start.yaml"
    start.write_text("scheduler:\n  kind: ssh\n  port: 22\n")
    res = jobsmith(laptop(tmp_path), tmp_path, start, "site", "init", "-o", "-")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "scheduler" in res.stderr and "needs host" in res.stderr
    assert "scontrol" not in res.stderr

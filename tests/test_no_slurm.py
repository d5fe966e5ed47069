"""`templates list/show` and `render --no-slurm` with no site file and no Slurm (issue 25,
item 4). Slurm's commands are stand-ins on PATH that record being run and fail, so a
test sees any Slurm command jobsmith would have run; none may be."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lab_cli import LAB_SITE

from jobsmith.adapters.transport import NoCommands
from jobsmith.agent.faces.cli import cli
from jobsmith.errors import SchedulerError
from jobsmith.job_templates.loader import TemplateLibrary, shipped_library

SLURM_COMMANDS = ("sbatch", "squeue", "sacct", "scontrol", "sinfo", "sacctmgr", "scancel", "sdiag")


@pytest.fixture
def slurm_stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Stand-ins for Slurm's commands first on PATH, each appending its argv to the file
    returned and failing; the test's directory is the current one."""
    bin_dir, calls = tmp_path / "stand-in-bin", tmp_path / "slurm-calls"
    bin_dir.mkdir()
    for name in SLURM_COMMANDS:
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\nexit 1\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    return calls


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_templates_list_and_show_need_no_site_file_and_no_slurm(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    listed = _run("templates", "list")
    assert listed.exit_code == 0, listed.output
    assert "command" in listed.stdout.split() and "file_array" in listed.stdout.split()
    shown = _run("templates", "show", "command")
    assert shown.exit_code == 0, shown.output
    body = TemplateLibrary([shipped_library()]).get("command").body
    assert body.strip() in shown.stdout
    assert not slurm_stand_ins.exists()  # no Slurm command ran
    assert not list((jobsmith_home / "state").iterdir())  # and nothing was written


def test_a_users_own_template_is_listed_without_a_site_file(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    own = jobsmith_home / "config" / "templates"
    own.mkdir()
    shipped = Path(shipped_library())
    for suffix in (".yaml", ".sh.j2"):
        (own / f"mine{suffix}").write_text((shipped / f"command{suffix}").read_text())
    listed = _run("templates", "list")
    assert listed.exit_code == 0, listed.output
    assert "mine" in listed.stdout.split()


def test_a_broken_site_file_is_still_an_error_for_templates(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    """Only a missing site file is passed over: a broken one may name template_dirs."""
    (jobsmith_home / "config" / "site.yaml").write_text("cluster: [\n")
    listed = _run("templates", "list")
    assert listed.exit_code == 2, listed.output
    assert "site.yaml" in listed.stderr


def test_render_no_slurm_without_a_site_file_uses_the_built_in_defaults(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    out = _run("render", "command", "-P", "command=hostname", "--no-slurm")
    assert out.exit_code == 0, out.output
    assert "#SBATCH --partition=PARTITION\n" in out.stdout
    assert "#SBATCH --mem=2000M\n" in out.stdout and "exec bash -c -- hostname" in out.stdout
    assert "no site file: rendered with jobsmith's built-in defaults" in out.stderr
    assert "the partition is a placeholder: give -p" in out.stderr
    assert not slurm_stand_ins.exists()
    assert not list((jobsmith_home / "state").iterdir())  # no session, no job recorded

    named = _run("render", "command", "-P", "command=hostname", "--no-slurm", "-p", "long")
    assert named.exit_code == 0, named.output
    assert "#SBATCH --partition=long\n" in named.stdout
    assert "placeholder" not in named.stderr
    assert not slurm_stand_ins.exists()


def test_render_without_no_slurm_still_wants_a_site_file(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    out = _run("render", "command", "-P", "command=hostname")
    assert out.exit_code == 2 and "site init" in out.stderr, out.output


def test_render_no_slurm_with_a_site_asks_slurm_nothing_even_for_an_array(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    """The lab's site sets max_concurrent_jobs and an array is judged against MaxSubmit:
    plain `render` asks squeue and sacctmgr for those; --no-slurm asks nothing."""
    site = ["--site", str(LAB_SITE)]
    out = _run(*site, "render", "command", "-a", "0-9", "-P", "command=hostname", "--no-slurm")
    assert out.exit_code == 0, out.output
    assert "#SBATCH --partition=debug\n" in out.stdout and "#SBATCH --array=0-9\n" in out.stdout
    assert "were not checked" in out.stderr and "no site file" not in out.stderr
    assert not slurm_stand_ins.exists()
    asked = _run(*site, "render", "command", "-a", "0-9", "-P", "command=hostname")
    assert asked.exit_code != 0  # the stand-ins fail: plain render did ask Slurm
    assert slurm_stand_ins.read_text().startswith("squeue ")


def test_render_no_slurm_still_applies_the_sites_limits(
    jobsmith_home: Path, slurm_stand_ins: Path
) -> None:
    site = ["--site", str(LAB_SITE)]
    out = _run(*site, "render", "command", "-t", "2:00:00", "-P", "command=true", "--no-slurm")
    assert out.exit_code == 3, out.output
    assert "partition 'debug' allows at most" in out.stderr


def test_the_no_commands_transport_refuses_every_command_by_name() -> None:
    with pytest.raises(SchedulerError, match="squeue was not run"):
        NoCommands().run(["squeue", "--me"], timeout=5)

"""The CLI teaches itself (issue 25, item 4): `--all` means one thing, every command's
help ends with examples that parse, `jobsmith --help` names the exit statuses and the
docs, and click's shell completion is there. No Slurm is needed for any of these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from lab_cli import LAB_SITE

from jobsmith.agent.faces.cli import cli
from jobsmith.errors import NotFound


def _commands(group: click.Group = cli, path: str = "jobsmith") -> list[tuple[str, click.Command]]:
    """Every command under group, groups too, as (its path, the command)."""
    found: list[tuple[str, click.Command]] = []
    for name, command in sorted(group.commands.items()):
        here = f"{path} {name}"
        found.append((here, command))
        if isinstance(command, click.Group):
            found += _commands(command, here)
    return found


# --- --all ------------------------------------------------------------------------------


def test_all_has_one_meaning_every_job_of_every_session_in_status_alone() -> None:
    """`status --all` is the one shown in help; the other two meanings are renamed
    (rerun --every-task, pipeline status --list) and their old spelling is hidden."""
    shown = [
        path
        for path, command in _commands()
        for param in command.params
        if isinstance(param, click.Option)
        and not param.hidden
        and "--all" in (*param.opts, *param.secondary_opts)
    ]
    assert shown == ["jobsmith status"]


def _rerun_asked(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Replace the re-run itself: record what the command asked for, then stop."""
    from jobsmith.agent.brains import deciding

    asked: dict[str, Any] = {}

    def fake(app: object, job_id: str, **kwargs: Any) -> None:
        asked.update(kwargs, job_id=job_id)
        raise NotFound("stopped here by the test")

    monkeypatch.setattr(deciding, "rerun_by_hand", fake)
    return asked


@pytest.mark.parametrize(
    ("flags", "failed_only", "note"),
    [
        ((), True, None),
        (("--every-task",), False, None),
        (("--all",), False, "jobsmith: note: --all is now --every-task here"),
    ],
)
def test_rerun_every_task_and_its_old_spelling(
    jobsmith_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: tuple[str, ...],
    failed_only: bool,
    note: str | None,
) -> None:
    asked = _rerun_asked(monkeypatch)
    result = CliRunner().invoke(cli, ["--site", str(LAB_SITE), "rerun", *flags, "12"])
    assert result.exit_code == 6, result.output
    assert asked == {
        "job_id": "12",
        "failed_only": failed_only,
        "mem_mb": None,
        "time_limit_s": None,
    }
    if note is None:
        assert "note:" not in result.stderr
    else:
        assert result.stderr.startswith(note), result.stderr


def test_pipeline_status_list_and_its_old_spelling(
    jobsmith_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobsmith.agent.views import render as views

    shown: list[object] = []
    monkeypatch.setattr(views, "show_pipeline_lines", lambda docs, as_json: shown.append(docs))
    runner = CliRunner()
    new = runner.invoke(cli, ["--site", str(LAB_SITE), "pipeline", "status", "--list"])
    old = runner.invoke(cli, ["--site", str(LAB_SITE), "pipeline", "status", "--all"])
    assert (new.exit_code, old.exit_code) == (0, 0), new.output + old.output
    assert shown == [[], []]  # both listed (no pipeline in a fresh home)
    assert "note:" not in new.stderr
    assert "jobsmith: note: --all is now --list here" in old.stderr

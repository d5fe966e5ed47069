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


# --- examples and the root's help ---------------------------------------------------------


def _help(path: str) -> str:
    result = CliRunner().invoke(cli, [*path.split()[1:], "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def _examples_of(text: str) -> list[str]:
    """The example lines at the end of a --help, [] if it ends otherwise."""
    _, sep, tail = text.rpartition("\n  Examples:\n\n")
    return [line.strip() for line in tail.splitlines() if line.strip()] if sep else []


@pytest.mark.parametrize("path", ["jobsmith", *(p for p, _ in _commands())])
def test_every_help_ends_with_one_or_two_examples_of_its_command(path: str) -> None:
    examples = _examples_of(_help(path))
    assert 1 <= len(examples) <= 2, f"{path} --help ends with no examples"
    if path != "jobsmith":
        assert all(e.startswith(path.split()[0]) for e in examples), examples
        assert all(path.split()[-1] in e.split() for e in examples), examples


def _parse(example: str) -> click.Context:
    """click's parsing of an example command line (no command runs), through each group
    to the command; a bad option, value or argument count raises click's UsageError."""
    import shlex

    words = shlex.split(example)
    if ">" in words:  # the shell's redirection, not jobsmith's
        words = words[: words.index(">")]
    assert words[0] == "jobsmith", example
    command: click.Command = cli
    ctx = cli.make_context("jobsmith", words[1:])
    while isinstance(command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest and command.invoke_without_command:  # `jobsmith nodes` lists them
            break
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None, example
        command = sub
        ctx = sub.make_context(name, rest, parent=ctx)
    return ctx


@pytest.mark.parametrize(
    "example",
    sorted({e for p in ["jobsmith", *(p for p, _ in _commands())] for e in _examples_of(_help(p))}),
)
def test_every_example_parses(
    example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for word in example.split():  # the input files an example names, where click wants one
        if word.endswith((".mp4", ".blend")):
            (tmp_path / word).touch()
    ctx = _parse(example)
    assert ctx.command.name and ctx.command.name in example


def test_a_wrong_example_would_be_caught() -> None:
    """The check above can fail: an option a command lacks is refused by the parser."""
    with pytest.raises(click.UsageError):
        _parse("jobsmith status --no-such-option")
    with pytest.raises(click.UsageError):
        _parse("jobsmith templates show")  # NAME is required


def test_the_root_help_names_every_exit_status_and_the_docs() -> None:
    from test_exit_status import readme_table

    text = _help("jobsmith")
    statuses = " ".join(text.split("Exit statuses", 1)[1].split("Docs,", 1)[0].split())
    named = [int(item.split()[0]) for item in statuses.split(":", 1)[1].split(";")]
    assert named == sorted(readme_table()) == list(range(11))
    repo = Path(__file__).resolve().parent.parent
    docs = [word.strip(",.():`") for word in text.split() if word.strip(",.():`").endswith(".md")]
    assert {"docs/exit-status.md", "docs/cli.md", "README.md"} <= set(docs)
    for doc in docs:
        assert (repo / doc).is_file(), doc


# --- shell completion -------------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def _completion_env(**extra: str) -> dict[str, str]:
    import os
    import sys

    import jobsmith

    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",  # the venv's `jobsmith`
        "PYTHONPATH": str(Path(jobsmith.__file__).resolve().parent.parent),
        "HOME": os.environ.get("HOME", "/tmp"),
        **extra,
    }


def test_the_readmes_completion_line_names_the_console_script_and_turns_it_on() -> None:
    """The README's block, run by bash as the getting-started test runs it, registers
    click's completion for the command pyproject.toml installs."""
    import subprocess
    import tomllib

    [script] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    from test_getting_started import README, shell_blocks

    [block] = [b for b in shell_blocks(README) if "_COMPLETE=" in b.code]
    assert (
        block.not_run is None and f"_{script.upper()}_COMPLETE=bash_source {script}" in block.code
    )
    shown = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.code + f"complete -p {script}\n"],
        capture_output=True, text=True, env=_completion_env(), timeout=60, check=False,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"complete -o nosort -F _{script}_completion {script}"


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("jobsmith sta", 1, {"status"}),
        ("jobsmith render fil", 2, {"file_array"}),
        ("jobsmith templates show ffmpeg_c", 3, {"ffmpeg_chunks", "ffmpeg_concat"}),
        ("jobsmith watch --un", 2, {"--uninstall"}),
    ],
)
def test_completion_offers_commands_options_and_template_names(
    words: str, cword: int, expected: set[str], jobsmith_home: Path
) -> None:
    import os
    import subprocess
    import sys

    env = _completion_env(
        _JOBSMITH_COMPLETE="bash_complete",
        COMP_WORDS=words,
        COMP_CWORD=str(cword),
        JOBSMITH_CONFIG_DIR=os.environ["JOBSMITH_CONFIG_DIR"],
        JOBSMITH_STATE_DIR=os.environ["JOBSMITH_STATE_DIR"],
    )
    out = subprocess.run(
        [str(Path(sys.executable).parent / "jobsmith")],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    offered = {line.split(",", 1)[1] for line in out.stdout.splitlines()}
    assert offered == expected

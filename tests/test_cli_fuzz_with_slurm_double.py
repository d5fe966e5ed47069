"""Arbitrary text at every option and argument of every command (issue 7, item 4).

Hypothesis throws hostile text (control characters, newlines, quotes, option-looking
words, non-ASCII) at one parameter at a time, the others left valid, and asserts per
input class: no traceback, an exit status docs/exit-status.md documents, and for the classes that
have a parser (job ids, time windows) exactly the status their parser promises.

Slurm here is a DOUBLE: a recording transport that answers like an idle cluster, so the
whole surface runs in-process within a couple of minutes. It records every argv, which
lets the test check the other half of the promise: no typed string ever reaches a Slurm
command where Slurm could read it as an option. The real-cluster tests cover the rest.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lab_cli import LAB_SITE
from scripted_transport import ScriptedTransport

from jobsmith.adapters.jobid import BadJobId, parse_job_ids
from jobsmith.agent.app import App
from jobsmith.agent.faces.cli import cli
from jobsmith.agent.runtime.window import parse_window
from jobsmith.errors import InputError

DOCUMENTED_EXIT = set(range(11))


class RecordingSlurmDouble(ScriptedTransport):
    """A Transport double answering like an idle one-node cluster; records every argv."""

    def __init__(self) -> None:
        super().__init__(_idle_cluster)


def _idle_cluster(argv: tuple[str, ...]) -> tuple[str, str, int]:
    if argv[:2] == ("sbatch", "--version"):
        return "slurm-wlm 22.05.8\n", "", 0
    if argv[:2] == ("sbatch", "--parsable"):
        return "4242\n", "", 0
    if argv[:2] == ("sbatch", "--test-only"):
        start = "sbatch: Job 4243 to start at 2026-11-30T12:00:00 using 1 processors"
        return "", f"{start} on nodes lab in partition debug\n", 0
    if argv[:3] == ("scontrol", "show", "job"):
        return "", "slurm_load_jobs error: Invalid job id specified\n", 1
    if argv[0] == "bash" and argv[-1] in ("nextflow", "snakemake"):
        return f"/usr/bin/{argv[-1]}\n", "", 0  # pipeline run's look for its engine
    if argv[0] == "sdiag":
        return "DBD Agent queue size: 0\n", "", 0
    return "", "", 0


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


#: valid values for the parameters a command needs while another one is fuzzed
_VALID = {
    "template": "command",
    "job_id": "4242",
    "job_ids": "4242",
    "session_id": "20260101T000000.000Z-000000000000",
    "step_id": "st-0000000000",
    "text": "what is running?",
    # transcode: a file that exists and is no video (ffprobe refuses it: exit 2)
    "source": str(LAB_SITE),
    "output": "/tmp/jobsmith-fuzz-out.mkv",
    "file": str(LAB_SITE),
    "blend_file": str(LAB_SITE),  # render-frames: it exists (its plan is only checked)
    "output_dir": "/tmp/jobsmith-fuzz-frames",
    "engine": "nextflow",  # pipeline run: a pipeline by name (nothing of it is read here)
    "pipeline_name": "nf-core/demo",
    "files": str(LAB_SITE),  # put: a file here (the lab's site has nothing to stage: exit 2)
    "items": "/tmp/jobsmith-fuzz-out.mkv",  # get: a path there (likewise)
}
#: extra arguments that keep a command short: no waiting, one watcher cycle (a watcher
#: without --once never returns, and --install writes the user's crontab: not fuzzed);
#: `mcp` over HTTP, which stops at the missing token file before it listens (over stdio
#: it would serve the test process's own stdin and stdout); `render-frames` only checked
_QUICK = {
    ("wait",): ["--timeout", "0"],
    ("watch",): ["--once"],
    ("mcp",): ["--http"],
    ("render-frames",): ["--frames", "1-2", "--dry-run"],
}


def _cases() -> list[tuple[tuple[str, ...], str]]:
    cases = []
    for path, command in _commands(cli):
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.name == "as_json"):
                continue
            if path == ("watch",) and param.name == "install":
                continue
            cases.append((path, str(param.name)))
    return cases


CASES = _cases()


def _argv(path: tuple[str, ...], target: str, value: str, home: Path) -> list[str]:
    command = dict(_commands(cli))[path]
    argv = ["--site", str(LAB_SITE), *path, *_QUICK.get(path, [])]
    for param in command.params:
        if isinstance(param, click.Argument):
            if param.name == target:
                argv += ["--", value] if value.startswith("-") else [value]
            elif param.required:
                argv.append(_VALID[str(param.name)])
        elif param.name == target:
            argv += (
                [param.opts[-1], value]
                if not value.startswith("-")
                else [f"{param.opts[-1]}={value}"]
            )
    if path == ("site", "init"):
        argv += ["-o", "-"] if target != "output" else []
    return argv


def _expected_for(target: str, value: str) -> set[int] | None:
    """The one status a parser promises for this value, or None (any documented one)."""
    if target in ("job_id", "job_ids", "after_ok", "after_any", "after_not_ok"):
        try:
            ids = parse_job_ids([value])
        except BadJobId:
            return {2}
        return None if ids else {2}
    if target in ("since", "older_than"):
        try:
            parse_window(value)
        except InputError:
            return {2}
    return None


def _within(seconds: int, call: Callable[[], Result], argv: list[str]) -> Result:
    """call(), or a failure naming argv if it hangs: a hang is a finding (`wait --timeout
    nan` waited forever), and must fail the suite rather than stall it."""

    def hung(signum: int, frame: object) -> None:
        raise AssertionError(f"jobsmith {argv!r} did not return within {seconds}s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        return call()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_every_command_and_parameter_is_covered() -> None:
    covered = {path for path, _ in CASES}
    every = {path for path, command in _commands(cli)}
    assert len(covered) >= 20 and covered <= every, covered
    assert (("submit",), "after_ok") in CASES and (("cancel",), "job_ids") in CASES


HOSTILE_TEXT = st.one_of(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40),
    st.sampled_from(
        [
            "--help",
            "--user=alice",
            "-1",
            "1;id",
            "$(id)",
            "`id`",
            "1\n2",
            "1 2",
            "..",
            "/",
            "~root",
            "1_[0-999999999]",
            "0x10",
            "10:00",
            "1e9",
            "nan",
            "-inf",
            "💥",
            "\u202e1",
            "caf\udce9",  # what Python makes of the argv bytes b"caf\xe9"
        ]
    ),
)


@pytest.mark.parametrize(("path", "target"), CASES, ids=[f"{' '.join(p)}:{t}" for p, t in CASES])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=HOSTILE_TEXT)
def test_hostile_text_gets_a_documented_exit_and_never_a_traceback(
    path: tuple[str, ...],
    target: str,
    value: str,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.chdir(home)
    env = {
        "HOME": str(home),
        "USER": "alice",
        "JOBSMITH_CONFIG_DIR": str(home / "config"),
        "JOBSMITH_STATE_DIR": str(home / "state"),
        "PATH": "/usr/bin:/bin",
    }
    monkeypatch.delenv("JOBSMITH_SITE", raising=False)
    slurm = RecordingSlurmDouble()
    from jobsmith.agent.app import UserDirs

    app = App(
        paths=UserDirs(config_dir=home / "config", state_dir=home / "state"),
        environ=env,
        site_file=LAB_SITE,
        transport_override=slurm,
    )
    argv = _argv(path, target, value, home)
    result = _within(20, lambda: CliRunner().invoke(cli, argv, obj=app, env=env), argv)
    # a traceback is any exception other than the exit the CLI chose
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"jobsmith {argv!r} raised {result.exception!r}") from result.exception
    assert result.exit_code in DOCUMENTED_EXIT, (argv, result.exit_code, result.output)
    expected = _expected_for(target, value)
    if expected is not None:
        assert result.exit_code in expected, (argv, result.exit_code, result.output)
    if result.exit_code != 0:
        assert "Traceback" not in result.output
    for call in slurm.calls:  # no typed word where Slurm reads options
        for word in call[1:]:
            assert not (word == value and value.startswith("-")), call

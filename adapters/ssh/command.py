"""The remote command line: the local argv, quoted for a POSIX shell, in a clean environment,
in a form any login shell passes on unchanged.

sshd runs a command string through the user's login shell, which reads its rc files
first (bash reads ~/.bashrc even for `ssh host cmd`). A line there exporting
SBATCH_PARTITION would override the partition policy checked, so the command runs under
`env -i` with only what the one environment rule (adapters/environment_rule.py) passes
of the remote login environment: the same allowlist a local submission's job gets
(PATH, HOME, locale, module and conda settings, proxies with their credentials stripped,
the site's own `jobs.environment.allow` names, and the site's SLURM_CONF), applied on
the login node by a shell snippet the rule writes, since the values are there.

Then the variables the caller gives (the pinned Slurm output formats, the submission
tag), written on the command line because sshd drops environment variables it was not
told to accept; a given name that looks like a credential is never sent. Nothing of
this process's own environment is sent. sbatch hands the environment it runs in to the
job (--export=ALL), so a job submitted over SSH sees this allowlist, not the user's
interactive environment: `env_setup` lines set up the rest.

A command given a deadline runs under coreutils' `timeout`: past the deadline plus
GRACE_S it gets SIGTERM, KILL_AFTER_S later SIGKILL. Closing the channel at the deadline
does not stop it (sshd signals a session's process only through a pty, which these
commands have none of), and a Slurm command left running on the login node keeps its
load on slurmctld and, for sbatch, may submit after the caller gave up. The grace lets
the caller's own deadline fire first, so it sees CommandTimedOut, not `timeout`'s 124.

sshd hands the line to the user's login shell, whatever it is: csh and tcsh quote
differently from sh (no newline inside quotes, `!` and `${X+...}` mean other things),
fish differently again. So the POSIX line above is sent base64-encoded inside a line
every one of them reads the same way, `exec sh -c 'eval "$(echo B64 | base64 -d)"'`:
one single-quoted word of characters no shell treats specially there, decoded and run by
the login node's /bin/sh (sh and coreutils' base64 are on nearly every Linux login node;
a command finding base64, env, sed or timeout missing there ends saying which, and the
transports raise ToolMissing: adapters/login_tools.py).
"""

from __future__ import annotations

import base64
import math
import re
import shlex
from collections.abc import Mapping, Sequence

from jobsmith.adapters.environment_rule import JobEnvironmentRule, looks_like_credential
from jobsmith.adapters.login_tools import need_sh
from jobsmith.errors import SchedulerUnavailable

#: seconds past the caller's deadline before the remote command is sent SIGTERM
GRACE_S = 1
#: seconds after SIGTERM before SIGKILL, for a command that ignores SIGTERM
KILL_AFTER_S = 5

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class CommandTimedOut(SchedulerUnavailable):
    """A remote command gave no answer by its deadline (retryable, like any unavailable
    scheduler); the login node's `timeout` ends it (module docstring)."""

    def __init__(self, argv: Sequence[str], where: str, timeout_s: float) -> None:
        self.argv = tuple(argv)
        self.timeout_s = timeout_s
        super().__init__(
            f"{' '.join(argv[:2])} on {where} gave no answer within {timeout_s:g}s "
            "(it is stopped there); slurmctld or the login node may be busy, try again"
        )


def remote_command(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    timeout_s: float | None = None,
    environment: JobEnvironmentRule | None = None,
) -> str:
    """The shell line that runs argv remotely with what the environment rule passes
    (default: the rule without site entries) plus env, stopped past timeout_s (see
    above)."""
    if not argv:
        raise ValueError("an empty command cannot be run")
    if "=" in argv[0]:
        # env(1) would read it as one more assignment, not as the program to run
        raise ValueError(f"program name {argv[0]!r} holds '=': env(1) cannot run it")
    bad = [name for name in env if not _NAME.match(name)]
    if bad:
        raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
    rule = environment or JobEnvironmentRule()
    given = [
        shlex.quote(f"{name}={value}")
        for name, value in env.items()
        if not looks_like_credential(name)
    ]
    limit = []
    tools: tuple[str, ...] = ("env", "sed")  # the rule's snippet reads `env | sed`
    if timeout_s is not None:
        seconds = math.ceil(timeout_s) + GRACE_S
        limit = ["timeout", "-k", str(KILL_AFTER_S), str(seconds)]
        tools += ("timeout",)
    # exec: the login shell has nothing left to do, so it need not wait around
    line = " ".join(["exec", *limit, "env", "-i", '"$@"', *given, *map(shlex.quote, argv)])
    return any_shell(f"{need_sh(tools)}; {rule.shell_snippet()}; {line}")


def any_shell(posix_line: str) -> str:
    """posix_line run by sh, through a line sh, bash, csh, tcsh and fish read alike;
    without base64 there it ends as adapters/login_tools.py says (never an `eval` of
    nothing, which exits 0)."""
    # surrogateescape: a file name that is not UTF-8 goes as the bytes the OS gave
    encoded = base64.b64encode(posix_line.encode("utf-8", "surrogateescape")).decode("ascii")
    return f"""exec sh -c '{need_sh(("base64",))}; eval "$(echo {encoded} | base64 -d)"'"""

"""The remote command line: the local argv, quoted for a POSIX shell, in a clean environment.

sshd runs a command string through the user's login shell, which reads its rc files
first (bash reads ~/.bashrc even for `ssh host cmd`). A line there exporting
SBATCH_PARTITION would override the partition policy checked, so the command runs under
`env -i` with only these variables of the remote login environment:

- PATH, HOME, USER, LOGNAME: to find the Slurm commands (module files extend PATH) and
  the user's files;
- LANG, SLURM_CONF, SLURM_CONF_SERVER, when set: the locale, and what Slurm needs to
  find its cluster (slurmenv.py passes these unchanged locally too).

plus the variables the caller gives (the pinned Slurm output formats, the submission
tag), written on the command line because sshd drops environment variables it was not
told to accept. Nothing of this process's own environment is sent. sbatch hands the
environment it runs in to the job (--export=ALL), so a job submitted over SSH sees this
allowlist, not the user's interactive environment: `env_setup` lines set up the rest.

The quoting is POSIX shell (sh, bash, dash, zsh, ksh); csh and tcsh quote differently
and are not supported yet.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

#: remote login variables always passed (empty if the remote shell has them unset)
ALWAYS_PASSED: tuple[str, ...] = ("PATH", "HOME", "USER", "LOGNAME")
#: remote login variables passed only when set there
PASSED_IF_SET: tuple[str, ...] = ("LANG", "SLURM_CONF", "SLURM_CONF_SERVER")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def remote_command(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """The shell line that runs argv remotely with the allowlist plus env (see above)."""
    if not argv:
        raise ValueError("an empty command cannot be run")
    if "=" in argv[0]:
        # env(1) would read it as one more assignment, not as the program to run
        raise ValueError(f"program name {argv[0]!r} holds '=': env(1) cannot run it")
    bad = [name for name in env if not _NAME.match(name)]
    if bad:
        raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
    remote = [f'{name}="${name}"' for name in ALWAYS_PASSED]
    remote += [f'${{{name}+"{name}=${name}"}}' for name in PASSED_IF_SET]
    given = [shlex.quote(f"{name}={value}") for name, value in env.items()]
    # exec: the login shell has nothing left to do, so it need not wait around
    return " ".join(["exec", "env", "-i", *remote, *given, *map(shlex.quote, argv)])

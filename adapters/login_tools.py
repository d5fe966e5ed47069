"""What the login node must have beyond Slurm, and the one error when it lacks it.

Over SSH every command runs through the login node's sh and a few POSIX and GNU tools:
`base64` decodes the command line itself, `env` and `sed` clean its environment and
coreutils' `timeout` bounds it (adapters/ssh/command.py); the job's files are looked at
with GNU `realpath -m`, `od` and `tr`, read with `head` and `base64 -w0`, and a directory
to get is listed with `find`, `tr`, `head` and `wc` (adapters/files_there.py); put and get
ask for `stat` and `sha256sum` and run the login node's `rsync`
(adapters/ssh/staging.py). Most login nodes have them all; a minimal image (BusyBox's
realpath has no -m) or a PATH that hides coreutils may not, and then a command must not
quietly answer something else: `echo … | base64 -d` failing makes `eval` run nothing and
exit 0 (a Slurm command that "succeeded" saying nothing), and a missing `od` turns a
path's answer into an empty one.

So each command checks, in the same command (no extra round trip), for the tools it is
about to use (`need_sh`); a missing one ends it with EXIT and one marked line on stderr,
which the caller turns into `ToolMissing` naming the tool and the login node (`check`):
exit 2, as a person must install it or fix the PATH; retrying cannot help.
"""

from __future__ import annotations

import re

from jobsmith.adapters.transport import CommandResult
from jobsmith.errors import ConfigError

#: a command's exit status when a tool it needs is missing (`timeout`'s own failure is
#: 125 too, but never with the marker line)
EXIT = 125
_MARK = "jobsmith: missing on the login node:"
_MARKED = re.compile(re.escape(_MARK) + r" (?P<tool>[^\n]+)")

#: what the tools are, for the message
WHAT = {
    "base64": "coreutils' base64",
    "env": "coreutils' env",
    "sed": "sed",
    "timeout": "coreutils' timeout",
    "realpath": "GNU realpath (coreutils, with -m)",
    "od": "coreutils' od",
    "tr": "coreutils' tr",
    "head": "coreutils' head",
    "wc": "coreutils' wc",
    "find": "findutils' find",
    "stat": "coreutils' stat",
    "sha256sum": "coreutils' sha256sum",
    "rsync": "rsync",
}
#: the Debian package of each tool not in coreutils
PACKAGE = {"sed": "sed", "rsync": "rsync", "find": "findutils"}


class ToolMissing(ConfigError):
    """The login node lacks a tool jobsmith's commands there need (exit 2)."""

    def __init__(self, tool: str, where: str) -> None:
        self.tool = tool
        what = WHAT.get(tool, tool)
        super().__init__(
            f"the login node {where} has no {what} on the PATH jobsmith's commands get "
            f"there ({tool}): install it there (Debian: apt install "
            f"{PACKAGE.get(tool, 'coreutils')}), or put it "
            "on the login PATH (docs/ssh.md, 'What the login node needs')"
        )


def missing_line(tool: str) -> str:
    """The stderr line a command prints when tool is missing (sh words, to echo)."""
    return f"{_MARK} {tool}"


def need_sh(tools: tuple[str, ...], *, gnu_realpath: bool = False) -> str:
    """sh that ends the command (EXIT, the marked line) unless every one of tools is
    on PATH, and (gnu_realpath) realpath takes -m."""
    checks = [
        f'command -v {tool} >/dev/null 2>&1 || {{ echo "{missing_line(tool)}" >&2; exit {EXIT}; }}'
        for tool in tools
    ]
    if gnu_realpath:
        checks.append(
            "realpath -m -- / >/dev/null 2>&1 || "
            f'{{ echo "{missing_line("realpath")}" >&2; exit {EXIT}; }}'
        )
    return "; ".join(checks)


def missing_tool(result: CommandResult) -> str | None:
    """The tool a command ended for lacking (need_sh's line), if that is how it ended."""
    if result.returncode != EXIT:
        return None
    return named_missing(result.stderr)


def named_missing(stderr: str) -> str | None:
    """The tool need_sh's line on stderr names, if there is one: for a program that runs
    the checked command itself and ends with a status of its own (rsync's remote side)."""
    found = _MARKED.search(stderr)
    return found["tool"].strip() if found else None


def checked_sh(tool: str) -> list[str]:
    """argv running `tool ARGS…` (the args appended) after need_sh's check for it: one
    command, no extra round trip, and ToolMissing through `check` when it is not there."""
    return ["sh", "-c", f'{need_sh((tool,))}; exec {tool} "$@"', "sh"]


def check(result: CommandResult, where: str) -> CommandResult:
    """result, unless its command ended for lacking a tool: then ToolMissing naming it
    and where (the login node, user@host:port)."""
    tool = missing_tool(result)
    if tool is not None:
        raise ToolMissing(tool, where)
    return result

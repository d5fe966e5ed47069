"""A scripted, recording Transport double (the protocol: adapters/transport.py).

Where a test stands a transport in for Slurm or a login node, what it needs is always the
same two things: answer each command as the test scripts it, and remember every argv so
the test can say what was (and was not) asked. Each test used to write its own class for
that; this is the one, so the recording and the CommandResult it returns are the same
everywhere and a test keeps only its script.

A test scripts the answers either by passing a function of the argv, or by subclassing and
overriding `answer` (which also gets the run's timeout, stdin and env, e.g. to pass a
command on to a real transport). An answer is (stdout, stderr, returncode), or a whole
CommandResult; raising (SchedulerUnavailable, say) stands for a command that gave no
answer, and the call is recorded all the same. With no script, every command succeeds and
prints nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from jobsmith.adapters.transport import CommandResult

#: what a script answers: (stdout, stderr, returncode), or the whole result
Reply = tuple[str, str, int] | CommandResult


class ScriptedTransport:
    """Answers every command from a script and records its argv, in order, in `calls`."""

    def __init__(self, script: Callable[[tuple[str, ...]], Reply] | None = None) -> None:
        self.calls: list[tuple[str, ...]] = []
        self._script = script

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        call = tuple(argv)
        self.calls.append(call)
        reply = self.answer(call, timeout=timeout, stdin=stdin, env=env)
        if isinstance(reply, CommandResult):
            return reply
        stdout, stderr, returncode = reply
        return CommandResult(call, returncode, stdout, stderr)

    def answer(
        self,
        argv: tuple[str, ...],
        *,
        timeout: float,
        stdin: str | None,
        env: Mapping[str, str] | None,
    ) -> Reply:
        """The answer to one command: the script's, or an empty success without one."""
        return self._script(argv) if self._script is not None else ("", "", 0)

    def programs(self) -> list[str]:
        """The program of each call, in order (argv[0])."""
        return [call[0] for call in self.calls]

    def count(self, program: str) -> int:
        """How many times program was run."""
        return self.programs().count(program)

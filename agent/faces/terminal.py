"""Where a chat reads the person's lines and keys and writes its text: a terminal, or pipes.

At a terminal, lines are read with prompt_toolkit (line editing, and a history kept in the
state directory, readable by the user alone: people paste secrets into chats), keys with
click's getchar, and text written while a line is being typed appears above the prompt
(prompt_toolkit's patch_stdout), so a job that ends while the person types does not
garble their line. Without a terminal (a script feeding stdin) lines are read plainly, and
a key is the first character of a line. Ctrl-C at a prompt is KeyboardInterrupt and
Ctrl-D (or the end of stdin) EOFError, in both.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Protocol, TextIO


class Terminal(Protocol):
    """The chat's input and output."""

    def line(self, prompt: str) -> str:
        """A line the person types (KeyboardInterrupt on Ctrl-C, EOFError on Ctrl-D)."""

    def key(self, prompt: str, choices: str) -> str:
        """One of choices, as the person presses it (the first one on Enter)."""

    def write(self, text: str) -> None:
        """Text, as is (streamed pieces, whole lines), from any thread."""


class Pipes:
    """A chat fed by a script: lines from stdin, text to stdout, nothing echoed."""

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None) -> None:
        self._in = stdin or sys.stdin
        self._out = stdout or sys.stdout
        self._lock = threading.Lock()

    def line(self, prompt: str) -> str:
        """The next line of stdin, without its newline."""
        self.write(prompt)
        text = self._in.readline()
        if not text:
            raise EOFError
        return text.rstrip("\n")

    def key(self, prompt: str, choices: str) -> str:
        """The first character of the next line, if it is one of choices (else the first
        choice: an unclear answer is the safe one, listed first)."""
        answer = self.line(prompt).strip().lower()[:1]
        return answer if answer and answer in choices else choices[0]

    def write(self, text: str) -> None:
        """Written and flushed at once (streamed text shows as it comes)."""
        with self._lock:
            self._out.write(text)
            self._out.flush()


class Console:
    """A person at a terminal (see the module docstring)."""

    def __init__(self, history: Path) -> None:
        from jobsmith.extras import needs_extra

        with needs_extra("agent", "`jobsmith chat` at a terminal"):
            from prompt_toolkit import PromptSession
            from prompt_toolkit.history import FileHistory

        history.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(history, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(history, 0o600)  # an older, wider file is narrowed too
        self._prompt: PromptSession[str] = PromptSession(history=FileHistory(str(history)))
        self._lock = threading.Lock()

    def line(self, prompt: str) -> str:
        """A line, with editing and history; what other threads write meanwhile goes
        above it (and only then: a turn's own text is written straight to the terminal)."""
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True):
            return self._prompt.prompt(prompt)

    def key(self, prompt: str, choices: str) -> str:
        """One key press, no Enter needed (Enter: the first choice)."""
        import click

        self.write(prompt)
        while True:
            pressed = click.getchar().lower()
            if pressed in ("\r", "\n"):
                pressed = choices[0]
            if pressed == "\x03":
                raise KeyboardInterrupt
            if pressed in choices:
                self.write(pressed + "\n")
                return pressed

    def write(self, text: str) -> None:
        """Written and flushed (above the prompt while one is shown: sys.stdout is then
        prompt_toolkit's proxy)."""
        with self._lock:
            sys.stdout.write(text)
            sys.stdout.flush()


def terminal_for(history: Path) -> Terminal:
    """A Console at a terminal, else Pipes."""
    if sys.stdin.isatty() and sys.stdout.isatty():
        return Console(history)
    return Pipes()

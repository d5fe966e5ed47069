"""`jobsmith chat` as a person uses it: in a real terminal (tmux), typed with send-keys and
read with capture-pane, against the loopback Messages-API server, on the lab cluster.

One session of a person's: a question whose answer streams in (seen half-written on the
screen before it ends), a submission held for approval and approved with one key press
(a real Slurm job), Ctrl-C in the middle of a streamed answer (the chat goes on), then
Ctrl-D, and the chat says what it cost.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lab_cli import LAB_SITE
from messages_server import MessagesServer, Reply, message, text, tool_use
from test_ask import KEY, ledger

JOBSMITH = str(Path(sys.executable).with_name("jobsmith"))
pytestmark = [
    pytest.mark.usefixtures("lab_cluster"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


class Screen:
    """A tmux session of its own (its own server socket), running one command."""

    def __init__(self, command: str) -> None:
        self.socket = f"jobsmith-test-{secrets.token_hex(4)}"
        self.tmux("new-session", "-d", "-s", "chat", "-x", "150", "-y", "50", command)
        self.tmux("set-option", "-t", "chat", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        argv = ["tmux", "-L", self.socket, *args]
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def type(self, line: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", line)
        self.keys("Enter")

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "chat")

    def wait_for(self, wanted: str, timeout: float = 60, times: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.text()
            if shown.count(wanted) >= times:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {wanted!r} on the screen:\n{shown}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def screen(
    server: MessagesServer, user_site: Callable[[str], None], workdir: Path
) -> Iterator[Callable[[], Screen]]:
    user_site(
        f"model:\n  base_url: '{server.url}'\n  max_retries: 0\n"
        "policy:\n  approval:\n    core_hours: 0.01\n"
    )
    names = ("HOME", "USER", "PATH", "JOBSMITH_CONFIG_DIR", "JOBSMITH_STATE_DIR")
    environment = {name: os.environ[name] for name in names if name in os.environ}
    environment |= {"ANTHROPIC_API_KEY": KEY, "TERM": "xterm-256color"}
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items())
    command = f"cd {shlex.quote(str(workdir))} && env -i {assignments} {JOBSMITH} "
    command += f"--site {shlex.quote(str(LAB_SITE))} chat"
    opened: list[Screen] = []

    def start() -> Screen:
        opened.append(Screen(command))
        return opened[-1]

    yield start
    for each in opened:
        each.close()


STORY = " ".join(f"word{i}" for i in range(60))


def test_a_person_chats_in_a_terminal(
    server: MessagesServer,
    screen: Callable[[], Screen],
    workdir: Path,
    jobsmith_home: Path,
) -> None:
    job = {"template": "command", "params": {"command": "echo typed"}, "log_dir": str(workdir)}
    server.script(
        Reply(body=message(text(STORY)), pause_s=0.1),  # streams for a few seconds
        message(text("Submitting."), tool_use("submit", {"job": job})),
        message(text("Approved and queued.")),
        Reply(body=message(text(STORY.replace("word", "verse"))), pause_s=0.2),  # Ctrl-C
        message(text("Shorter then.")),
    )
    term = screen()
    term.wait_for("you>")

    # a streamed answer: seen half-written before it ends
    term.type("tell me a story")
    half = term.wait_for("word5")
    assert "word59" not in half
    term.wait_for("word59")

    # a held submission, shown whole, approved with one key
    term.wait_for("you>", times=2)  # the next prompt: typing ahead is not what is tested
    term.type("run echo typed")
    shown = term.wait_for("approve? [n]o / [y]es")
    assert "── needs your approval" in shown and "echo typed" in shown
    assert "── estimated start: 20" in shown
    term.keys("y")
    term.wait_for("Approved and queued.")
    assert "→ submitted job " in term.text()
    assert len(ledger(jobsmith_home)) == 1

    # Ctrl-C in the middle of a streamed answer: the turn is cut, the chat goes on
    term.wait_for("you>", times=3)
    term.type("another story")
    term.wait_for("verse3")
    term.keys("C-c")
    term.wait_for("[interrupted]")
    term.type("shorter please")
    term.wait_for("Shorter then.")

    term.keys("C-d")
    final = term.wait_for("this chat: 5 model call(s)")
    assert "Traceback" not in final

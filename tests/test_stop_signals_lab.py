"""`jobsmith watch`, `mcp` and `chat` stop when told, however they were started (issue 21).

A process started with `&` from a non-interactive shell (a CI service, cron, a detached
run) starts with SIGINT ignored, and Python then installs no KeyboardInterrupt handler:
the outage test's watcher never heard its SIGINT there. Here each process is started
both ways (SIGINT ignored, as `&` leaves it, through preexec_fn) and stopped with SIGTERM,
or with SIGINT where it was not ignored. Each ends with status 0 and leaves the user's
watcher lock free (a `watch --once` after it takes the lock: not exit 10). A SIGTERM
that arrives while the watcher's sacct runs is kept: the cycle finishes, its document is
printed, then the process ends.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lab_cli import LAB_SITE, js

pytestmark = pytest.mark.usefixtures("lab_cluster")

WATCH = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "watch", "--json"]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` in a script leaves it


def _default_sigint() -> None:
    # as a terminal's shell starts a command: whatever this test run inherited (a
    # detached CI run starts with SIGINT ignored, and its children with it)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str], cwd: Path, *, sigint_ignored: bool, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **kw.pop("env", {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if sigint_ignored else _default_sigint,
        **kw,
    )


def _first_line(proc: subprocess.Popen[str], timeout_s: float = 60) -> str:
    """proc's first line of stdout, or '' if none came within timeout_s."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    return proc.stdout.readline() if ready else ""


def _initialized(server: subprocess.Popen[str], timeout_s: float = 60) -> None:
    """Send the MCP client's first request over stdio and wait for its answer (a fixed
    sleep was too short for the SDK's import on a loaded CI machine)."""
    assert server.stdin is not None and server.stdout is not None
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "jobsmith-tests", "version": "1"},
        },
    }
    server.stdin.write(json.dumps(hello) + "\n")
    server.stdin.flush()
    ready, _, _ = select.select([server.stdout], [], [], timeout_s)
    assert ready, f"no answer to initialize in {timeout_s} s"
    answer = json.loads(server.stdout.readline())
    assert answer.get("id") == 1 and "result" in answer, answer


def _ignores_sigint(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    raise AssertionError("no SigIgn line")


def _wait_for_lock(state_dir: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not (state_dir / "watch.lock").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the watcher never took its lock"
        time.sleep(0.1)


def _lock_is_free() -> bool:
    once = js("watch", "--once", "--json")
    return once.exit_code == 0


def _open_job(workdir: Path) -> str:
    sub = js("submit", "command", "-P", "command=sleep 90", "--log-dir", str(workdir))
    assert sub.exit_code == 0, sub.output
    return sub.stdout.strip()


@pytest.mark.parametrize("sigint_ignored", [True, False], ids=["started-with-&", "foreground"])
def test_the_watcher_ends_on_sigterm_with_status_0_and_frees_its_lock(
    user_site: Any, workdir: Path, jobsmith_home: Path, sigint_ignored: bool
) -> None:
    job_id = _open_job(workdir)
    watcher = _start([*WATCH, "--interval", "2"], workdir, sigint_ignored=sigint_ignored)
    try:
        _wait_for_lock(jobsmith_home / "state", watcher)
        assert _ignores_sigint(watcher.pid) is sigint_ignored
        if sigint_ignored:
            watcher.send_signal(signal.SIGINT)  # not for a background process: ignored
            time.sleep(2)
            assert watcher.poll() is None
        watcher.send_signal(signal.SIGTERM)
        _, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 0, err
        assert "Traceback" not in err, err
        assert _lock_is_free()
    finally:
        watcher.kill()
        subprocess.run(["scancel", job_id], check=False)


def test_ctrl_c_ends_a_foreground_watcher_with_status_0(
    user_site: Any, workdir: Path, jobsmith_home: Path
) -> None:
    job_id = _open_job(workdir)
    watcher = _start([*WATCH, "--interval", "2"], workdir, sigint_ignored=False)
    try:
        _wait_for_lock(jobsmith_home / "state", watcher)
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 0 and "Traceback" not in err, err
        assert _lock_is_free()
    finally:
        watcher.kill()
        subprocess.run(["scancel", job_id], check=False)


def test_a_sigterm_during_the_watchers_sacct_lets_the_cycle_finish_then_ends(
    user_site: Any, workdir: Path, jobsmith_home: Path, tmp_path: Path
) -> None:
    """The first cycle's sacct is slowed (a wrapper sleeps 4 s before the real one); the
    SIGTERM comes while it sleeps. The cycle's document still comes, with the job's state
    from that very sacct, and only then does the process end."""
    job_id = _open_job(workdir)
    real = shutil.which("sacct")
    assert real is not None
    wrap, began, ended = tmp_path / "wrap", tmp_path / "began", tmp_path / "ended"
    wrap.mkdir()
    (wrap / "sacct").write_text(
        f'#!/bin/sh\ntouch {began}\nsleep 4\n{real} "$@"\ns=$?\ntouch {ended}\nexit $s\n'
    )
    (wrap / "sacct").chmod(0o755)
    env = {"PATH": f"{wrap}:{os.environ['PATH']}"}
    watcher = _start([*WATCH, "--interval", "60"], workdir, sigint_ignored=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while not began.exists():
            assert watcher.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        watcher.send_signal(signal.SIGTERM)
        out, err = watcher.communicate(timeout=60)
        assert watcher.returncode == 0 and "Traceback" not in err, err
        assert ended.exists()  # the sacct under way was not cut
        doc = json.loads(out)  # exactly one cycle's document
        assert doc["scheduler_ok"] is True and doc["watched"] >= 1, doc
        assert [c["job_id"] for c in doc["changes"]] == [job_id], doc
        assert _lock_is_free()
    finally:
        watcher.kill()
        subprocess.run(["scancel", job_id], check=False)


def test_the_mcp_server_ends_on_sigterm_with_status_0(user_site: Any, workdir: Path) -> None:
    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "mcp"]
    server = _start(argv, workdir, sigint_ignored=True, stdin=subprocess.PIPE)
    try:
        _initialized(server)  # up and reading stdin: it answered the client's first request
        assert server.poll() is None, server.communicate()
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
        assert server.returncode == 0 and "Traceback" not in err, err
    finally:
        server.kill()


def test_a_chat_ends_on_sigterm_with_status_0_and_its_cost_line(
    user_site: Any, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-never-used")  # no model call is made
    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "chat"]
    chat = _start(argv, workdir, sigint_ignored=True, stdin=subprocess.PIPE)
    try:
        # its banner, written once SIGTERM is handled (a fixed 3 s sleep was too short for
        # the imports on a loaded CI machine: the signal came first and ended it with -15)
        assert _first_line(chat).startswith("jobsmith chat."), chat.communicate()
        assert chat.poll() is None, chat.communicate()
        chat.send_signal(signal.SIGTERM)
        out, err = chat.communicate(timeout=30)
        assert chat.returncode == 0 and "Traceback" not in err, err
        assert "this chat made no model call" in out, out
    finally:
        chat.kill()

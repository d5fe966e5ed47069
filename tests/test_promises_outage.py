"""The watcher's backoff loop through a real controller outage (issue 16, part 2).

`jobsmith watch --interval 2` runs as its own process while a job of its session runs
and another waits on it (the waiting one is what needs the controller), and slurmctld is
taken away for 30 s (`restart-ctld --pause`, which the lab lets its user run through
sudo), with the site's command timeout at 5 s. Each cycle's start is taken from a wrapper
around the real `sacct` (a cycle asks sacct exactly once, first) and its end from the
JSON document it prints. The test checks the loop itself, not only next_interval: while
Slurm does not answer, the pause after each silent cycle doubles from the base interval;
after the controller is back, the first answered cycle brings it back to the base; and
the notes on stderr say so. It runs alone, after the rest: other tests would meet the
outage too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest
from lab_cli import LAB_SITE, js

BASE_S = 2.0
OUTAGE_S = 30
TIMEOUT_S = 5

pytestmark = [pytest.mark.disruptive, pytest.mark.usefixtures("lab_cluster")]


class Cycles:
    """The JSON documents a watcher prints on stdout, each with when it arrived."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        lines: list[str] = []
        for line in stream:
            lines.append(line)
            if line == "}\n":  # print_json's documents end with a closing brace alone
                self.seen.append((time.time(), json.loads("".join(lines))))
                lines = []

    def summary(self) -> list[tuple[float, bool, str | None]]:
        """(arrival, answered, error) of each cycle: enough to see what went wrong."""
        return [(round(t, 1), doc["scheduler_ok"], doc["error"]) for t, doc in self.seen]

    def wait_for(self, done: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not done(self.seen):
            assert time.monotonic() < deadline, self.summary()
            time.sleep(0.2)


def _back_after_silence(seen: list[tuple[float, dict[str, Any]]], answered_after: int) -> bool:
    """At least two silent cycles, then `answered_after` answered ones."""
    oks = [doc["scheduler_ok"] for _, doc in seen]
    silent = [i for i, ok in enumerate(oks) if not ok]
    return len(silent) >= 2 and sum(oks[silent[-1] + 1 :]) >= answered_after


def test_watcher_backs_off_while_slurmctld_is_down_and_returns_to_its_interval(
    user_site: Any, workdir: Path, tmp_path: Path
) -> None:
    # Slurm's clients wait for a controller that went away: a cycle goes silent only
    # when that wait outlives the site's command timeout, so the outage must outlast it
    user_site(f"scheduler:\n  command_timeout_s: {TIMEOUT_S}\n")
    job = js("submit", "command", "-P", "command=sleep 150", "--log-dir", str(workdir))
    assert job.exit_code == 0, job.output
    job_id = job.stdout.strip()
    # a job that waits on it: a running job is followed by sacct alone, which slurmdbd
    # answers without the controller (issue 26); what waits is asked of squeue, so every
    # cycle meets the outage (without it the test passed or failed by timing)
    after = js("submit", "command", "-P", "command=true", "-d", f"afterok:{job_id}",
               "--log-dir", str(workdir))  # fmt: skip
    assert after.exit_code == 0, after.output
    starts, wrapper = tmp_path / "sacct.starts", tmp_path / "wrap"
    wrapper.mkdir()
    real = shutil.which("sacct")
    assert real is not None
    (wrapper / "sacct").write_text(f'#!/bin/sh\ndate +%s.%N >> {starts}\nexec {real} "$@"\n')
    (wrapper / "sacct").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{wrapper}:{os.environ['PATH']}",
        "PYTHONUNBUFFERED": "1",  # each cycle's document as it is printed
    }
    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "watch", "--json"]
    notes = tmp_path / "watch.stderr"
    with notes.open("w") as stderr:
        watcher = subprocess.Popen(
            [*argv, "--interval", f"{BASE_S:g}"],
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert watcher.stdout is not None
        cycles = Cycles(watcher.stdout)
        cycles.wait_for(lambda seen: any(doc["scheduler_ok"] for _, doc in seen), 60)
        outage = subprocess.run(
            [
                "sudo", "-n", "/usr/local/sbin/jobsmith-slurm-lab", "restart-ctld",
                "--pause", str(OUTAGE_S),
            ],
            capture_output=True,
            text=True,
            timeout=OUTAGE_S + 120,
        )  # fmt: skip
        assert outage.returncode == 0, outage.stderr
        cycles.wait_for(lambda seen: _back_after_silence(seen, 2), 180)
    finally:
        # the watcher's way out, which arrives however the test run was started (SIGINT
        # does not where it started ignored: a detached CI run); it releases its lock
        watcher.send_signal(signal.SIGTERM)
        try:
            assert watcher.wait(timeout=30) == 0
        finally:
            watcher.kill()
            subprocess.run(["scancel", job_id, after.stdout.strip()], check=False)

    seen = list(cycles.seen)
    begun = [float(t) for t in starts.read_text().split()]
    assert len(begun) >= len(seen)  # one sacct per cycle, and each cycle began with it
    ok = [doc["scheduler_ok"] for _, doc in seen]
    # the interval the loop should have used after each cycle (agent/watcher/cycle.py's rule)
    intervals, current = [], BASE_S
    for answered in ok:
        current = BASE_S if answered else min(current * 2, 3600)
        intervals.append(current)
    pauses = [begun[i + 1] - seen[i][0] for i in range(len(seen) - 1)]
    shown = list(zip(ok, intervals, [round(p, 1) for p in pauses], strict=False))
    silent = [i for i, answered in enumerate(ok) if not answered]
    assert silent == list(range(silent[0], silent[-1] + 1)), shown  # one outage, no flapping
    assert len(silent) >= 2 and intervals[silent[1]] == 4 * BASE_S, shown
    for i in silent:  # after each silent cycle, a pause twice the one before
        assert 0.8 * intervals[i] <= pauses[i] <= intervals[i] + 3, (i, shown)
    back = silent[-1] + 1
    assert ok[back] and pauses[back] <= BASE_S + 3, shown  # the first answer: base again
    # a note each time the interval changes: every doubling, then the return to the base
    polls = re.findall(r"jobsmith watch: next poll in (\d+)s", notes.read_text())
    assert polls == [f"{intervals[i]:.0f}" for i in silent] + [f"{BASE_S:.0f}"], polls
    states = [c["state"] for _, doc in seen for c in doc["changes"] if c["job_id"] == job_id]
    assert set(states) <= {"PENDING", "RUNNING"}, states  # never failed for Slurm's silence

"""On the lab: a watcher whose sacct serves a stand-in row still runs one sacct per cycle,
keeps the job's state and decides nothing until the real row is back (issue 21).

slurmdbd's stand-in row for a just-ended job lasts a second or two, too short to catch on
purpose, so a wrapper in front of the real `sacct` makes it last: while a flag file
exists it rewrites the job's own row as slurmdbd's stand-in reads (JobName 'allocation',
no partition, no time limit, no memory asked: tests/fixtures/lab-22.05/
sacct-placeholder-pipe.txt), the real state and exit kept. Every other byte is the real
sacct's, and every call is counted. The watcher is a real `jobsmith watch` process.
"""

from __future__ import annotations

import json
import os
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

pytestmark = pytest.mark.usefixtures("lab_cluster")

#: the wrapper: the real sacct's output, the target job's row made a stand-in while the
#: flag exists; one line per call in the count file. Its arguments are in a file beside
#: it: jobsmith passes Slurm's commands only the environment its allowlist lets through
#: (adapters/environment_rule.py)
WRAPPER = r"""#!/usr/bin/python3
import os, subprocess, sys
with open(os.path.join(os.path.dirname(sys.argv[0]), "stand-in-args")) as fh:
    real, job, flag, count, delim = fh.read().split("\n")
with open(count, "a") as fh:
    fh.write("call\n")
res = subprocess.run([real, *sys.argv[1:]], capture_output=True, text=True)
out = res.stdout
if os.path.exists(flag) and res.returncode == 0 and out:
    lines = out.split("\n")
    header = lines[0].split(delim)
    blank = {"Partition": "", "Timelimit": "", "ReqMem": "", "JobName": "allocation"}
    for i, line in enumerate(lines[1:], 1):
        cells = line.split(delim)
        if len(cells) == len(header) and cells[header.index("JobIDRaw")] == job:
            for name, value in blank.items():
                if name in header:
                    cells[header.index(name)] = value
            lines[i] = delim.join(cells)
    out = "\n".join(lines)
sys.stdout.write(out)
sys.stderr.write(res.stderr)
sys.exit(res.returncode)
"""


class Cycles:
    """The JSON documents a `watch --json` prints, as they arrive."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        lines: list[str] = []
        for line in stream:
            lines.append(line)
            if line == "}\n":
                self.seen.append(json.loads("".join(lines)))
                lines = []

    def wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.seen) < count:
            assert time.monotonic() < deadline, self.seen
            time.sleep(0.1)


def _sacct_wrapper(tmp_path: Path, job_id: str, flag: Path) -> tuple[dict[str, str], Path]:
    from jobsmith.adapters.slurm.commands.argv import DELIMITER

    real = shutil.which("sacct")
    assert real is not None
    wrap, count = tmp_path / "wrap", tmp_path / "sacct.calls"
    wrap.mkdir()
    (wrap / "sacct").write_text(WRAPPER)
    (wrap / "sacct").chmod(0o755)
    args = "\n".join([real, job_id, str(flag), str(count), DELIMITER])
    (wrap / "stand-in-args").write_text(args)
    env = {**os.environ, "PATH": f"{wrap}:{os.environ['PATH']}", "PYTHONUNBUFFERED": "1"}
    return env, count


def _calls(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def test_one_sacct_per_cycle_while_a_stand_in_row_is_served_and_no_decision_from_it(
    user_site: Any, workdir: Path, tmp_path: Path
) -> None:
    sub = js("submit", "command", "-P", "command=sleep 6; exit 3", "--log-dir", str(workdir))
    assert sub.exit_code == 0, sub.output
    job_id = sub.stdout.strip()
    flag = tmp_path / "serve-stand-in"
    env, count = _sacct_wrapper(tmp_path, job_id, flag)
    argv = [sys.executable, "-m", "jobsmith", "--site", str(LAB_SITE), "watch", "--json"]
    watcher = subprocess.Popen(
        [*argv, "--interval", "1"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        cycles = Cycles(watcher.stdout)
        # until the job is seen running, with the real rows
        deadline = time.monotonic() + 90
        while not any(
            c["job_id"] == job_id and c["state"] == "RUNNING"
            for doc in cycles.seen
            for c in doc["changes"]
        ):
            assert time.monotonic() < deadline, cycles.seen
            time.sleep(0.2)
        flag.touch()  # from here sacct answers for the job with a stand-in row
        served_from = len(cycles.seen)
        calls_before = _calls(count)
        # long enough for the job to end (FAILED 3:0) under the stand-in
        time.sleep(10)
        served = cycles.seen[served_from:]
        assert len(served) >= 4, served
        calls_while_served = _calls(count) - calls_before
        flag.unlink()
        cycles.wait_for(len(cycles.seen) + 3, 60)
    finally:
        watcher.send_signal(signal.SIGTERM)
        try:
            watcher.wait(timeout=30)
        finally:
            watcher.kill()
            subprocess.run(["scancel", job_id], check=False)

    # one sacct per cycle, however long the stand-in row stays (a cycle may be under way
    # at either end of the window: at most one call more than the cycles seen in it)
    assert len(served) <= calls_while_served <= len(served) + 1, (len(served), calls_while_served)
    # while the stand-in was served nothing was decided, and the only change is the one
    # the controller reported (its FAILED, for MinJobAge after the end): the row's own
    # state never reached the session
    assert all(doc["scheduler_ok"] for doc in served), served
    assert [d for doc in served for d in doc["decisions"]] == [], served
    changed = [c["state"] for doc in served for c in doc["changes"]]
    assert changed in ([], ["FAILED"]), served
    # the real row back: the failure recorded once in all, and decided about once, from
    # the real record
    after = cycles.seen[served_from + len(served) :]
    ends = [c["state"] for doc in after for c in doc["changes"] if c["job_id"] == job_id]
    assert changed + ends == ["FAILED"], (served, after)
    decisions = [d for doc in after for d in doc["decisions"] if d["job_id"] == job_id]
    assert len(decisions) == 1, after
    status = js("status", job_id, "--json")
    (job,) = json.loads(status.stdout)["jobs"]
    assert job["state"] == "FAILED" and job["record"]["name"].startswith("command.js-")
    assert job["record"]["stand_in"] is False

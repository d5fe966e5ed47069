"""A fed workload none of whose parts fits when it is submitted, on the lab cluster
(issue 28, item 1): the user's own five `sbatch` jobs fill QoS `tiny` (MaxSubmitJobsPerUser
5, made by `scripts/slurm-lab up`), so an 11-task array submitted through jobsmith has no
job at first: `submit` says nothing was submitted yet (no id on stdout), `status` shows
the workload, and `jobsmith watch --once` cycles feed it once the sleeps end (no job
jobsmith submitted ended: the room came from the user's own), until all 11 tasks
complete, never more than 5 queued; its last part, of one task, waits for room as the
others do (sbatch would refuse it). Runs as alice
(`asalice-wt WORKTREE tests/test_feeder_later_lab.py`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import fill_tiny, js, most_queued_in_tiny

#: alone: it fills QoS tiny's whole per-user limit, which tests/test_submit_limits_lab.py
#: and tests/test_feeder_lab.py need empty
pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.alone]

SITE = "qos:\n  allowed: [normal, tiny]\n  default: normal\n"


def test_a_workload_that_fits_nowhere_at_first_is_shown_and_fed_by_the_watcher(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site(SITE)
    with fill_tiny(20):
        submitted = js(
            "submit", "command", "-a", "0-10", "--qos", "tiny", "-t", "1", "--no-advice",
            "-P", "command=touch done_$SLURM_ARRAY_TASK_ID", "--log-dir", str(workdir),
        )  # fmt: skip
        assert submitted.exit_code == 0, submitted.output
        assert submitted.stdout == ""  # no job id: nothing was submitted
        assert "nothing submitted yet: 11 tasks in 3 parts" in submitted.stderr
        assert "MaxSubmit" in submitted.stderr, submitted.stderr
        shown = js("status")
        assert "0/11 done, 11 not yet submitted" in shown.stdout, shown.stdout
        [fed] = json.loads(js("status", "--json").stdout)["workloads"]
        assert fed["line"] == "11 tasks: 0 done, 0 running, 11 not yet submitted"

        cycles = 0
        with most_queued_in_tiny() as peak:
            deadline = time.monotonic() + 240
            while len(list(workdir.glob("done_*"))) < 11 and time.monotonic() < deadline:
                assert js("watch", "--once").exit_code == 0
                cycles += 1
                time.sleep(2)
        assert sorted(p.name for p in workdir.glob("done_*")) == sorted(
            f"done_{i}" for i in range(11)
        ), f"after {cycles} watcher cycles"
        assert 0 < peak.most <= 5, peak
    # every part submitted: the workload left the index; `status --json` counts it whole
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        js("watch", "--once")  # records the last part's end
        [fed] = json.loads(js("status", "--json").stdout)["workloads"]
        if fed["done"] == 11:
            break
        time.sleep(2)
    assert fed["line"] == "11 tasks: 11 done, 0 running, 0 not yet submitted", fed

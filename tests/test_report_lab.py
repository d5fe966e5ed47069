"""The run report on the lab cluster, read the way a person reads it: a real session (a
3-task array whose task 1 fails, and a job on a fake GPU that holds ~150 MB), its page
written by `jobsmith report`, then opened in headless Chromium, whose DOM (after plotly's
scripts ran, with no network) must show every task with the memory used and requested
and the core-hours that sacct itself reports for the same jobs.

The screenshot is kept: under $JOBSMITH_ARTIFACTS if set, else tests/artifacts/ (git
ignores it) if the checkout is writable, else /var/tmp/jobsmith-artifacts (scripts/test
runs the tests as the lab user from a checkout it may not write).

Marked host_only: the other Debian release's root (scripts/slurm-other) has no Chromium.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lab_cli import js
from test_report import Page

pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.host_only]

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "chromium"

PLAN = """\
name: report-lab
steps:
  tasks:
    template: file_array
    params: {files: [t0.sh, t1.sh, t2.sh], program: bash}
    mem_mb: 200
  hog:
    template: command
    params: {command: "python3 -c 'import time; x = bytearray(150 << 20); time.sleep(6)'"}
    mem_mb: 400
    partition: gpu
    gpus: 1
"""


def chromium() -> str:
    found = shutil.which(CHROMIUM)
    if found is None:
        pytest.fail("chromium is not installed: scripts/setup installs it (apt: chromium)")
    return found


def artifacts_dir() -> Path:
    """Where the screenshot is kept (see the module's docstring)."""
    chosen = os.environ.get("JOBSMITH_ARTIFACTS")
    candidates = [Path(chosen)] if chosen else [REPO / "tests" / "artifacts"]
    candidates.append(Path("/var/tmp/jobsmith-artifacts"))
    for directory in candidates:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(directory, os.W_OK):
            return directory
    pytest.fail(f"no writable directory for test artifacts among {candidates}")


def browse(page: Path, profile: Path, *args: str) -> str:
    """Headless Chromium on the page, as a person's browser would open it (file://)."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            *args,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


# --- sacct, read here on its own ----------------------------------------------------------------


_UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def kbytes(text: str) -> int | None:
    """sacct's --units=K memory ('153600K', older releases '200Mn') in bytes."""
    match = re.fullmatch(r"([0-9.]+)([KMGT]?)[nc]?", text.strip())
    if not match:
        return None
    return int(float(match.group(1)) * _UNITS.get(match.group(2) or "K", 1024))


def seconds(text: str) -> int:
    """sacct's Elapsed ('00:00:07', '1-02:03:04') in seconds."""
    days, _, clock = text.rpartition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def sacct(job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per job or task: requested memory, peak RSS over its steps, elapsed, CPUs, GPUs."""
    out = subprocess.run(
        [
            "sacct", "-P", "-n", "-j", ",".join(job_ids), "--units=K",
            "-o", "JobID,MaxRSS,ReqMem,Elapsed,AllocCPUS,AllocTRES,State",
        ],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    jobs: dict[str, dict[str, Any]] = {}
    peaks: dict[str, list[int]] = {}
    batch_ended: set[str] = set()
    for line in out.splitlines():
        job, rss, req, elapsed, cpus, tres, state = line.split("|")
        base, _, step = job.partition(".")
        if step:
            peak = kbytes(rss)
            if peak is not None:
                peaks.setdefault(base, []).append(peak)
            if step == "batch" and state.split()[0] not in ("PENDING", "RUNNING"):
                batch_ended.add(base)
            continue
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        jobs[base] = {
            "req": kbytes(req),
            "elapsed": seconds(elapsed),
            "cpus": int(cpus),
            "gpus": int(gpus.group(1)) if gpus else 0,
            "state": state.split()[0],
        }
    for base, row in jobs.items():
        # no peak at all: the task ended before the 2-second sampler looked
        row["rss"] = max(peaks[base]) if base in peaks else None
        row["settled"] = base in batch_ended
    return jobs


def settled(job_ids: list[str], tasks: int) -> dict[str, dict[str, Any]]:
    """sacct once every task's batch step has ended (accounting can trail the controller
    that `wait` asked; a step's peak is recorded with its end)."""
    deadline = time.monotonic() + 60
    while True:
        rows = sacct(job_ids)
        if sum(r["settled"] for r in rows.values()) == tasks or time.monotonic() > deadline:
            return rows
        time.sleep(2)


# --- the test -----------------------------------------------------------------------------------


def test_the_report_page_shows_what_sacct_says(
    user_site: Callable[[str], None], workdir: Path, tmp_path: Path
) -> None:
    chromium()  # before any job: a missing browser is the first thing to say
    user_site()
    # tasks 0 and 2 run a few seconds (their core-hours are not 0); task 1 fails at once,
    # before the memory sampler ever looks: a task without MaxRSS
    (workdir / "t0.sh").write_text("sleep 3; echo fine\n")
    (workdir / "t1.sh").write_text("echo 'this task fails' >&2\nexit 3\n")
    (workdir / "t2.sh").write_text("sleep 3; echo fine too\n")
    (workdir / "plan.yaml").write_text(PLAN)
    ran = js("plan", "run", str(workdir / "plan.yaml"), "--json")
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    session, array, hog = doc["session_id"], doc["jobs"]["tasks"], doc["jobs"]["hog"]
    waited = js("wait", array, hog, "--timeout", "240")
    assert waited.exit_code == 1, waited.output  # task 1 failed, on purpose
    truth = settled([array, hog], tasks=4)
    assert set(truth) == {f"{array}_0", f"{array}_1", f"{array}_2", hog}, truth

    page = tmp_path / "report.html"
    made = js("report", session, "--output", str(page), "--json")
    assert made.exit_code == 0, made.output
    summary = json.loads(made.stdout)
    assert summary["path"] == str(page) and summary["jobs"] == 2 and summary["tasks"] == 4
    assert summary["task_counts"] == {"COMPLETED": 3, "FAILED": 1}
    assert [(f["job_id"], f["verdict"]) for f in summary["failures"]] == [
        (f"{array}_1", "nonzero_exit")
    ]
    text = js("report", session, "--output", str(page))  # the terminal's summary
    assert text.exit_code == 0 and f"report written to {page}" in text.stdout
    assert "failures: 1, re-runs: 0" in text.stdout

    profile = tmp_path / "chromium-profile"
    dom = browse(page, profile, "--dump-dom", "--virtual-time-budget=5000")
    assert "main-svg" in dom, "plotly drew no figure: its inlined script did not run"
    seen = Page(dom)
    assert seen.links == []
    rows = {r["job-id"]: r for r in seen.rows}
    assert set(rows) == set(truth)
    core_total = gpu_total = 0.0
    for job_id, want in truth.items():
        row = rows[job_id]
        assert row["state"] == want["state"], (job_id, row, want)
        assert int(row["req-mem-bytes"] or 0) == want["req"], (job_id, row, want)
        peak = int(row["max-rss-bytes"]) if row["max-rss-bytes"] else None
        assert peak == want["rss"], (job_id, row, want)
        core = int(want["cpus"]) * int(want["elapsed"]) / 3600
        gpu = int(want["gpus"]) * int(want["elapsed"]) / 3600
        assert float(row["core-hours"] or 0) == pytest.approx(core, abs=1e-6), (job_id, row)
        assert float(row["gpu-hours"] or 0) == pytest.approx(gpu, abs=1e-6), (job_id, row)
        core_total, gpu_total = core_total + core, gpu_total + gpu
    # the hog held ~150 MB of its 400 requested, on one (fake) GPU
    assert 140 * 1024**2 < int(truth[hog]["rss"]) < 400 * 1024**2
    assert truth[hog]["gpus"] == 1 and float(rows[hog]["gpu-hours"] or 0) > 0
    assert summary["core_hours"] == pytest.approx(core_total, abs=1e-5)
    assert summary["gpu_hours"] == pytest.approx(gpu_total, abs=1e-5)
    assert "failures" in seen.ids and "this task fails" in "".join(seen.text)

    shot = artifacts_dir() / f"report-{session}.png"
    browse(page, profile, f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

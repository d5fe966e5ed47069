"""Advice at submission on the lab cluster (issue 14, parts 1 and 2): a right-sized
request from real accounting of runs made for the purpose, and the earliest start from
real `sbatch --test-only` estimates in partitions with different loads."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lab_cli import js

lab = pytest.mark.usefixtures("lab_cluster")

#: holds ~200 MiB for 5 s, long enough for the 2-second memory sampler to see it
HOG = "python3 -c 'import time; x = bytearray(200 << 20); time.sleep(5)'"


def _sacct(job_ids: list[str], fields: str) -> list[list[str]]:
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", ",".join(job_ids), "-o", fields, "--noconvert"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [line.split("|") for line in out.splitlines() if line]


def _submit(*args: str) -> dict[str, object]:
    out = js("submit", "command", "-P", f"command={HOG}", "--mem", "4G", *args, "--json")
    assert out.exit_code == 0, out.output
    return dict(json.loads(out.stdout))


@lab
def test_a_request_is_right_sized_from_the_real_accounting_of_earlier_runs(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site("")
    runs = [str(_submit("--no-advice")["job_id"]) for _ in range(3)]
    assert js("wait", *runs, "--timeout", "240").exit_code == 0
    # MaxRSS per step in bytes (--noconvert): a job's peak is its steps' highest
    peaks: dict[str, int] = {}
    for job_id, rss in _sacct(runs, "JobID,MaxRSS"):
        if rss:
            base = job_id.split(".")[0]
            peaks[base] = max(peaks.get(base, 0), int(rss))
    assert set(peaks) == set(runs) and min(peaks.values()) > 150 * 2**20, peaks

    dry = _submit("--dry-run")
    sizing = dry["advice"]["sizing"]  # type: ignore[index]
    assert sizing["usage"]["basis"] == "same template and parameters"
    assert sizing["usage"]["runs"] == 3
    assert sizing["usage"]["peak_mem_mb_p95"] == math.ceil(max(peaks.values()) / 2**20)
    changes = {c["field"]: c for c in sizing["changes"]}
    proposed = changes["mem_mb"]["proposed"]
    assert max(peaks.values()) / 2**20 < proposed < 4096
    assert changes["mem_mb"]["requested"] == 4096
    assert changes["time_limit_s"]["proposed"] == 600  # 5 s runs, against debug's 30 min
    costs = dry["advice"]  # type: ignore[index]
    assert costs["proposed_cost"]["core_hours"] < costs["requested_cost"]["core_hours"]

    text = js("submit", "command", "-P", f"command={HOG}", "--mem", "4G", "--dry-run")
    assert "3 completed runs (same template and parameters)" in text.stderr
    assert f"--mem {proposed}M" in text.stderr and "add --right-size to take it" in text.stderr

    taken = _submit("--right-size")
    assert taken["advice"]["applied"] == ["right_size"]  # type: ignore[index]
    job_id = str(taken["job_id"])
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout
    assert f"MinMemoryNode={proposed}M" in shown and "TimeLimit=00:10:00" in shown, shown
    assert js("wait", job_id, "--timeout", "120").exit_code == 0


@pytest.fixture
def busy_debug(lab_cluster: str) -> Iterator[list[str]]:
    """debug's node held by one running 2-CPU job, with a second waiting in debug."""
    ids: list[str] = []

    def sbatch(*args: str) -> str:
        out = subprocess.run(
            ["sbatch", "--parsable", "-p", "debug", "-c", "2", "--mem", "100M",
             "-o", "/dev/null", "-J", "jobsmith-test-filler", *args],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        ids.append(out.stdout.strip().split(";")[0])
        return ids[-1]

    try:
        running = sbatch("-t", "5", "--wrap", "sleep 300")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _state(running) != "RUNNING":
            time.sleep(1)
        assert _state(running) == "RUNNING"
        sbatch("-t", "5", "--wrap", "sleep 1")
        yield ids
    finally:
        subprocess.run(["scancel", *ids], check=False)


def _state(job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip()


@lab
@pytest.mark.alone  # it fills the lab's node for a minute: the others' jobs would wait
def test_the_partition_with_the_earliest_start_is_offered_and_taken(
    user_site: Callable[[str], None], workdir: Path, busy_debug: list[str]
) -> None:
    user_site("")
    asked = js("submit", "command", "-P", "command=true", "--dry-run", "--json")
    assert asked.exit_code == 0, asked.output
    advice = json.loads(asked.stdout)["advice"]
    starts = {e["partition"]: e["estimated_start"] for e in advice["partitions"]}
    assert set(starts) == {"debug", "long"}  # no GPUs asked: the gpu partition is not offered
    # debug's estimate waits for the job queued there; long's does not
    assert starts["long"] < starts["debug"], starts
    assert advice["partition"] == "debug" and advice["earliest"] == "long"

    text = js("submit", "command", "-P", "command=true", "--dry-run")
    assert "Slurm would start it earlier in partition long" in text.stderr
    assert "--partition long (or --earliest) takes it" in text.stderr

    taken = js("submit", "command", "-P", "command=true", "--earliest", "--json")
    assert taken.exit_code == 0, taken.output
    document = json.loads(taken.stdout)
    busy_debug.append(str(document["job_id"]))  # cancelled with the fillers
    assert document["advice"]["applied"] == ["earliest"]
    shown = subprocess.run(
        ["scontrol", "show", "job", str(document["job_id"])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "Partition=long" in shown

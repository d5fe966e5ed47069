"""A site's `policy.advice: apply` is the judge's, so every face applies it (issue 22,
part 3): ask (the real anthropic SDK against the loopback Messages server), the MCP
server's check and token submission, and a plan run take the right-sized request from
real accounting of earlier runs, as `submit` always did; a plan takes the partition
where Slurm would start its job earliest. Before the judge, only the CLI applied them:
these submissions went out with the 4 GiB and 30 minutes they asked for.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from lab_cli import js
from mcp_client import call, stdio_session
from messages_server import MessagesServer, message, text, tool_use
from test_advice_lab import HOG, busy_debug  # noqa: F401 (busy_debug: a fixture)

lab = pytest.mark.usefixtures("lab_cluster")

APPLY_RIGHT_SIZE = "policy:\n  advice:\n    right_size: apply\n"
APPLY_EARLIEST = "policy:\n  advice:\n    earliest_start: apply\n"


def _recorded(jobsmith_home: Path) -> dict[str, dict[str, Any]]:
    """The ledger: each submission's record, by Slurm job id."""
    files = (jobsmith_home / "state" / "jobs").glob("*.json")
    return {p.stem: json.loads(p.read_text()) for p in files}


def _new_job(jobsmith_home: Path, before: set[str]) -> dict[str, Any]:
    """The one submission recorded since before."""
    (job_id,) = set(_recorded(jobsmith_home)) - before
    return _recorded(jobsmith_home)[job_id]


def _hog(workdir: Path) -> dict[str, Any]:
    """The request as a model or an MCP client sends it: 4 GiB, the template's time."""
    job = {"template": "command", "params": {"command": HOG}, "log_dir": str(workdir)}
    return {"job": {**job, "mem_mb": 4096}}


def _three_runs(workdir: Path) -> float:
    """Three completed runs of the hog (the history right-sizing learns from); returns
    their highest peak in MiB."""
    runs = []
    for _ in range(3):
        out = js("submit", "command", "-P", f"command={HOG}", "--mem", "4G", "--no-advice")
        assert out.exit_code == 0, out.output
        runs.append(out.stdout.strip())
    assert js("wait", *runs, "--timeout", "240").exit_code == 0
    out = subprocess.run(
        ["sacct", "-n", "-P", "-j", ",".join(runs), "-o", "MaxRSS", "--noconvert"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return max(int(line) for line in out.split() if line.strip()) / 2**20


def _right_sized(record: dict[str, Any], peak_mib: float) -> None:
    options = record["options"]
    assert peak_mib < options["mem_mb"] < 4096, (peak_mib, options)
    assert options["time_limit_s"] == 600, options  # 5 s runs, against debug's 30 min


@lab
def test_ask_mcp_and_plans_take_the_right_size_a_site_applies(
    server: MessagesServer,
    model_yaml: str,
    user_site: Callable[[str], None],
    workdir: Path,
    jobsmith_home: Path,
) -> None:
    user_site(model_yaml + APPLY_RIGHT_SIZE)
    peak = _three_runs(workdir)

    # ask: the model's submit call (a conversation that has read nothing: not held)
    before = set(_recorded(jobsmith_home))
    server.script(message(tool_use("submit", _hog(workdir))), message(text("submitted")))
    out = js("ask", "run the memory hog again", "--json")
    assert out.exit_code == 0, out.output
    _right_sized(_new_job(jobsmith_home, before), peak)

    # MCP: the check shows the taken advice in its script; the token submits exactly that
    async def mcp() -> tuple[dict[str, Any], dict[str, Any]]:
        async with stdio_session() as client:
            checked, failed = await call(client, "check_job", _hog(workdir))
            assert not failed, checked
            token = {"token": checked["token"], "script_sha256": checked["script_sha256"]}
            submitted, failed = await call(client, "submit_job", token)
            assert not failed, submitted
            return checked, submitted

    before = set(_recorded(jobsmith_home))
    checked, submitted = anyio.run(mcp)
    assert checked["advice"]["applied"] == ["right_size"], checked["advice"]
    record = _new_job(jobsmith_home, before)
    assert record["job_id"] == submitted["job_id"]
    _right_sized(record, peak)
    assert f"--mem={record['options']['mem_mb']}M" in checked["script"]

    # a plan's step
    plan = workdir / "hog.yaml"
    plan.write_text(
        "name: hog\nsteps:\n  hog:\n    template: command\n"
        f"    params: {{command: {json.dumps(HOG)}}}\n    mem_mb: 4096\n"
    )
    before = set(_recorded(jobsmith_home))
    ran = js("plan", "run", str(plan), "--json")
    assert ran.exit_code == 0, ran.output
    _right_sized(_new_job(jobsmith_home, before), peak)

    # and the person who says --no-advice still gets what they asked for
    before = set(_recorded(jobsmith_home))
    out = js("submit", "command", "-P", f"command={HOG}", "--mem", "4G", "--no-advice")
    assert out.exit_code == 0, out.output
    assert _new_job(jobsmith_home, before)["options"]["mem_mb"] == 4096
    subprocess.run(["scancel", *(set(_recorded(jobsmith_home)))], check=False)


@lab
@pytest.mark.alone  # it fills the lab's node for a minute: the others' jobs would wait
def test_a_plan_takes_the_earliest_partition_a_site_applies(
    user_site: Callable[[str], None],
    workdir: Path,
    jobsmith_home: Path,
    busy_debug: list[str],  # noqa: F811 (the fixture imported above)
) -> None:
    user_site(APPLY_EARLIEST)
    plan = workdir / "quick.yaml"
    plan.write_text(
        "name: quick\nsteps:\n  one:\n    template: command\n    params: {command: 'true'}\n"
    )
    checked = js("plan", "check", str(plan), "--json")
    assert checked.exit_code == 0, checked.output
    (step,) = json.loads(checked.stdout)["steps"]
    assert step["job"]["options"]["partition"] == "long", step["job"]["options"]
    ran = js("plan", "run", str(plan), "--json")
    assert ran.exit_code == 0, ran.output
    job_id = str(json.loads(ran.stdout)["jobs"]["one"])
    busy_debug.append(job_id)  # cancelled with the fillers
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout
    assert "Partition=long" in shown, shown

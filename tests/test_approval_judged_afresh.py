"""`approve` is a fresh judgement (issue 23, part 4): the approval is recorded only for a
step that will run. With the site file broken after the hold, or an input replaced by a
symlink out of the allowed roots, `approve` refuses in one line, records nothing, and
the step stays in `pending` (it had left it, and an unprompted `sessions resume` later
submitted the old script under the old policy). On the lab cluster, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lab_cli import js

pytestmark = pytest.mark.usefixtures("lab_cluster")

HELD = "policy:\n  approval:\n    core_hours: 0.0001\n"


def _held(*submit: str) -> str:
    out = js("submit", *submit, "--no-advice")
    assert out.exit_code == 8, out.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    return str(item["step_id"])


def _kinds(step_id: str) -> list[str]:
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert item["step_id"] == step_id  # still waiting
    shown = js("sessions", "show", item["session_id"], "--json")
    return [e["kind"] for e in json.loads(shown.stdout)["events"] if e["step_id"] == step_id]


def test_a_broken_site_file_refuses_the_approval_and_the_step_stays_pending(
    user_site: Any, workdir: Path, jobsmith_home: Path
) -> None:
    user_site(HELD)
    step = _held("command", "-P", "command=echo approved late", "--log-dir", str(workdir))
    site = jobsmith_home / "config" / "site.yaml"
    good = site.read_text()
    site.write_text(good + "policy: [this is not\n")
    refused = js("approve", step)
    assert refused.exit_code == 2, refused.output
    assert "site.yaml" in refused.stderr and "Traceback" not in refused.output
    assert "approval_given" not in _kinds(step)
    site.write_text(good)  # fixed: the same approval goes through now
    done = js("approve", step, "--json")
    assert done.exit_code == 0, done.output
    job_id = json.loads(done.stdout)["summary"]["job_id"]
    assert js("wait", str(job_id), "--timeout", "120").exit_code == 0


def test_an_input_replaced_by_a_symlink_out_of_the_roots_refuses_the_approval(
    user_site: Any, workdir: Path, jobsmith_home: Path
) -> None:
    user_site(HELD)
    (workdir / "a.sh").write_text("echo a\n")
    (workdir / "b.sh").write_text("echo b\n")
    step = _held(
        "file_array", "-P", "files=a.sh,b.sh", "-P", "program=bash", "--log-dir", str(workdir)
    )
    (workdir / "b.sh").unlink()
    (workdir / "b.sh").symlink_to("/etc/hostname")
    refused = js("approve", step)
    assert refused.exit_code == 3, refused.output
    assert "outside the allowed roots" in refused.stderr, refused.stderr
    assert "approval_given" not in _kinds(step)
    assert sorted(p.name for p in (jobsmith_home / "state" / "jobs").glob("*.json")) == []

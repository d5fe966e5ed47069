"""Sessions, policy and approvals end to end: the CLI on the real lab cluster.

Each test layers a user site file over the lab's example with the policy it exercises,
then reads the outcome back from the session log with `jobsmith sessions show --json`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_cli import js, submit_oom_array

from jobsmith.agent.runtime.submission.steps import step_schemas

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def site(user_site):  # type: ignore[no-untyped-def]
    """Write the user's site overrides (YAML text under `policy:`), chdir into workdir."""
    return lambda policy_yaml: user_site(f"policy:\n{policy_yaml}")


def events(session_id: str) -> list[dict[str, object]]:
    out = js("sessions", "show", session_id, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)["events"]  # type: ignore[no-any-return]


def only_session() -> str:
    listed = json.loads(js("sessions", "list", "--json").stdout)["sessions"]
    return str(listed[-1]["id"])


def test_step_schema_offers_every_action() -> None:
    schema = json.dumps(step_schemas())
    for action in (
        "list_templates",
        "show_template",
        "render",
        "test_only",
        "submit",
        "rerun",
        "diagnose",
        "status",
        "read_output",
        "cancel",
        "hold",
        "release",
        "site_info",
    ):
        assert f'"{action}"' in schema


pytestmark_lab = pytest.mark.usefixtures("lab_cluster")


@pytestmark_lab
def test_refusal_is_recorded_with_its_rule(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  budgets:\n    submissions_per_hour: 0\n")
    result = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert result.exit_code == 3
    assert "submissions per hour" in result.stderr and "limit is 0" in result.stderr
    kinds = [(e["kind"], e["data"].get("outcome")) for e in events(only_session())]  # type: ignore[union-attr]
    assert kinds == [("session_opened", None), ("intent", None), ("result", "refused")]
    shown = js("sessions", "show", only_session())
    assert "refused" in shown.stdout and "submissions per hour" in shown.stdout


@pytestmark_lab
def test_approval_is_asked_shown_given_and_bound_to_the_script(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    core_hours: 0.01\n")
    held = js("submit", "command", "-P", "command=echo approved-run", "--log-dir", str(workdir))
    assert held.exit_code == 8, held.output
    assert "jobsmith approve st-" in held.stderr
    pending = json.loads(js("pending", "--json").stdout)["pending"]
    (item,) = pending
    assert "core-hours is above the approval threshold of 0.01" in item["reason"]
    assert "echo approved-run" in item["script"] and len(item["script_sha256"]) == 64
    approved = js("approve", item["step_id"], "--json")
    assert approved.exit_code == 0, approved.output
    job_id = json.loads(approved.stdout)["summary"]["job_id"]
    assert js("wait", job_id, "--timeout", "120").exit_code == 0
    assert (workdir / f"command_{job_id}.out").read_text().strip() == "approved-run"
    log = events(item["session_id"])
    kinds = [e["kind"] for e in log]
    assert kinds[:5] == ["session_opened", "intent", "approval_asked", "approval_given", "result"]
    given = next(e for e in log if e["kind"] == "approval_given")
    assert given["data"]["script_sha256"] == item["script_sha256"]  # type: ignore[index]
    assert json.loads(js("pending", "--json").stdout)["pending"] == []
    again = js("approve", item["step_id"])
    assert again.exit_code == 6 and "no step" in again.stderr  # NotFound: nothing waits


@pytestmark_lab
def test_denied_step_never_runs(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    core_hours: 0.01\n")
    js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert js("deny", item["step_id"], "--reason", "too big").exit_code == 0
    log = events(item["session_id"])
    assert [e["kind"] for e in log][-1] == "approval_refused"
    assert not any(e["data"].get("submitted") for e in log)  # type: ignore[union-attr]


@pytestmark_lab
def test_too_many_concurrent_tasks_refused(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  max_concurrent_jobs: 3\n")
    files = []
    for i in range(5):
        (workdir / f"f{i}.txt").write_text("x")
        files.append(f"f{i}.txt")
    result = js(
        "submit",
        "file_array",
        "-P",
        f"files={','.join(files)}",
        "-P",
        "program=cat",
        "--log-dir",
        str(workdir),
    )
    assert result.exit_code == 3, result.output
    assert "this adds 5" in result.stderr and "allows 3 at once" in result.stderr


@pytestmark_lab
def test_failure_streak_stops_submissions_until_unblocked(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  budgets:\n    max_failures_in_a_row: 2\n")
    ids = [
        js("submit", "command", "-P", "command=exit 1", "--log-dir", str(workdir)).stdout.strip()
        for _ in range(2)
    ]
    assert js("wait", *ids, "--timeout", "120").exit_code == 1  # records FAILED in the sessions
    third = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert third.exit_code == 3 and "2 jobs failed in a row" in third.stderr
    assert "sessions unblock" in third.stderr
    session = only_session()
    assert js("sessions", "unblock", session, "--note", "fixed the input").exit_code == 0
    fourth = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert fourth.exit_code == 0, fourth.output


@pytestmark_lab
def test_cancelling_a_job_jobsmith_did_not_submit_needs_approval(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    risky_actions: [cancel_foreign]\n")
    foreign = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "-p",
            "debug",
            "--mem=50M",
            "-o",
            "/dev/null",
            "--hold",
            "--wrap",
            "sleep 60",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=workdir,
    ).stdout.strip()
    held = js("cancel", foreign)
    assert held.exit_code == 8 and "did not submit" in held.stderr
    assert js("status", foreign, "--json").exit_code == 0
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert item["action"] == "cancel"
    assert js("approve", item["step_id"]).exit_code == 0
    final = json.loads(js("wait", foreign, "--timeout", "60", "--json").stdout)["jobs"][0]
    assert final["state"] == "CANCELLED"


@pytestmark_lab
def test_sessions_export_is_jsonl_and_prune_reports(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    core_hours: 100\n")
    job = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert job.exit_code == 0, job.output
    exported = js("sessions", "export", only_session()).stdout.splitlines()
    parsed = [json.loads(line) for line in exported]
    assert [p["seq"] for p in parsed] == list(range(len(parsed)))
    assert parsed[-1]["data"]["job_id"] == job.stdout.strip()
    dry = json.loads(js("sessions", "prune", "--older-than", "1m", "--dry-run", "--json").stdout)
    assert dry["dry_run"] is True and dry["removed"] == []


@pytestmark_lab
def test_replay_runs_steps_dry_under_another_policy(
    site, workdir: Path, jobsmith_home: Path
) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    core_hours: 100\n")
    job = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir))
    assert job.exit_code == 0, job.output
    session = only_session()
    same = json.loads(js("sessions", "replay", session, "--json").stdout)["steps"]
    assert [(s["action"], s["then"], s["now"]) for s in same] == [("submit", "done", "done")]
    assert same[0]["detail"].startswith("submit command.js-")
    site("  budgets:\n    submissions_per_hour: 0\n")
    stricter = json.loads(js("sessions", "replay", session, "--json").stdout)["steps"]
    assert stricter[0]["now"] == "refused" and "submissions per hour" in stricter[0]["detail"]
    assert len(list((jobsmith_home / "state" / "jobs").glob("*.json"))) == 1  # nothing submitted
    assert [e["kind"] for e in events(session)][-1] == "result"  # the session was not touched


@pytestmark_lab
def test_rerun_only_the_failed_array_task_with_more_memory(site, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    site("  approval:\n    core_hours: 100\n")
    array_id = submit_oom_array(workdir)  # task 2 needs ~300 MB; the array asks for 100M
    js("wait", array_id, "--timeout", "180")
    first = json.loads(js("status", array_id, "--json").stdout)["jobs"][0]
    assert first["task_counts"] == {"COMPLETED": 3, "FAILED": 1}, first
    again = js("rerun", array_id, "--mem", "1G", "--json")
    assert again.exit_code == 0, again.output
    rerun = json.loads(again.stdout)
    assert rerun["array_tasks"] == 1 and rerun["cost"]["tasks"] == 1
    waited = js("wait", rerun["job_id"], "--timeout", "180", "--json")
    assert waited.exit_code == 0, waited.output
    (job,) = json.loads(waited.stdout)["jobs"]
    assert [t["array_task_id"] for t in job["tasks"]] == [2]
    assert job["tasks"][0]["state"] == "COMPLETED" and job["tasks"][0]["req_mem_bytes"] == 1 << 30
    # in the array's own session (its workload's), after the array's own intent
    intent = next(e for e in events(rerun["session_id"]) if e["data"].get("rerun_of"))
    assert intent["data"]["rerun_of"] == array_id and intent["data"]["tasks"] == [2]  # type: ignore[index]


@pytestmark_lab
def test_a_step_kind_is_one_class_the_executor_runs_cluster_facts(site) -> None:  # type: ignore[no-untyped-def]
    """Issue 8: a new step kind (cluster_facts) is its model and handler in
    agent/runtime/submission/steps.py
    alone; the executor runs it with intent and result events like any other."""
    from jobsmith.agent.app import build_app
    from jobsmith.agent.runtime.submission.steps import step_adapter

    site("  approval:\n    core_hours: 100\n")
    app = build_app(site_file=REPO / "site_config" / "examples" / "lab.yaml")
    session = app.store.create({"title": "facts"})
    result = app.executor.run(session, step_adapter().validate_python({"action": "cluster_facts"}))
    assert "debug" in result.summary["partitions"]
    assert result.summary["partitions"]["debug"]["max_time_s"] == 1800
    assert [e.kind.value for e in app.store.read(session)] == ["session_opened", "intent", "result"]

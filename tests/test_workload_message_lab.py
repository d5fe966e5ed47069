"""One webhook message per workload (issue 28, item 5), on the lab cluster: a plan of an
array and a job after it is told once, when its last job has ended and been decided, with
the session's figures; never per job or per task (agent/watcher/workload.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_cli import js, webhook_receiver

pytestmark = pytest.mark.usefixtures("lab_cluster")


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, object]]]]:
    """A local HTTP receiver: its URL and what it was POSTed."""
    with webhook_receiver() as (url, received):
        yield url, received


def test_a_plan_is_told_once_when_its_last_job_ended(  # type: ignore[no-untyped-def]
    user_site, workdir: Path, receiver: tuple[str, list[dict[str, object]]]
) -> None:
    url, received = receiver
    user_site(f"notify:\n  webhook_url: {url}\n")
    (workdir / "plan.yaml").write_text(
        "name: shot42\nsteps:\n"
        "  frames:\n    template: command\n    params: {command: 'sleep 2'}\n"
        "    array: 0-2\n    mem: 50M\n"
        "  join:\n    template: command\n    params: {command: 'exit 3'}\n"
        "    mem: 50M\n    after_ok: [frames]\n"
    )
    ran = js("plan", "run", "plan.yaml")
    assert ran.exit_code == 0, ran.output
    ids = dict(line.split("\t")[::-1] for line in ran.stdout.splitlines())
    ended: dict[str, str] = {}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not received:
        cycle = json.loads(js("watch", "--once", "--json").stdout)
        ended |= {c["job_id"]: c["state"] for c in cycle["changes"]}
        assert not received or ended.get(ids["join"]) == "FAILED", received  # not before
        time.sleep(1)
    for _ in range(3):  # later cycles tell nothing more
        js("watch", "--once", "--json")
    (message,) = received
    assert message["event"] == "workload_ended"
    assert message["last_job_id"] == ids["join"]
    assert (message["jobs"], message["tasks"], message["failed"]) == (2, 4, 1)
    assert message["task_counts"] == {"COMPLETED": 3, "FAILED": 1}
    assert str(message["text"]).startswith("plan shot42: 3/4 tasks done, 1 failed (first: ")
    assert ended[ids["frames"]] == "COMPLETED"


def test_whichever_poll_sees_the_end_first_tells_it_once(  # type: ignore[no-untyped-def]
    user_site, workdir: Path, receiver: tuple[str, list[dict[str, object]]]
) -> None:
    """`wait` saw the job end before any watcher: wait tells the workload, and the
    watcher after it does not. A failure `wait` saw is told once the watcher has decided
    it (a failure's workload is not over before), though that cycle sees no change."""
    url, received = receiver
    user_site(f"notify:\n  webhook_url: {url}\n")
    ok = js("submit", "command", "-P", "command=true", "--mem", "50M", "--log-dir", str(workdir))
    assert ok.exit_code == 0, ok.output
    ok_id = ok.stdout.strip()
    waited = js("wait", ok_id, "--timeout", "120")
    assert waited.exit_code == 0, waited.output
    assert [m["last_job_id"] for m in received] == [ok_id]  # told by wait
    cycle = json.loads(js("watch", "--once", "--json").stdout)
    assert ok_id not in {c["job_id"] for c in cycle["changes"]}
    assert len(received) == 1

    bad = js("submit", "command", "-P", "command=exit 3", "--mem", "50M", "--log-dir", str(workdir))
    assert bad.exit_code == 0, bad.output
    bad_id = bad.stdout.strip()
    waited = js("wait", bad_id, "--timeout", "120")  # records FAILED; nothing decided it
    assert waited.exit_code != 0 and bad_id in waited.output, waited.output
    assert len(received) == 1
    # a cycle decides it on sacct's own row: under load the first cycle may still see
    # a stand-in (the job left squeue before accounting had it) and decide on a later one
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        cycle = json.loads(js("watch", "--once", "--json").stdout)
        assert bad_id not in {c["job_id"] for c in cycle["changes"]}  # wait recorded it
        if cycle["decisions"]:
            break
        assert len(received) == 1  # not told before it is decided
        time.sleep(1)
    assert len(cycle["decisions"]) == 1  # this cycle decided it
    assert [m["last_job_id"] for m in received] == [ok_id, bad_id]
    assert received[1]["failed"] == 1
    js("watch", "--once", "--json")
    assert len(received) == 2

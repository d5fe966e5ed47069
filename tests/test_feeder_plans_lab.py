"""A render farm's plan over the site's submit limits, on the lab cluster (issue 28 item 1:
agent/runtime/workflows/feeding/followers.py). With QoS `tiny` (MaxSubmitJobsPerUser 5,
made by `scripts/slurm-lab up`) as the site's default, `render-frames` of 12 one-frame
blocks (its plan saved and run by `plan run` at 1 CPU a job) is a plan whose render
(12 tasks) Slurm would refuse whole: it is approved once
(the text names the workload), its render is fed in parts of 5 by `watch --once` cycles,
and check, thumbs and encode are submitted after the last part by whoever fed it, waiting
through Slurm for the parts still queued; never more than 5 of its jobs queued at once,
every frame rendered once, and the video encoded after every part ended. Runs as alice
(`asalice-wt WORKTREE tests/test_feeder_plans_lab.py`)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from lab_cli import js, most_queued_in_tiny, queued_in_tiny
from test_render_frames import make_scene

from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.workflows.plans import Plan, load_plan, plan_text

#: alone: it holds QoS tiny's per-user limit, as tests/test_feeder_lab.py does
pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.alone]

#: every job in QoS tiny by default; any plan needs a person's approval
SITE = (
    "qos:\n  allowed: [normal, tiny]\n  default: tiny\npolicy:\n  approval:\n    core_hours: 0.01\n"
)


def test_render_frames_over_maxsubmit_feeds_its_render_and_encodes_after_every_part(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site(SITE)
    assert queued_in_tiny() == [], "another run left jobs in QoS tiny"
    scene = make_scene(workdir / "scene.blend")
    frames, video = workdir / "frames", workdir / "scene.mp4"
    argv = [
        "render-frames", str(scene), str(frames), "--frames", "1-12", "--frames-per-task", "1",
        "--video", str(video), "--fps", "6",
    ]  # fmt: skip
    # the plan render-frames makes, run by `plan run` at 1 CPU, 1 GB and 5 minutes a job:
    # the template's own 2 CPUs would wait for the whole node, which other runs share
    plan_file = workdir / "render.yaml"
    saved = js(*argv, "--save-plan", str(plan_file), "--dry-run")
    assert saved.exit_code == 8, saved.output  # held: it needs a person, as it says
    made = load_plan(plan_file)
    small = {"cpus_per_task": 1, "mem_mb": 1024, "time_limit_s": 300}
    steps = {n: {**s.model_dump(exclude_defaults=True), **small} for n, s in made.steps.items()}
    plan_file.write_text(plan_text(Plan(name=made.name, steps=steps), "the test"))
    held = js("plan", "run", str(plan_file))
    assert held.exit_code == 8, held.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert item["action"] == "run_plan" and item["cost"]["tasks"] == 15  # 12 frames, 3 more
    assert "### workload: step render: 12 tasks" in item["script"]
    assert "fed in 3 parts of at most 5 tasks" in item["script"]
    assert "then check, thumbs, encode, submitted after its last part" in item["script"]
    assert queued_in_tiny() == []  # nothing reached Slurm before the approval

    try:
        with most_queued_in_tiny() as peak:
            approved = js("approve", item["step_id"], "--json")
            assert approved.exit_code == 0, approved.output
            summary = json.loads(approved.stdout)["summary"]
            assert summary["jobs"] == {}  # the render is fed; the rest follow it
            assert (summary["workload_tasks"], summary["workload_parts"]) == (12, 3)
            assert summary["followers"] == ["check", "thumbs", "encode"]
            session = item["session_id"]
            shown = js("plan", "status", session).stdout
            assert "waits for workload" in shown or "wait for workload" in shown, shown
            # the glance: the plan's 15 units, the followers not yet submitted among them
            # (their words, "check, thumbs, encode wait for it", need more than 80 columns)
            glance = js("status").stdout
            assert "/15 done" in glance, glance  # the rest of its line depends on the moment
            store = FileSessionStore(jobsmith_home / "state" / "sessions")
            [part0] = [
                str(e.data["job_id"])
                for e in store.read(session)
                if e.kind is EventKind.RESULT and (e.step_id or "").endswith(".render.p0")
            ]
            shown = js("status", part0).stdout  # status of a part: the workload, whole
            assert "12 tasks: " in shown and "check, thumbs, encode: wait for workload" in shown
            assert "2 of 3 parts not yet submitted" in shown, shown
            # the watcher feeds the parts as they end, then the followers after the last one
            deadline = time.monotonic() + 400
            while time.monotonic() < deadline:
                steps = json.loads(js("plan", "status", session, "--json").stdout)["steps"]
                if all(s["job_id"] for s in steps if s["name"] != "render"):
                    break
                assert js("watch", "--once").exit_code == 0
                time.sleep(1)
            followers = {s["name"]: s["job_id"] for s in steps if s["name"] != "render"}
            assert all(followers.values()), steps
            waited = js("wait", *followers.values(), "--timeout", "300")
            assert waited.exit_code == 0, waited.output
    finally:
        leftover = queued_in_tiny()
        if leftover:
            subprocess.run(["scancel", "-q", "tiny", "--me"], check=False)
    assert leftover == [], f"left in QoS tiny: {leftover}"
    assert 0 < peak.most <= 5, peak

    # every frame, rendered once: 12 tasks in 3 parts, each part's tasks its own frames
    assert sorted(p.name for p in frames.glob("frame_*.png")) == [
        f"frame_{n:05d}.png" for n in range(1, 13)
    ]
    assert json.loads((frames / "check.json").read_text()) == {"missing": [], "broken": []}
    counted = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(video)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert counted.strip() == "12"
    events = store.read(session)
    assert [e.kind for e in events].count(EventKind.APPROVAL_GIVEN) == 1
    parts = [e for e in events if e.kind is EventKind.RESULT and ".render.p" in (e.step_id or "")]
    assert sorted(e.data["array_tasks"] for e in parts) == [2, 5, 5]
    part_ids = [str(e.data["job_id"]) for e in parts]
    claims = [e.step_id for e in events if e.kind is EventKind.CLAIMED]
    assert len(claims) == len(set(claims)) == 6  # 3 parts and 3 followers, each once

    # Slurm held the followers until every part had ended: each started after the last
    # part's last task ended
    ends = [_times(j)[1] for j in part_ids]
    for name in ("check", "thumbs"):
        start, _ = _times(followers[name])
        assert start >= max(ends), (name, start, ends)
    assert _times(followers["encode"])[0] >= _times(followers["check"])[1]
    fed = json.loads(js("status", "--json", *part_ids).stdout)["workloads"]  # one poll
    assert [(w["tasks"], w["done"], w["not_submitted"], w["followers"]) for w in fed] == [
        (12, 12, 0, [])
    ]


def _times(job_id: str) -> tuple[datetime, datetime]:
    """A job's start and end (an array's: its first start, its last end), from sacct."""
    out = subprocess.run(
        ["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "Start,End", "-S", "now-3600"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split("|") for line in out.split()]
    starts = [datetime.fromisoformat(s) for s, _ in rows]
    ends = [datetime.fromisoformat(e) for _, e in rows]
    return min(starts), max(ends)

"""`jobsmith render-frames` (issue 10, part 2): a frame range rendered with Debian's Blender
on the lab cluster (a tiny generated scene, Cycles on the CPU, one sample, denoising off),
in blocks, then every frame checked and the frames encoded into a video; then one frame
deleted and one truncated, and `--missing-only` re-renders those two frames only.
And the blocks and the plan (pure).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from lab_cli import js, watch_until, webhook_receiver
from test_report import Page
from test_report_lab import artifacts_dir

from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.agent.runtime.workflows.frames import (
    RenderRequest,
    There,
    blocks_of,
    broken_frames,
    parse_broken,
    parse_frames,
    plan_for,
    render_plan,
)
from jobsmith.errors import InputError
from jobsmith.job_templates import TemplateLibrary, render_body, shipped_library

lab = pytest.mark.usefixtures("lab_cluster")

SCENE = (
    "import bpy, sys; s = bpy.context.scene; s.render.engine = 'CYCLES'; "
    "s.cycles.device = 'CPU'; s.cycles.samples = 1; s.cycles.use_denoising = False; "
    "s.render.resolution_x = 32; s.render.resolution_y = 24; "
    "bpy.ops.wm.save_as_mainfile(filepath=sys.argv[-1])"
)


#: the same scene made slow enough to watch: about 0.5 to 1 s a frame on the lab's node
#: (160x120 pixels, 256 samples), so a status call of about a second sees a 48-frame render
#: part-way, never done in one step (a frame of the tiny scene takes 0.02 s)
SLOW_SCENE = (
    SCENE.replace("samples = 1;", "samples = 256;")
    .replace("= 32;", "= 160;")
    .replace("= 24;", "= 120;")
)


def make_scene(path: Path, script: str = SCENE) -> Path:
    """Blender's default scene (a cube, a camera, a light), made tiny and quick."""
    subprocess.run(
        ["blender", "-b", "--factory-startup", "--python-expr", script, "--", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path


def test_blocks_are_runs_of_consecutive_frames_cut_at_the_block_size() -> None:
    assert blocks_of(range(1, 11), 4) == ["1-4", "5-8", "9-10"]
    assert blocks_of([3, 4, 9, 10, 11, 20], 2) == ["3-4", "9-10", "11-11", "20-20"]
    assert blocks_of([], 5) == []
    assert parse_frames("1-250") == (1, 250) and parse_frames("7") == (7, 7)
    for bad in ("a-b", "5-1", "-3"):
        with pytest.raises(InputError, match="--frames"):
            parse_frames(bad)


def test_the_plan_renders_then_checks_then_encodes(tmp_path: Path) -> None:
    request = RenderRequest(
        tmp_path / "s.blend", tmp_path / "out", 1, 6, 2, video=tmp_path / "v.mp4"
    )
    plan = render_plan(request)
    assert plan.order() == ["render", "check", "thumbs", "encode"]
    assert plan.steps["render"].params["blocks"] == ["1-2", "3-4", "5-6"]
    assert plan.steps["check"].after_ok == ["render"] and plan.steps["encode"].after_ok == ["check"]
    thumbs = plan.steps["thumbs"]  # the contact sheet's, made on the cluster after the render
    assert thumbs.template == "frames_thumbs" and thumbs.after_ok == ["render"]
    assert thumbs.params["output_dir"] == str(tmp_path / "out" / "thumbs")
    assert "resume_token" not in plan.steps["render"].params
    resumable = render_plan(replace(request, resume_token="0123456789abcdef"))
    assert resumable.steps["render"].params["resume_token"] == "0123456789abcdef"
    repair = render_plan(request, [4, 5])
    assert repair.steps["render"].params["blocks"] == ["4-5"]
    assert repair.steps["check"].params["frame_start"] == 1  # the whole range is checked


def test_missing_and_undecodable_frames_are_found(tmp_path: Path) -> None:
    request = RenderRequest(tmp_path / "s.blend", tmp_path, 1, 4)
    for frame in (1, 2, 4):
        (tmp_path / f"frame_{frame:05d}.png").write_bytes(b"x" if frame == 4 else b"ok")
    assert broken_frames(request, decodes=lambda p: p.read_bytes() == b"ok") == [3, 4]


class Recorded:
    """A real transport (this host's) that keeps every argv it ran."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.calls: list[list[str]] = []
        self._env = env
        self._local = LocalTransport()

    def run(self, argv: Any, *, timeout: float, stdin: Any = None, env: Any = None) -> Any:
        self.calls.append(list(argv))
        return self._local.run(argv, timeout=timeout, stdin=stdin, env=self._env or env)


def test_the_broken_frames_there_are_found_in_one_command_with_the_hosts_ffmpeg(
    tmp_path: Path,
) -> None:
    """`--missing-only` over SSH (issue 29): the frames are looked at and decoded where the
    job runs, every frame of the range in ONE command (here the real script through this
    host's transport): a missing, an empty and an undecodable frame are found, frames
    outside the range are not asked about, and a name with spaces and a quote is fine."""
    frames = tmp_path / "it's frames"
    frames.mkdir()
    for frame in (1, 2, 5, 6):
        subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "color=c=red:s=32x24",
             "-frames:v", "1", str(frames / f"frame_{frame:05d}.png")],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    (frames / "frame_00003.png").write_bytes(b"")
    (frames / "frame_00005.png").write_bytes(b"\x89PNG not really")
    transport = Recorded()
    there = There(" on the test's host", transport)
    request = RenderRequest(tmp_path / "s.blend", frames, 1, 7)
    assert there.broken_frames(request) == [3, 4, 5, 7]
    assert len(transport.calls) == 1 and transport.calls[0][:2] == ["sh", "-c"]
    assert there.broken_frames(replace(request, frame_start=5, frame_end=6)) == [5]
    plan = plan_for(request, missing_only=True, there=there)
    assert plan.steps["render"].params["blocks"] == ["3-5", "7-7"]
    whole = replace(request, frame_start=1, frame_end=2)
    with pytest.raises(InputError, match=r"1-2 in .* on the test's host is there and decodes"):
        plan_for(whole, missing_only=True, there=there)


def test_no_ffmpeg_there_is_named_and_nothing_to_decode_needs_none(tmp_path: Path) -> None:
    """A login node without ffmpeg: one line naming it and the login node; with no frame
    there yet, every frame is missing and nothing needed decoding."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "timeout"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or tool)
    there = There(" on alice@login1:22", Recorded(env={"PATH": str(bin_dir)}))
    (tmp_path / "frame_00002.png").write_bytes(b"something")
    request = RenderRequest(tmp_path / "s.blend", tmp_path, 1, 3)
    with pytest.raises(InputError, match="needs ffmpeg on the login node on alice@login1:22"):
        there.broken_frames(request)
    assert there.broken_frames(replace(request, frame_start=3)) == [3]


def test_an_answer_that_is_not_frames_of_the_range_is_no_answer() -> None:
    request = RenderRequest(Path("/s.blend"), Path("/f"), 1, 4)
    assert parse_broken(request, "4\n2\n2\n") == [2, 4]
    for bad in ("5\n", "x\n", "\u0663\n"):  # out of the range, not a number, not ASCII
        with pytest.raises(ValueError):
            parse_broken(request, bad)


def test_a_rerun_of_a_block_renders_only_the_frames_its_first_run_did_not_save(
    tmp_path: Path,
) -> None:
    """blender_frames' resume_token, its body run here with Debian's Blender (no Slurm:
    SLURM_ARRAY_TASK_ID set by hand): frame 3 cannot be saved, Blender stops there; the
    same script again starts at frame 3; a new token renders the block whole."""
    scene = make_scene(tmp_path / "scene.blend")
    out = tmp_path / "frames"
    library = TemplateLibrary([shipped_library()])

    def run(token: str) -> subprocess.CompletedProcess[str]:
        params = {"blend_file": str(scene), "output_dir": str(out), "blocks": ["1-4"],
                  "resume_token": token}  # fmt: skip
        body = render_body(library.get("blender_frames"), params, allowed_roots=[tmp_path])
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_CPUS_PER_TASK": "1"}
        return subprocess.run(
            ["bash", "-c", body.body], capture_output=True, text=True, env=env, timeout=300
        )

    (out / "frame_00003.png").mkdir(parents=True)
    first = run("0123456789abcdef")
    assert first.returncode != 0
    assert sorted(p.name for p in out.glob("frame_*.png") if p.is_file()) == [
        "frame_00001.png", "frame_00002.png",
    ]  # fmt: skip
    (out / "frame_00003.png").rmdir()
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("frame_*.png")}
    again = run("0123456789abcdef")
    assert again.returncode == 0, again.stderr
    assert "re-run of block 1-4 from frame 3" in again.stdout
    after = {p.name: p.stat().st_mtime_ns for p in out.glob("frame_*.png")}
    assert {n: after[n] for n in before} == before and len(after) == 4
    assert "every frame of 1-4 was saved" in run("0123456789abcdef").stdout
    whole = run("fedcba9876543210")  # a new plan: the block whole
    assert whole.returncode == 0 and "re-run" not in whole.stdout
    assert all(p.stat().st_mtime_ns > after[p.name] for p in out.glob("frame_*.png"))


@lab
def test_a_frame_range_is_rendered_checked_encoded_and_repaired(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()
    scene = make_scene(workdir / "scene.blend")
    frames = workdir / "frames"
    argv = [
        "render-frames", str(scene), str(frames), "--frames", "1-6", "--frames-per-task", "2",
        "--video", str(workdir / "scene.mp4"), "--fps", "6", "--json",
    ]  # fmt: skip
    ran = js(*argv)
    assert ran.exit_code == 0, ran.output
    jobs = json.loads(ran.stdout)["jobs"]
    assert list(jobs) == ["render", "check", "thumbs", "encode"]
    assert js("wait", *jobs.values(), "--timeout", "300").exit_code == 0
    assert sorted(p.name for p in frames.glob("frame_*.png")) == [
        f"frame_{n:05d}.png" for n in range(1, 7)
    ]
    assert json.loads((frames / "check.json").read_text()) == {"missing": [], "broken": []}
    counted = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", str(workdir / "scene.mp4")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert counted.strip() == "6"

    # one frame lost, one cut short: only they are rendered again
    (frames / "frame_00002.png").unlink()
    five = frames / "frame_00005.png"
    five.write_bytes(five.read_bytes()[:40])
    before = {p.name: p.stat().st_mtime_ns for p in frames.glob("frame_*.png")}
    repair = js(*argv[:-5], "--missing-only", "--json")
    assert repair.exit_code == 0, repair.output
    fixed = json.loads(repair.stdout)["jobs"]
    status = json.loads(js("status", fixed["render"], "--json").stdout)["jobs"][0]
    assert status["record"] is not None or status["task_counts"]
    assert js("wait", *fixed.values(), "--timeout", "300").exit_code == 0
    after = {p.name: p.stat().st_mtime_ns for p in frames.glob("frame_*.png")}
    rerendered = sorted(n for n in after if after[n] != before.get(n))
    assert rerendered == ["frame_00002.png", "frame_00005.png"]  # those two, nothing else
    assert json.loads((frames / "check.json").read_text()) == {"missing": [], "broken": []}
    nothing = js(*argv[:-5], "--missing-only")
    assert nothing.exit_code == 2 and "nothing to re-render" in nothing.stderr


@lab
def test_a_render_shows_progress_reruns_a_failed_frame_alone_and_shows_its_frames(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """Issue 28's done-when, items 2 to 5, in one 48-frame render: `status --json` mid-run
    has 0 < frames done < 48, counted from the running tasks' Blender output; frame 48
    cannot be written, so its task fails there; `jobsmith rerun` re-runs that task alone,
    as one new array, which renders frame 48 alone, and the check and the thumbnails
    follow it; the report's contact sheet (made by the plan's thumbs job, on the cluster) has 48
    thumbnails of a few KB, `jobsmith frames` writes the same section, and the webhook
    is told once."""
    with webhook_receiver() as (url, received):
        user_site(f"notify:\n  webhook_url: {url}\n")
        assert "samples = 256;" in SLOW_SCENE and "= 160;" in SLOW_SCENE
        scene = make_scene(workdir / "slow.blend", SLOW_SCENE)
        frames = workdir / "frames"
        (frames / "frame_00048.png").mkdir(parents=True)  # Blender cannot save frame 48
        argv = [
            "render-frames", str(scene), str(frames), "--frames", "1-48",
            "--frames-per-task", "24", "--json",
        ]  # fmt: skip
        ran = js(*argv)
        assert ran.exit_code == 0, ran.output
        doc = json.loads(ran.stdout)
        session, jobs = doc["session_id"], doc["jobs"]
        assert list(jobs) == ["render", "check", "thumbs"]
        deadline = time.monotonic() + 180
        while True:
            shown = js("status", jobs["render"], "--json")
            assert shown.exit_code == 0, shown.output
            progress = json.loads(shown.stdout)["jobs"][0]["progress"]
            assert progress is not None and (progress["unit"], progress["total"]) == ("frames", 48)
            if progress["done"] > 0:
                break
            assert time.monotonic() < deadline, f"no frame done in 180 s: {progress}"
            time.sleep(0.5)
        assert progress["done"] < 48, progress  # seen part-way
        running = progress["running"]
        assert running and all(t["frames"] == 24 and t["note"] is None for t in running), running

        waited = json.loads(js("wait", jobs["render"], "--timeout", "300", "--json").stdout)
        (render,) = waited["jobs"]
        assert render["state"] == "FAILED" and render["task_counts"] == {
            "COMPLETED": 1,
            "FAILED": 1,
        }
        final = json.loads(js("status", jobs["render"], "--json").stdout)["jobs"][0]["progress"]
        assert (final["done"], final["total"]) == (24, 48)  # the failed block counts nothing
        decided = watch_until(
            lambda seen: any(d["job_id"] == jobs["render"] for d in seen.decisions), 60
        )
        (decision,) = decided.decisions  # the rules report it: a retry cannot fix a write
        assert (decision["job_id"], decision["action"]) == (jobs["render"], "report")
        assert received == []  # the check and the thumbnails wait: the workload goes on

        (frames / "frame_00048.png").rmdir()
        saved = {n: (frames / f"frame_{n:05d}.png").stat().st_mtime_ns for n in range(1, 48)}
        rerun = js("rerun", jobs["render"], "--json")
        assert rerun.exit_code == 0, rerun.output
        again = json.loads(rerun.stdout)
        assert again["array_tasks"] == 1  # the failed task alone
        # only the watcher follows the rest (a `wait` would record the ends before it
        # sees them): it tells the webhook once the re-run, the check and the thumbnails
        # have ended; later cycles tell nothing more
        seen = watch_until(lambda _: bool(received), 240)
        for _ in range(2):
            js("watch", "--once", "--json")
        (message,) = received
        assert message["event"] == "workload_ended", (message, seen)
        assert message["last_job_id"] == again["job_id"]  # the re-run is the workload's
        assert (message["failed"], message["reruns"]) == (1, 1)
        assert message["task_counts"] == {"COMPLETED": 4, "FAILED": 1}, message

    steps = json.loads(js("plan", "status", session, "--json").stdout)["steps"]
    now = {s["name"]: (s["job_id"], s["state"]) for s in steps}
    assert now["render"] == (again["job_id"], "COMPLETED")
    assert now["check"][1] == now["thumbs"][1] == "COMPLETED", now
    assert {n: (frames / f"frame_{n:05d}.png").stat().st_mtime_ns for n in range(1, 48)} == (
        saved
    )  # frame 48 alone was rendered again: the frames saved before it were not
    assert json.loads((frames / "check.json").read_text()) == {"missing": [], "broken": []}

    page = workdir / "report.html"
    made = js("report", session, "--output", str(page), "--json")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["thumbnails"] == 48
    shown_page = Page(page.read_text())
    thumbs = [link for link in shown_page.links if link.startswith("data:image/jpeg;base64,")]
    assert len(thumbs) == 48 and len(shown_page.links) == 48
    sizes = [len(base64.b64decode(t.partition(",")[2])) for t in thumbs]
    assert all(300 < n < 16_000 for n in sizes), sizes  # a few KB each
    alone = workdir / "frames.html"
    listed = js("frames", session, "-o", str(alone), "--json")
    assert listed.exit_code == 0, listed.output
    (sheet,) = json.loads(listed.stdout)["sheets"]
    assert (sheet["job_id"], sheet["thumbnails"], sheet["missing"]) == (now["thumbs"][0], 48, 0)
    section = re.search(r"<h2>Contact sheet</h2>.*?</section>", page.read_text())
    assert section is not None and section.group(0) in alone.read_text()
    shutil.copyfile(alone, artifacts_dir() / f"frames-{session}.html")  # to be looked at

"""`jobsmith transcode` (issue 10, part 2): segments cut on key frames read with Debian's
ffprobe (no decoding), the plan it makes, and on the lab cluster a real clip encoded in
segments, its sound whole, joined, put together and checked against the source; and a
segment that fails on purpose, re-run alone, after which the join and the check follow
the re-run and pass.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js

from jobsmith.agent.runtime.workflows.transcode import (
    Encoding,
    Probe,
    keyframes_of,
    probe,
    segments,
    transcode_plan,
)
from jobsmith.errors import InputError

lab = pytest.mark.usefixtures("lab_cluster")


def make_clip(path: Path, seconds: int = 12, audio: bool = True, gop: int = 25) -> Path:
    """A test clip from ffmpeg's own sources: a key frame every `gop` frames (25 fps)."""
    sources = ["-f", "lavfi", "-i", f"testsrc=duration={seconds}:size=160x120:rate=25"]
    if audio:
        sources += ["-f", "lavfi", "-i", f"sine=duration={seconds}", "-shortest", "-c:a", "aac"]
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", *sources,
         "-c:v", "libx264", "-g", str(gop), "-keyint_min", str(gop), str(path)],
        check=True,
    )  # fmt: skip
    return path


def duration(path: Path) -> float:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout)


# --- pure ----------------------------------------------------------------------------------


def test_key_frames_are_read_from_packet_flags() -> None:
    csv = "0.000000,K__\n0.040000,___\nN/A,K__\n2.500000,K_\n\n5.100000,KD_\n"
    assert keyframes_of(csv) == (0.0, 2.5, 5.1)


def test_segments_start_on_the_first_key_frame_after_each_multiple() -> None:
    irregular = Probe(duration_s=12.0, keyframes=(0.0, 2.5, 5.1, 7.7, 10.2), has_audio=True)
    assert segments(irregular, 4) == [(0.0, 5.1), (5.1, 5.1), (10.2, 1.8)]
    every_second = Probe(12.0, tuple(float(t) for t in range(12)), has_audio=False)
    assert [start for start, _ in segments(every_second, 4)] == [0.0, 4.0, 8.0]
    one = Probe(3.0, (0.0,), has_audio=False)  # shorter than a chunk: one segment
    assert segments(one, 60) == [(0.0, 3.0)]
    with pytest.raises(InputError):
        segments(one, 0)


def test_the_plan_encodes_picture_and_sound_apart_then_joins_and_checks(tmp_path: Path) -> None:
    probed = Probe(12.0, (0.0, 4.0, 8.0), has_audio=True)
    plan = transcode_plan(
        tmp_path / "in.mp4", tmp_path / "out.mkv", probed, 4, Encoding(preset="ultrafast"),
        tmp_path / "work",
    )  # fmt: skip
    assert plan.order() == ["video", "join", "audio", "finish", "strip"]
    video = plan.steps["video"]
    assert video.params["segments"] == ["0+4", "4+4", "8+4"]
    assert plan.steps["join"].after_ok == ["video"]
    assert plan.steps["finish"].after_ok == ["join", "audio"]
    assert plan.steps["finish"].params["audio"] == str(tmp_path / "work" / "audio.m4a")
    strip = plan.steps["strip"]  # the contact sheet's key frames, of the finished output
    assert strip.template == "video_keyframes" and strip.after_ok == ["finish"]
    assert strip.params["video"] == str(tmp_path / "out.mkv")

    silent = transcode_plan(
        tmp_path / "in.mp4", tmp_path / "out.mkv", Probe(12.0, (0.0,), has_audio=False), 4,
        Encoding(), tmp_path / "work",
    )  # fmt: skip
    assert "audio" not in silent.steps and silent.steps["finish"].after_ok == ["join"]
    assert "audio" not in silent.steps["finish"].params


def test_ffprobe_reads_a_real_clip_without_decoding_it(tmp_path: Path) -> None:
    probed = probe(make_clip(tmp_path / "clip.mp4", seconds=6, gop=50))
    assert abs(probed.duration_s - 6.0) < 0.2 and probed.has_audio
    assert probed.keyframes[:3] == (0.0, 2.0, 4.0)  # every 50 frames at 25 fps
    silent = probe(make_clip(tmp_path / "silent.mp4", seconds=2, audio=False))
    assert not silent.has_audio


def test_a_file_that_is_no_video_is_one_clear_error(tmp_path: Path) -> None:
    not_video = tmp_path / "notes.mp4"
    not_video.write_text("not a video\n")
    with pytest.raises(InputError) as err:
        probe(not_video)
    assert "ffprobe cannot read" in str(err.value) and str(not_video) in str(err.value)


# --- on the lab cluster ----------------------------------------------------------------------


@lab
def test_the_plan_a_transcode_makes_is_a_plan_file_that_plan_check_reads_the_same(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """The rules' plan is the plan document a person writes (issue 10: the brain emits
    the same plan document): saved, read back by `plan check`, judged alike."""
    user_site()
    source = make_clip(workdir / "clip.mp4", seconds=6)
    saved = workdir / "transcode-plan.yaml"
    made = js(
        "transcode", str(source), str(workdir / "out.mkv"), "--chunk-seconds", "2",
        "--dry-run", "--save-plan", str(saved), "--json",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert f"plan written to {saved}" in made.stderr
    assert saved.read_text().startswith("# plan made by jobsmith transcode clip.mp4;")
    read = js("plan", "check", str(saved), "--json")
    assert read.exit_code == 0, read.output
    first, again = json.loads(made.stdout), json.loads(read.stdout)
    for key in ("plan", "order", "cost", "policy"):
        assert first[key] == again[key], key
    assert [s["name"] for s in first["steps"]] == [s["name"] for s in again["steps"]]
    unwritable = js(
        "transcode", str(source), str(workdir / "out.mkv"), "--dry-run",
        "--save-plan", "/proc/no-such-dir/plan.yaml",
    )  # fmt: skip
    assert unwritable.exit_code != 0 and "--save-plan /proc/no-such-dir/plan.yaml" in (
        unwritable.stderr
    )
    assert "Traceback" not in unwritable.output


@lab
def test_a_clip_is_transcoded_in_segments_joined_and_checked(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()
    source = make_clip(workdir / "clip.mp4")
    out = js(
        "transcode", str(source), str(workdir / "out.mkv"), "--chunk-seconds", "4",
        "--preset", "ultrafast", "--json",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc["jobs"]) == ["video", "join", "audio", "finish", "strip"]
    assert js("wait", *doc["jobs"].values(), "--timeout", "300").exit_code == 0
    report = json.loads((workdir / "out.mkv.verify.json").read_text())
    assert report["source_streams"] == report["output_streams"] == "audio,video"
    assert abs(report["output_duration_s"] - report["source_duration_s"]) < 0.5
    assert abs(report["output_frames"] - report["source_frames"]) <= 2
    chunks = sorted((workdir / ".out.mkv.jobsmith" / "chunks").glob("chunk_*.mkv"))
    assert len(chunks) == 3
    # the contact sheet's strip: the output's key frames (one at each segment's start)
    listed = js("frames", doc["session_id"], "-o", str(workdir / "strip.html"), "--json")
    assert listed.exit_code == 0, listed.output
    (sheet,) = json.loads(listed.stdout)["sheets"]
    assert (sheet["job_id"], sheet["kind"]) == (doc["jobs"]["strip"], "keyframes")
    assert sheet["thumbnails"] >= 3 and sheet["missing"] == 0, sheet


@lab
def test_a_segment_that_fails_is_rerun_alone_and_the_join_and_check_follow_it(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()
    source = make_clip(workdir / "clip.mp4")
    blocker = workdir / ".out.mkv.jobsmith" / "chunks" / "chunk_00001.mkv"
    blocker.mkdir(parents=True)  # segment 1 cannot write its chunk: it fails
    out = js(
        "transcode", str(source), str(workdir / "out.mkv"), "--chunk-seconds", "4",
        "--preset", "ultrafast", "--json",
    )  # fmt: skip
    doc = json.loads(out.stdout)
    jobs = doc["jobs"]
    waited = json.loads(js("wait", jobs["video"], "--timeout", "300", "--json").stdout)
    (video,) = waited["jobs"]
    assert video["state"] == "FAILED" and video["task_counts"].get("COMPLETED") == 2
    # the join waits for a dependency that can no longer be met
    join = json.loads(js("status", jobs["join"], "--json").stdout)["jobs"][0]
    assert join["state"] == "PENDING"

    shutil.rmtree(blocker)
    rerun = js("rerun", jobs["video"], "--json")
    assert rerun.exit_code == 0, rerun.output
    again = json.loads(rerun.stdout)
    assert again["array_tasks"] == 1  # segment 1 alone
    new_video = again["job_id"]
    rest = [jobs["join"], jobs["audio"], jobs["finish"]]
    assert js("wait", new_video, *rest, "--timeout", "300").exit_code == 0
    report = json.loads((workdir / "out.mkv.verify.json").read_text())
    assert abs(report["output_duration_s"] - duration(source)) < 0.5
    status = json.loads(js("plan", "status", doc["session_id"], "--json").stdout)
    rows = {s["name"]: (s["job_id"], s["state"]) for s in status["steps"]}
    assert rows["video"] == (new_video, "COMPLETED") and rows["finish"][1] == "COMPLETED"

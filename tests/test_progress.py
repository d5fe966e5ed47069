"""Per-frame and per-chunk progress (issue 28 item 2): the parsers on real captured output
of Blender 3.4.1 (Debian 12), Blender 4.3.2 (Debian 13) and ffmpeg 5.1.9 / 7.1.5
(tests/fixtures/progress/README.md says how each was made), and a job's progress folded
from its tasks' states and what its running tasks said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.workflows.progress import (
    BlenderRead,
    EncodeRead,
    parse_blender,
    parse_ffmpeg,
    task_progress,
    work_of,
    work_progress,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "progress"


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines()


@pytest.mark.parametrize("name", ["blender-3.4.1-cycles.out", "blender-4.3.2-cycles.out"])
def test_cycles_frames_are_counted_by_their_saved_lines(name: str) -> None:
    out = lines(name)
    whole = parse_blender(out)
    assert whole.saved == tuple(f"/tmp/cap/out/frame_{n:05d}.png" for n in (1, 2, 3))
    assert whole.frame is None and whole.samples is None  # nothing under way at the end
    # cut where frame 2 is sampling: one frame saved, frame 2 at sample 1 of 4
    cut = next(i for i, ln in enumerate(out) if ln.startswith("Fra:2") and "Sample 1/4" in ln)
    mid = parse_blender(out[: cut + 1])
    assert len(mid.saved) == 1
    assert (mid.frame, mid.samples) == (2, (1, 4))
    # read in two pages, the second on from the first: the same as one read
    half = len(out) // 2
    assert parse_blender(out[half:], parse_blender(out[:half])) == whole


def test_workbench_prints_no_fra_lines_and_its_frames_still_count() -> None:
    out = lines("blender-3.4.1-workbench.out")
    assert not any(ln.startswith("Fra:") for ln in out)
    said = parse_blender(out)
    assert len(said.saved) == 2 and said.frame is None


@pytest.mark.parametrize("name", ["ffmpeg-5.1.9-progress.out", "ffmpeg-7.1.5-progress.out"])
def test_ffmpeg_progress_is_its_newest_complete_block(name: str) -> None:
    out = lines(name)
    end = parse_ffmpeg(out)
    assert end.ended and end.out_time_s is not None and 11.8 < end.out_time_s <= 12.0
    assert end.speed is not None and end.speed > 0 and end.frame == 300
    # cut inside the last block: the block before it is the newest complete one
    last = max(i for i, ln in enumerate(out) if ln.startswith("progress=continue"))
    mid = parse_ffmpeg(out[: last + 4])
    assert not mid.ended and mid.out_time_s is not None and 0 < mid.out_time_s < 11.8
    assert parse_ffmpeg([]) == EncodeRead()


def test_ffmpeg_values_not_measured_yet_read_as_none() -> None:
    first = ["frame=1", "out_time_us=N/A", "speed=   0x", "progress=continue"]
    assert parse_ffmpeg(first) == EncodeRead(None, None, 1, False)
    assert parse_ffmpeg(["speed=2.5x", "progress=continue"]).speed == 2.5


def test_the_work_of_a_job_comes_from_its_parameters() -> None:
    frames = work_of("blender_frames", {"blocks": ["1-10", "11-20", "21-25"]})
    assert frames is not None and frames.unit == "frames" and frames.total == 25
    segments = work_of("ffmpeg_segments", {"segments": ["0+4.2", "4.2+4"]})
    assert segments is not None and segments.sizes == (4.2, 4.0) and segments.total == 2
    chunks = work_of("ffmpeg_chunks", {"duration_s": 150, "chunk_seconds": 60})
    assert chunks is not None and chunks.sizes == (60, 60, 30)
    assert work_of("command", {"command": "true"}) is None
    assert work_of("blender_frames", {"blocks": "1-10"}) is None  # not as the template takes it


def _task(index: int, state: JobState) -> JobRecord:
    return JobRecord(
        job_id=f"40_{index}", job_id_raw=str(40 + index), array_job_id="40",
        array_task_id=index, name="render", state=state,
    )  # fmt: skip


def test_a_render_counts_finished_blocks_whole_and_running_ones_as_said() -> None:
    work = work_of("blender_frames", {"blocks": ["1-10", "11-20", "21-30", "31-40", "41-48"]})
    assert work is not None
    states = [JobState.COMPLETED, JobState.RUNNING, JobState.RUNNING, JobState.FAILED]
    tasks = tuple(_task(i, s) for i, s in enumerate(states))
    status = JobStatus(job_id="40", state=JobState.RUNNING, tasks=tasks)
    said = parse_blender(lines("blender-4.3.2-cycles.out"))
    running = [
        task_progress("40_1", work, 1, said),
        task_progress("40_2", work, 2, BlenderRead(frame=21, samples=(3, 16))),
    ]
    progress = work_progress(status, work, running, complete=True)
    assert (progress.done, progress.total, progress.unit) == (13, 48, "frames")
    assert progress.running[1].frame == 21 and progress.running[1].samples == 16
    assert progress.line() == "13/48 frames"


def test_a_transcode_counts_chunks_and_shows_each_running_ones_percent_and_speed() -> None:
    work = work_of("ffmpeg_segments", {"segments": ["0+12", "12+12", "24+8"]})
    assert work is not None
    tasks = (_task(0, JobState.COMPLETED), _task(1, JobState.RUNNING), _task(2, JobState.PENDING))
    status = JobStatus(job_id="40", state=JobState.RUNNING, tasks=tasks)
    out = lines("ffmpeg-5.1.9-progress.out")
    last = max(i for i, ln in enumerate(out) if ln.startswith("progress=continue"))
    said = parse_ffmpeg(out[: last + 1])
    running = [task_progress("40_1", work, 1, said)]
    progress = work_progress(status, work, running, complete=True)
    assert (progress.done, progress.total) == (1, 3)
    percent = progress.running[0].percent
    assert percent is not None and 50 < percent < 100
    assert progress.line().startswith("1/3 chunks (chunk 1 ") and "x)" in progress.line()
    unread = task_progress("40_1", work, 1, None, "cannot read /x: gone")
    assert unread.note == "cannot read /x: gone" and unread.percent is None

"""Progress of a render or a transcode while it runs, read from the job's own output.

A render farm's users want "31/48 frames", not "3 of 5 tasks running"; a transcode's want
how far each chunk is and how fast it goes. Slurm knows neither: the programs say it, so
this reads what they print (tests/fixtures/progress/ holds real captures of each):

- Blender prints `Saved: 'PATH'` once per frame written, whatever the engine; a frame
  counts as done when its line is there. Only Cycles prints `Fra:N … | Sample i/n` lines
  while a frame renders (Workbench and EEVEE print none), so the frame under way and its
  samples are shown when there, never relied on.
- ffmpeg writes `key=value` blocks, each ending in `progress=continue` (the last in
  `progress=end`), where the templates ask for them (`-progress pipe:1`, on stdout):
  `out_time_us` against the chunk's length gives its percent, `speed` its speed.

What a job's tasks are (a block of frames, a segment of seconds) comes from the
parameters jobsmith submitted it with; a finished task counts whole, a running one as its
output says, a waiting or failed one as nothing. Everything here is pure: reading the
output through the transport is agent/runtime/workflows/progressread.py's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState

#: the templates whose tasks' output says how far they are, and what each counts
FRAME_TEMPLATES = frozenset({"blender_frames"})
CHUNK_TEMPLATES = frozenset({"ffmpeg_segments", "ffmpeg_chunks"})

_SAVED = re.compile(r"^\s*Saved: ['\"]?(?P<path>.*?)['\"]?\s*$")
_FRA = re.compile(r"^Fra:(?P<frame>-?[0-9]+) ")
_SAMPLE = re.compile(r"\| Sample (?P<done>[0-9]+)/(?P<total>[0-9]+)")
_SPEED = re.compile(r"^\s*(?P<x>[0-9]+(?:\.[0-9]+)?)x\s*$")


class _Model(BaseModel):
    # built when progress is first read, not by every command that imports it (issue 26)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


@dataclass(frozen=True)
class BlenderRead:
    """What one task's Blender output says: the frames written, and (Cycles only) the
    frame under way with its samples."""

    saved: tuple[str, ...] = ()
    frame: int | None = None
    samples: tuple[int, int] | None = None


def parse_blender(lines: Iterable[str], before: BlenderRead | None = None) -> BlenderRead:
    """Blender's stdout lines read on from `before` (an earlier page of the same file):
    every distinct `Saved:` path, and the `Fra:`/`Sample` of a frame not yet saved."""
    saved = list(before.saved) if before else []
    seen = set(saved)
    frame = before.frame if before else None
    samples = before.samples if before else None
    for line in lines:
        if (match := _SAVED.match(line)) is not None:
            path = match["path"]
            if path not in seen:
                seen.add(path)
                saved.append(path)
            frame, samples = None, None
        elif (match := _FRA.match(line)) is not None:
            if frame != int(match["frame"]):
                frame, samples = int(match["frame"]), None
            if (sample := _SAMPLE.search(line)) is not None:
                samples = (int(sample["done"]), int(sample["total"]))
    return BlenderRead(tuple(saved), frame, samples)


@dataclass(frozen=True)
class EncodeRead:
    """ffmpeg's newest complete `-progress` block."""

    out_time_s: float | None = None
    speed: float | None = None
    frame: int | None = None
    ended: bool = False


def parse_ffmpeg(lines: Iterable[str]) -> EncodeRead:
    """The newest complete block of ffmpeg's `-progress` output (a block is complete at
    its `progress=` line; a block still being written is left for the next read).
    Values ffmpeg has not got yet (`N/A`, `speed=   0x` at the start) read as None."""
    last = EncodeRead()
    block: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.strip().partition("=")
        if not sep:
            continue  # a warning on the same stream, or a fragment
        if key != "progress":
            block[key] = value.strip()
            continue
        last = EncodeRead(
            out_time_s=_micro(block.get("out_time_us")),
            speed=_speed(block.get("speed")),
            frame=_int(block.get("frame")),
            ended=value.strip() == "end",
        )
        block = {}
    return last


def _micro(text: str | None) -> float | None:
    value = _int(text)
    return value / 1e6 if value is not None and value >= 0 else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _speed(text: str | None) -> float | None:
    match = _SPEED.match(text or "")
    value = float(match["x"]) if match is not None else None
    return value if value else None  # 0x: ffmpeg has not measured it yet


# --- a job's work: what each task is ---------------------------------------------------


@dataclass(frozen=True)
class Work:
    """What an array job's tasks are: frames per task (a render) or seconds per chunk
    (a transcode), by task index."""

    unit: Literal["frames", "chunks"]
    #: frames of each task's block, or seconds of each chunk
    sizes: tuple[float, ...]

    @property
    def total(self) -> int:
        """Frames of the whole render, or chunks of the whole transcode."""
        return int(sum(self.sizes)) if self.unit == "frames" else len(self.sizes)


def work_of(template: str, params: Mapping[str, object]) -> Work | None:
    """The work of a job submitted from template with params; None for a template whose
    output says nothing of its progress (or parameters not as the template takes them)."""
    try:
        if template in FRAME_TEMPLATES:
            blocks = [str(b).split("-", 1) for b in _list(params["blocks"])]
            return Work("frames", tuple(float(int(b) - int(a) + 1) for a, b in blocks))
        if template == "ffmpeg_segments":
            cuts = [str(s).partition("+")[2] for s in _list(params["segments"])]
            return Work("chunks", tuple(float(c) for c in cuts))
        if template == "ffmpeg_chunks":
            duration = float(str(params["duration_s"]))
            size = float(str(params["chunk_seconds"]))
            count = math.ceil(duration / size)
            return Work("chunks", tuple(min(size, duration - i * size) for i in range(count)))
    except (KeyError, TypeError, ValueError):
        return None
    return None


def _list(value: object) -> list[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(value)
    return list(value)


# --- the documents ----------------------------------------------------------------------


class TaskProgress(_Model):
    """One running task, as its output says."""

    task_id: str = Field(description="the array task, e.g. '345_2'")
    frames_done: int | None = Field(None, description="render: frames of its block saved")
    frames: int | None = Field(None, description="render: frames in its block")
    frame: int | None = Field(None, description="render: the frame under way (Cycles only)")
    samples_done: int | None = Field(None, description="render: samples of that frame done")
    samples: int | None = Field(None, description="render: samples that frame takes")
    percent: float | None = Field(None, description="transcode: share of its chunk encoded, %")
    speed: float | None = Field(None, description="transcode: encoding speed, x real time")
    note: str | None = Field(None, description="why its output could not be read")

    def line(self) -> str:
        """'chunk 3 45% at 1.5x' (a transcode's running chunk) for a person."""
        index = self.task_id.rpartition("_")[2]
        speed = f" at {self.speed:g}x" if self.speed is not None else ""
        return f"chunk {index} {self.percent or 0:.0f}%{speed}"


class WorkProgress(_Model):
    """A render's frames or a transcode's chunks: how many are done of how many, and
    each running task's own progress."""

    unit: Literal["frames", "chunks"] = Field(description="what done and total count")
    done: int = Field(description="frames saved, or chunks encoded")
    total: int = Field(description="frames, or chunks, of the whole job")
    running: tuple[TaskProgress, ...] = Field(description="each running task's progress")
    complete: bool = Field(
        description="false: a running task's output was not read in full (too long, or "
        "unreadable: its note says), so done may be low"
    )

    def line(self) -> str:
        """'31/48 frames' or '2/5 chunks (chunk 3 45% at 1.5x)' for a person."""
        text = f"{self.done}/{self.total} {self.unit}"
        shown = [t.line() for t in self.running if t.percent is not None]
        return f"{text} ({', '.join(shown)})" if shown else text


def task_progress(
    task_id: str,
    work: Work,
    index: int,
    read: BlenderRead | EncodeRead | None,
    note: str | None = None,
) -> TaskProgress:
    """One running task's progress from what its output said (None: nothing could be
    read; note: why, or why not all of it)."""
    size = work.sizes[index] if 0 <= index < len(work.sizes) else None
    if isinstance(read, BlenderRead):
        frames = int(size) if size is not None else None
        done = len(read.saved) if frames is None else min(len(read.saved), frames)
        sampled = read.samples
        return TaskProgress(
            task_id=task_id,
            frames_done=done,
            frames=frames,
            frame=read.frame,
            samples_done=sampled[0] if sampled else None,
            samples=sampled[1] if sampled else None,
            note=note,
        )
    if read is None:
        return TaskProgress(task_id=task_id, note=note)
    percent = None
    if read.ended:
        percent = 100.0
    elif read.out_time_s is not None and size:
        percent = round(min(100.0, 100.0 * read.out_time_s / size), 1)
    return TaskProgress(task_id=task_id, percent=percent, speed=read.speed, note=note)


def work_progress(
    status: JobStatus, work: Work, running: Sequence[TaskProgress], complete: bool
) -> WorkProgress:
    """The job's progress: its completed tasks whole, its running ones as read."""
    done = 0
    for task in status.tasks:
        index = task.array_task_id
        if task.state is JobState.COMPLETED and index is not None and index < len(work.sizes):
            done += int(work.sizes[index]) if work.unit == "frames" else 1
    if work.unit == "frames":
        done += sum(t.frames_done or 0 for t in running)
    if not status.tasks and status.state is JobState.COMPLETED:
        done = work.total  # accounting folded the array into one record
    return WorkProgress(
        unit=work.unit,
        done=min(done, work.total),
        total=work.total,
        running=tuple(running),
        complete=complete,
    )

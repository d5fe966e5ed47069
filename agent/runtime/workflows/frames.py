"""`jobsmith render-frames`: a frame range rendered across the cluster with Blender, as one plan.

- `render`: blocks of frames, one array task each (blender_frames);
- `check`: after it, every frame of the range exists and decodes (frames_check; it fails
  naming the missing and broken frames, and writes them to OUTPUT_DIR/check.json);
- `thumbs`: small thumbnails of the frames for the run report's contact sheet, made on
  the cluster after the render (frames_thumbs; agent/runtime/workflows/contact.py reads
  them). A step of the plan rather than something `report` submits: it is there when the
  frames are (a report never waits for a queue), and it follows a re-run of the render as
  the check does (planrun.redirect_after_rerun);
- `encode`, when a video is asked for: the frames into a video after the check
  (frames_encode).

A task that fails part-way (Blender stops at a frame it cannot render or save) is re-run
alone (`jobsmith rerun`, or the rule brain with the memory or time its diagnosis calls
for), and the re-run renders only the frames of its block the first run did not save
(blender_frames' resume_token), so one frame made to fail is rendered again alone; the
check and the thumbnails follow the re-run (planrun.redirect_after_rerun).

A repair (`--missing-only`) looks at the frames already there, where the job runs (ffmpeg
decodes each), and renders only the missing or broken ones, in blocks of consecutive
frames, then checks the whole range again: what rendered fine is never rendered twice.
Over SSH the frames are the cluster's files: they are looked at and decoded there, by
the login node's ffmpeg, in ONE command for the whole range (`There`), never one per
frame and never on the laptop. Everything here but `broken_frames` and `There` is pure.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.agent.runtime.workflows.plans import Plan, plan_name
from jobsmith.errors import InputError, SchedulerError
from jobsmith.workload_caps import MAX_FRAMES, OverCap, check_count

if TYPE_CHECKING:
    from jobsmith.adapters.transport import Transport

#: the frames' file extension for each Blender image format
EXTENSIONS = {"PNG": "png", "OPEN_EXR": "exr", "JPEG": "jpg", "TIFF": "tif"}
#: the thumbs step's directory, inside the frames' (the check and the encode read only
#: frame_NNNNN files there)
THUMBS_DIR = "thumbs"


@dataclass(frozen=True)
class RenderRequest:
    """What to render, and how."""

    blend_file: Path
    output_dir: Path
    frame_start: int
    frame_end: int
    frames_per_task: int = 10
    engine: str = "scene"
    image_format: str = "PNG"
    video: Path | None = None
    fps: int = 24
    #: set: a re-run of a render task renders only the frames its first run did not save
    #: (blender_frames' resume_token; the command draws a random one per plan)
    resume_token: str | None = None

    @property
    def extension(self) -> str:
        """The frames' file extension."""
        return EXTENSIONS[self.image_format]


_FRAMES = re.compile(r"(?P<first>[0-9]{1,9})(?:-(?P<last>[0-9]{1,9}))?", re.ASCII)


def parse_frames(text: str) -> tuple[int, int]:
    """'1-250' (or '7') as (first, last); InputError naming the option otherwise (ASCII
    digits only: int() also reads other scripts' digits, spaces and underscores)."""
    match = _FRAMES.fullmatch(text.strip())
    if match is None:
        raise InputError(f"--frames {text!r}: expected FIRST-LAST, e.g. 1-250")
    start = int(match["first"])
    end = int(match["last"] or start)
    if end < start:
        raise InputError(f"--frames {text!r}: FIRST-LAST with 0 <= FIRST <= LAST")
    try:  # from the ends alone, before any list of frames (1-99999999 reached 8 GB)
        check_count(end - start + 1, MAX_FRAMES, "frames", "split the range over commands")
    except OverCap as exc:
        raise InputError(f"--frames {text!r}: {exc}") from None
    return start, end


def blocks_of(frames: Iterable[int], per_task: int) -> list[str]:
    """Runs of consecutive frames, each at most per_task long, as FIRST-LAST blocks."""
    blocks: list[str] = []
    run: list[int] = []
    for frame in sorted(set(frames)):
        if run and (frame != run[-1] + 1 or len(run) == per_task):
            blocks.append(f"{run[0]}-{run[-1]}")
            run = []
        run.append(frame)
    if run:
        blocks.append(f"{run[0]}-{run[-1]}")
    return blocks


def render_plan(request: RenderRequest, frames: Iterable[int] | None = None) -> Plan:
    """The plan rendering frames (default: the whole range), then checking the range,
    then encoding it if a video is asked for."""
    wanted = range(request.frame_start, request.frame_end + 1) if frames is None else frames
    blocks = blocks_of(wanted, request.frames_per_task)
    if not blocks:
        raise InputError("render: no frame to render")
    frames_dir = str(request.output_dir)
    steps: dict[str, dict[str, object]] = {
        "render": {
            "template": "blender_frames",
            "params": {
                "blend_file": str(request.blend_file),
                "output_dir": frames_dir,
                "blocks": blocks,
                "engine": request.engine,
                "image_format": request.image_format,
                **({"resume_token": request.resume_token} if request.resume_token else {}),
            },
        },
        "check": {
            "template": "frames_check",
            "params": {
                "frames_dir": frames_dir,
                "frame_start": request.frame_start,
                "frame_end": request.frame_end,
                "extension": request.extension,
            },
            "after_ok": ["render"],
        },
        "thumbs": {
            "template": "frames_thumbs",
            "params": {
                "frames_dir": frames_dir,
                "frame_start": request.frame_start,
                "frame_end": request.frame_end,
                "extension": request.extension,
                "output_dir": str(request.output_dir / THUMBS_DIR),
            },
            "after_ok": ["render"],
        },
    }
    if request.video is not None:
        steps["encode"] = {
            "template": "frames_encode",
            "params": {
                "frames_dir": frames_dir,
                "frame_start": request.frame_start,
                "extension": request.extension,
                "fps": request.fps,
                "output": str(request.video),
            },
            "after_ok": ["check"],
        }
    name = plan_name("render", request.blend_file)
    return Plan.model_validate({"name": name, "steps": steps})


Decoder = Callable[[Path], bool]


def plan_for(request: RenderRequest, *, missing_only: bool, there: There | None = None) -> Plan:
    """`jobsmith render-frames`' plan: the whole frame range, or (missing_only) only its
    missing or broken frames, found here or (there) on the login node; nothing to
    re-render is an error."""
    if not missing_only:
        return render_plan(request)
    todo = there.broken_frames(request) if there is not None else broken_frames(request)
    if not todo:
        where = there.where if there is not None else ""
        raise InputError(
            f"render: every frame of {request.frame_start}-{request.frame_end} in "
            f"{request.output_dir}{where} is there and decodes: nothing to re-render"
        )
    return render_plan(request, todo)


def broken_frames(request: RenderRequest, decodes: Decoder | None = None) -> list[int]:
    """The frames of the range that are missing, empty or do not decode (ffmpeg)."""
    decodes = decodes or _decodes
    out = []
    for frame in range(request.frame_start, request.frame_end + 1):
        path = request.output_dir / f"frame_{frame:05d}.{request.extension}"
        if not path.is_file() or path.stat().st_size == 0 or not decodes(path):
            out.append(frame)
    return out


#: seconds ffmpeg may take to decode one frame (then the frame counts as broken)
DECODE_TIMEOUT_S = 120


def _decodes(path: Path) -> bool:
    try:
        res = subprocess.run(
            ["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-f", "null", "-"],
            capture_output=True,
            text=True,
            timeout=DECODE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise InputError("--missing-only needs ffmpeg on this node (apt install ffmpeg)") from None
    except subprocess.TimeoutExpired:
        return False
    return res.returncode == 0 and not res.stderr.strip()


#: broken_frames on the login node, in one command: for frames $3..$4 of directory $1
#: with extension $2, the number of each that is missing, empty or does not decode
#: (ffmpeg prints an error, fails, or outlives $5 seconds), one a line; exit 127 when
#: there is a frame to decode and no ffmpeg (or no timeout) to decode it with
_BROKEN_SH = r"""
i=$3
while [ "$i" -le "$4" ]; do
  f=$(printf '%s/frame_%05d.%s' "$1" "$i" "$2")
  if [ -f "$f" ] && [ -s "$f" ]; then
    e=$(timeout "$5" ffmpeg -nostdin -v error -i "$f" -f null - 2>&1 </dev/null)
    r=$?
    if [ "$r" = 127 ]; then exit 127; fi
    if [ "$r" != 0 ] || [ -n "$e" ]; then echo "$i"; fi
  else
    echo "$i"
  fi
  i=$((i + 1))
done
"""


def broken_argv(request: RenderRequest) -> list[str]:
    """The one command that finds the broken frames of request's range where it runs."""
    args = (request.output_dir, request.extension, request.frame_start, request.frame_end)
    return ["sh", "-c", _BROKEN_SH, "sh", *map(str, args), str(DECODE_TIMEOUT_S)]


def parse_broken(request: RenderRequest, stdout: str) -> list[int]:
    """broken_argv's answer as frame numbers; ValueError if a line is not a frame of the
    range."""
    frames = []
    for line in stdout.split():
        if not line.isascii() or not line.isdigit():
            raise ValueError(f"not a frame number: {line[:50]!r}")
        frame = int(line)
        if not request.frame_start <= frame <= request.frame_end:
            raise ValueError(f"frame {frame} is not in the range asked")
        frames.append(frame)
    return sorted(set(frames))


@dataclass(frozen=True)
class There:
    """The login node, for a site reached over SSH: the frames are its files, decoded by
    its ffmpeg (docs/ssh.md)."""

    #: for messages: " on alice@login1:22" (the job's files' PathLookup.where)
    where: str
    transport: Transport

    def broken_frames(self, request: RenderRequest) -> list[int]:
        """The frames of the range that are missing, empty or do not decode there."""
        frames = request.frame_end - request.frame_start + 1
        # every frame may take the whole decode timeout; a hang still ends
        timeout = 60.0 + DECODE_TIMEOUT_S * frames
        res = self.transport.run(broken_argv(request), timeout=timeout)
        if res.returncode == 127:
            raise InputError(
                f"--missing-only needs ffmpeg on the login node{self.where} "
                "(Debian: apt install ffmpeg)"
            )
        try:
            if res.returncode != 0:
                raise ValueError(f"exit {res.returncode}: {res.stderr.strip()[:200]}")
            return parse_broken(request, res.stdout)
        except ValueError as exc:
            raise SchedulerError(
                f"cannot look at the frames in {request.output_dir}{self.where}: {exc}"
            ) from None

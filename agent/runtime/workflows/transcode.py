"""`jobsmith transcode`: a video encoded across the cluster, as one plan.

The login node only reads the source's packet list with ffprobe (its timestamps and key
frame flags: no decoding), and cuts it into segments of about `chunk_seconds` that each
start on a key frame, so every segment decodes from exactly where it starts and the
segments meet without a frame lost or doubled. Then a plan (agent/runtime/workflows/plans.py):

- `video`: the picture, one array task per segment (ffmpeg_segments);
- `audio`: the sound, whole, in one job beside it (ffmpeg_audio; AAC cut in chunks clicks
  at the joins), if the source has sound;
- `join`: the segments joined (ffmpeg_concat), after the video;
- `finish`: picture and sound put together and checked against the source, duration,
  streams and frames (ffmpeg_mux_verify), after the join and the sound;
- `strip`: thumbnails of the finished output's key frames for the run report's contact
  sheet (video_keyframes), after the finish.

A segment that fails is re-run alone (`jobsmith rerun`, or the rule brain where rules can
fix it): the join and the check are pointed at the re-run (agent/runtime/workflows/planrun.py).
Everything here but `probe` is pure. Over SSH the source is a file on the cluster: it is
resolved there and probed with the login node's ffprobe (`There`), never the laptop's.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.agent.runtime.workflows.plans import Plan, plan_name
from jobsmith.errors import InputError
from jobsmith.workload_caps import MAX_CHUNKS, OverCap, check_count

if TYPE_CHECKING:
    from jobsmith.adapters.transport import Transport
    from jobsmith.job_templates.paths import PathLookup

#: ffprobe reads a large file's packet list in seconds; anything longer is not ffprobe's
PROBE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Probe:
    """What ffprobe says about a source."""

    duration_s: float
    keyframes: tuple[float, ...]  # the video's key frame times, seconds, ascending
    has_audio: bool


@dataclass(frozen=True)
class Encoding:
    """How to encode (the ffmpeg_segments and ffmpeg_audio parameters)."""

    video_codec: str = "libx264"
    preset: str = "medium"
    crf: int = 23
    audio_kbps: int = 128


Runner = Callable[[list[str]], str]


def probe(source: Path, run: Runner | None = None) -> Probe:
    """The source's duration, key frames and whether it has sound (two ffprobe calls)."""
    run = run or _ffprobe
    streams = json.loads(
        run(["-show_entries", "format=duration:stream=codec_type", "-of", "json", str(source)])
    )
    entries = ["-select_streams", "v:0", "-show_entries", "packet=pts_time,flags"]
    packets = run([*entries, "-of", "csv=p=0", str(source)])
    kinds = {s.get("codec_type") for s in streams.get("streams", [])}
    if "video" not in kinds:
        raise InputError(f"{source}: ffprobe finds no video stream in it")
    try:
        duration = float(streams["format"]["duration"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{source}: ffprobe gives no duration for it") from None
    return Probe(duration, keyframes_of(packets), "audio" in kinds)


def _ffprobe(args: list[str]) -> str:
    try:
        out = subprocess.run(
            ["ffprobe", "-v", "error", *args],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise InputError(
            "transcode needs ffprobe on this node (Debian: apt install ffmpeg)"
        ) from None
    except subprocess.TimeoutExpired:
        raise InputError(f"ffprobe gave no answer within {PROBE_TIMEOUT_S} s") from None
    if out.returncode != 0:
        said = " ".join(out.stderr.split())[:300]
        raise InputError(f"ffprobe cannot read {args[-1]}: {said}")
    return out.stdout


def keyframes_of(packets_csv: str) -> tuple[float, ...]:
    """Key frame times from ffprobe's `packet=pts_time,flags` CSV ('0.040000,K__')."""
    times = []
    for line in packets_csv.splitlines():
        pts, _, flags = line.strip().partition(",")
        if "K" in flags:
            try:
                times.append(float(pts))
            except ValueError:
                continue  # N/A: a packet without a timestamp cannot start a segment
    return tuple(sorted(set(times)))


def segments(probed: Probe, chunk_seconds: float) -> list[tuple[float, float]]:
    """(start, duration) of each segment: each starts on the first key frame at or after
    a multiple of chunk_seconds, the last ends with the source."""
    if not chunk_seconds > 0:  # NaN too
        raise InputError("--chunk-seconds must be above 0")
    if not math.isfinite(probed.duration_s):
        raise InputError(f"ffprobe gives the source a duration of {probed.duration_s} s")
    try:  # from the duration alone, before a list of chunks is built
        check_count(
            math.ceil(probed.duration_s / chunk_seconds),
            MAX_CHUNKS,
            f"chunks of {_num(chunk_seconds)} s in {_num(probed.duration_s)} s",
            "give a larger --chunk-seconds",
        )
    except OverCap as exc:
        raise InputError(f"--chunk-seconds {chunk_seconds:g}: {exc}") from None
    starts = [0.0]
    for keyframe in probed.keyframes:
        if keyframe >= starts[-1] + chunk_seconds and keyframe < probed.duration_s:
            starts.append(keyframe)
    ends = [*starts[1:], probed.duration_s]
    return [(s, round(e - s, 6)) for s, e in zip(starts, ends, strict=True)]


def transcode_plan(
    source: Path,
    output: Path,
    probed: Probe,
    chunk_seconds: float,
    encoding: Encoding,
    workdir: Path,
    log_dir: Path | None = None,
) -> Plan:
    """The plan that encodes source into output (module docstring)."""
    cuts = [f"{_num(start)}+{_num(length)}" for start, length in segments(probed, chunk_seconds)]
    chunks, video, audio = workdir / "chunks", workdir / "video.mkv", workdir / "audio.m4a"
    logs = {"log_dir": str(log_dir)} if log_dir else {}
    steps: dict[str, dict[str, object]] = {
        "video": {
            "template": "ffmpeg_segments",
            "params": {
                "input": str(source),
                "output_dir": str(chunks),
                "segments": cuts,
                "video_codec": encoding.video_codec,
                "preset": encoding.preset,
                "crf": encoding.crf,
            },
            **logs,
        },
        "join": {
            "template": "ffmpeg_concat",
            "params": {"chunk_dir": str(chunks), "chunks": len(cuts), "output": str(video)},
            "after_ok": ["video"],
            **logs,
        },
    }
    finish = {"video": str(video), "source": str(source), "output": str(output)}
    if probed.has_audio:
        steps["audio"] = {
            "template": "ffmpeg_audio",
            "params": {
                "input": str(source),
                "output": str(audio),
                "audio_kbps": encoding.audio_kbps,
            },
            **logs,
        }
        finish["audio"] = str(audio)
    after = ["join", "audio"] if probed.has_audio else ["join"]
    steps["finish"] = {"template": "ffmpeg_mux_verify", "params": finish, "after_ok": after, **logs}
    steps["strip"] = {
        "template": "video_keyframes",
        "params": {"video": str(output), "output_dir": str(workdir / "keyframes")},
        "after_ok": ["finish"],
        **logs,
    }
    return Plan.model_validate({"name": plan_name("transcode", source), "steps": steps})


def plan_for(
    source: Path,
    output: Path,
    chunk_seconds: float,
    encoding: Encoding,
    workdir: Path | None,
    *,
    there: There | None = None,
) -> Plan:
    """`jobsmith transcode`'s plan: source into output on the cluster, after checking both
    paths here and probing the source (ffprobe) for its key frames; there: the login
    node's files and ffprobe instead of this host's (a site reached over SSH)."""
    if there is not None:
        return _planned_there(source, output, chunk_seconds, encoding, workdir, there)
    source, output = source.resolve(), output.resolve()
    if not source.is_file():  # ffprobe would block on a FIFO, read a device forever
        raise InputError(f"transcode: {source} is not a regular file")
    if source == output:
        raise InputError(f"transcode: {output} is the source itself; name another output")
    workdir = (workdir or default_workdir(output)).resolve()
    return transcode_plan(source, output, probe(source), chunk_seconds, encoding, workdir)


@dataclass(frozen=True)
class There:
    """The login node, for a site reached over SSH: its files and its ffprobe."""

    files: PathLookup
    transport: Transport

    def ffprobe(self, args: list[str]) -> str:
        """ffprobe run on the login node, failing as _ffprobe does here."""
        res = self.transport.run(["ffprobe", "-v", "error", *args], timeout=PROBE_TIMEOUT_S)
        if res.returncode == 127:
            raise InputError(
                f"transcode needs ffprobe on the login node{self.files.where} "
                "(Debian: apt install ffmpeg)"
            )
        if res.returncode != 0:
            said = " ".join(res.stderr.split())[:300]
            raise InputError(f"ffprobe cannot read {args[-1]}{self.files.where}: {said}")
        return res.stdout


def _planned_there(
    source: Path,
    output: Path,
    chunk_seconds: float,
    encoding: Encoding,
    workdir: Path | None,
    there: There,
) -> Plan:
    """plan_for with the paths resolved and the source probed on the login node (the
    laptop's files are not the job's: docs/ssh.md)."""
    asked = [Path(os.path.abspath(p)) for p in (source, output)]
    facts = there.files.look(asked)
    found, out = facts[asked[0]], facts[asked[1]]
    if found.real is None or found.found != "file":
        raise InputError(f"transcode: {asked[0]} is not a regular file{there.files.where}")
    source, output = found.real, out.real or asked[1]
    if source == output:
        raise InputError(f"transcode: {output} is the source itself; name another output")
    workdir = Path(os.path.abspath(workdir or default_workdir(output)))
    probed = probe(source, there.ffprobe)
    return transcode_plan(source, output, probed, chunk_seconds, encoding, workdir)


def _num(value: float) -> str:
    """A time as the template's pattern takes it: digits, a point, digits (no exponent)."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def default_workdir(output: Path) -> Path:
    """Where the chunks and the sound go: beside the output, in a directory of its own."""
    return output.parent / f".{output.name}.jobsmith"


def describe(cuts: Sequence[tuple[float, float]]) -> str:
    """'3 segments of 4.0 to 4.2 s' for a person."""
    lengths = [length for _, length in cuts]
    return f"{len(cuts)} segments of {min(lengths):.1f} to {max(lengths):.1f} s"

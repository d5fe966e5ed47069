"""The contact sheet (issue 28, item 3), without Slurm: the frames_thumbs and
video_keyframes templates' bodies run here with Debian's ffmpeg on frames and a clip made
here (on the lab the same bodies run as jobs: tests/test_render_frames.py), their
contact.txt read back (what a job wrote is not trusted), the section the report and
`jobsmith frames` share, and the command on a session without jobs. Headless Chromium's
check of the page is tests/test_contact_sheet_chromium.py.
"""

from __future__ import annotations

import base64
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from lab_cli import js
from test_report import Page, array_report

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.workflows.contact import (
    MAX_THUMB_BYTES,
    ContactSheet,
    parse_sheet,
    sheet_source,
)
from jobsmith.agent.runtime.workflows.contactread import read_contact_sheets
from jobsmith.agent.views.contact_html import contact_section, render_contact_page
from jobsmith.agent.views.report_html import render_html
from jobsmith.job_templates import TemplateLibrary, render_body, shipped_library

JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 60).decode()


def run_template(name: str, params: dict[str, object], root: Path) -> str:
    """The template's body, rendered as for a job and run here with bash: its stdout."""
    template = TemplateLibrary([shipped_library()]).get(name)
    body = render_body(template, params, allowed_roots=[root]).body
    done = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_frames(directory: Path, frames: range, size: str = "160x120") -> None:
    """PNG frames frame_NNNNN.png from ffmpeg's test source (a moving picture)."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi",
         "-i", f"testsrc=size={size}:rate=25", "-frames:v", str(len(frames)),
         "-start_number", str(frames.start), str(directory / "frame_%05d.png")],
        check=True,
    )  # fmt: skip


def sheet_of(path: Path, kind: str = "frames") -> ContactSheet:
    thumbs, rejected = parse_sheet(path.read_text())
    assert rejected == 0
    return ContactSheet.model_validate(
        {"job_id": "7", "kind": kind, "path": str(path), "thumbs": thumbs}
    )


# --- the templates' bodies, run here ---------------------------------------------------------


def test_every_frame_gets_a_small_jpeg_and_a_missing_one_a_gap(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    make_frames(frames, range(1, 13))
    (frames / "frame_00005.png").unlink()
    (frames / "frame_00009.png").write_bytes(b"not a png")
    said = run_template(
        "frames_thumbs",
        {"frames_dir": str(frames), "frame_start": 1, "frame_end": 12,
         "output_dir": str(frames / "thumbs")},
        tmp_path,
    )  # fmt: skip
    assert said.startswith("thumbs: 10 thumbnails of frames 1 to 12 (every 1)")
    sheet = sheet_of(frames / "thumbs" / "contact.txt")
    assert [t.frame for t in sheet.thumbs] == list(range(1, 13))
    assert [t.frame for t in sheet.thumbs if t.jpeg_base64 is None] == [5, 9]
    sizes = [len(base64.b64decode(t.jpeg_base64)) for t in sheet.thumbs if t.jpeg_base64]
    assert all(500 < n < 8000 for n in sizes), sizes  # a few KB each
    assert (sheet.shown, sheet.missing) == (10, 2)


def test_a_long_range_is_sampled_evenly_up_to_max_thumbs(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    make_frames(frames, range(1, 11), size="32x24")
    run_template(
        "frames_thumbs",
        {"frames_dir": str(frames), "frame_start": 1, "frame_end": 10, "max_thumbs": 4,
         "output_dir": str(tmp_path / "t")},
        tmp_path,
    )  # fmt: skip
    sheet = sheet_of(tmp_path / "t" / "contact.txt")
    assert [t.frame for t in sheet.thumbs] == [1, 4, 7, 10]


def test_a_video_gets_a_strip_of_its_key_frames(tmp_path: Path) -> None:
    clip = tmp_path / "clip.mp4"
    subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi",
         "-i", "testsrc=duration=8:size=160x120:rate=25", "-c:v", "libx264", "-g", "25",
         "-keyint_min", "25", str(clip)],
        check=True,
    )  # fmt: skip
    said = run_template(
        "video_keyframes",
        {"video": str(clip), "output_dir": str(tmp_path / "keys"), "max_thumbs": 4},
        tmp_path,
    )
    assert said.startswith("keyframes: 4 thumbnails of 8 key frames")
    sheet = sheet_of(tmp_path / "keys" / "contact.txt", "keyframes")
    assert [t.time_s for t in sheet.thumbs] == [0.0, 2.0, 4.0, 6.0]
    assert [t.label for t in sheet.thumbs][:2] == ["0.00 s", "2.00 s"]
    assert sheet.shown == 4


# --- what a job wrote, read back -----------------------------------------------------------


def test_only_lines_of_the_form_with_a_small_jpeg_are_kept() -> None:
    big = base64.b64encode(b"\xff\xd8\xff" + b"\0" * MAX_THUMB_BYTES).decode()
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    text = "\n".join(
        [
            f"frame\t1\t{JPEG}",
            "frame\t2\t-",
            f"time\t2.5\t{JPEG}",
            "",
            f"frame\t3\t{JPEG}'><script>alert(1)</script>",  # not base64
            f"frame\t4\t{png}",  # not a JPEG
            f"frame\t5\t{big}",  # not a thumbnail
            f"frame\t٣\t{JPEG}",  # not ASCII digits
            f"time\tnan\t{JPEG}",
            f"time\t-1\t{JPEG}",
            f"frame\t6\t{JPEG}\textra",
            "frame\t7",
        ]
    )
    thumbs, rejected = parse_sheet(text)
    assert [(t.frame, t.time_s, t.jpeg_base64 is not None) for t in thumbs] == [
        (1, None, True), (2, None, False), (None, 2.5, True),
    ]  # fmt: skip
    assert rejected == 8


def test_only_thumbnail_jobs_have_a_sheet() -> None:
    assert sheet_source("frames_thumbs", {"output_dir": "/r/thumbs/"}) == (
        "frames",
        "/r/thumbs/contact.txt",
    )
    assert sheet_source("video_keyframes", {"output_dir": "/w/k"}) == (
        "keyframes",
        "/w/k/contact.txt",
    )
    assert sheet_source("blender_frames", {"output_dir": "/r"}) is None
    assert sheet_source("frames_thumbs", {}) is None


def _ledger(tmp_path: Path, job_id: str, output_dir: Path) -> JobLedger:
    ledger = JobLedger(tmp_path / "ledger")
    ledger.record(
        SubmissionRecord(
            job_id=job_id,
            cluster="lab",
            template="frames_thumbs",
            params={"output_dir": str(output_dir)},
            options=JobOptions(job_name="thumbs.js-0123456789ab"),
            script_sha256="0" * 64,
            submitted_at=datetime(2026, 12, 2, tzinfo=UTC),
        )
    )
    return ledger


class _Parts:
    def __init__(self, ledger: JobLedger) -> None:
        self.ledger = ledger
        self.transport = LocalTransport()


def test_a_sheet_is_read_when_its_job_completed_and_noted_before(tmp_path: Path) -> None:
    out = tmp_path / "thumbs"
    out.mkdir()
    lines = [f"frame\t{n}\t{JPEG}" for n in range(1, 49)]
    (out / "contact.txt").write_text("\n".join(lines) + "\nframe\t49\tnot-base64!\n")
    parts = _Parts(_ledger(tmp_path, "300", out))
    done = {"300": JobStatus(job_id="300", state=JobState.COMPLETED)}
    (sheet,) = read_contact_sheets(parts, done)
    assert (sheet.shown, sheet.missing, sheet.kind) == (48, 0, "frames")
    assert sheet.note == "1 line(s) of it are no thumbnail and are left out"
    waiting = {"300": JobStatus(job_id="300", state=JobState.PENDING)}
    (sheet,) = read_contact_sheets(parts, waiting)
    assert sheet.thumbs == () and sheet.note == "not made yet: job 300 is PENDING"
    (out / "contact.txt").unlink()
    (sheet,) = read_contact_sheets(parts, done)
    assert sheet.note == f"cannot read {out}/contact.txt: it is not there"
    other = {"301": JobStatus(job_id="301", state=JobState.COMPLETED)}
    assert read_contact_sheets(parts, other) == []  # not jobsmith's, or no thumbnails


# --- the page -------------------------------------------------------------------------------


def _sheet(count: int, missing: tuple[int, ...] = ()) -> ContactSheet:
    lines = [f"frame\t{n}\t{'-' if n in missing else JPEG}" for n in range(1, count + 1)]
    thumbs, _ = parse_sheet("\n".join(lines))
    return ContactSheet.model_validate(
        {"job_id": "300", "kind": "frames", "path": "/r/thumbs/contact.txt", "thumbs": thumbs}
    )


def test_the_section_embeds_each_thumbnail_and_marks_the_missing() -> None:
    page = Page(contact_section([_sheet(6, missing=(4,))]))
    assert "contact-sheet" in page.ids
    assert page.tags.count("img") == 5 and page.tags.count("figure") == 6
    assert all(link == f"data:image/jpeg;base64,{JPEG}" for link in page.links)
    text = "".join(page.text)
    assert "job 300: 5 thumbnails of frames, 1 missing" in text
    assert "frame 4: missing" in text
    assert contact_section([]) == ""


def test_the_report_and_the_frames_page_carry_the_same_section() -> None:
    sheet = _sheet(48)
    report = array_report().model_copy(update={"contact_sheets": (sheet,)})
    assert report.summary("r.html").thumbnails == 48
    section = contact_section([sheet])
    full = render_html(report)
    alone = render_contact_page(report.session_id, report.title, [sheet])
    assert section in full and section in alone
    assert "default-src 'none'" in alone and "<script" not in alone
    assert "img-src data:" in full  # the report's policy lets the data: images show


def test_frames_on_a_session_without_a_sheet_writes_a_page_that_says_so(
    jobsmith_home: Path, tmp_path: Path
) -> None:
    store = FileSessionStore(jobsmith_home / "state" / "sessions")
    session = store.create({"title": "nothing yet", "origin": "cli"})
    out = tmp_path / "f.html"
    result = js("frames", session, "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == {"session_id": session, "title": "nothing yet", "path": str(out), "sheets": []}
    assert "no-sheet" in Page(out.read_text()).ids
    text = js("frames", session, "-o", str(out))
    assert f"contact sheet written to {out}" in text.stdout


@pytest.mark.parametrize("bad", ["20261201T100000.000Z-000000000000"])
def test_frames_of_an_unknown_session_is_one_line(jobsmith_home: Path, bad: str) -> None:
    result = js("frames", bad)
    assert result.exit_code == 6 and "jobsmith sessions list" in result.stderr

"""The contact sheet in headless Chromium (issue 28, item 3): the thumbnails the
frames_thumbs body makes of 48 frames (run here with Debian's ffmpeg; on the lab the same
body runs as the render plan's job, tests/test_render_frames.py), shown by `jobsmith
frames`' page and by the report's, under each page's own Content-Security-Policy: the
DOM has 48 thumbnails, and all 48 decoded (a probe script, allowed by its hash and by
nothing else, counts the images the browser drew). The screenshot is kept (where
tests/test_report_lab.py keeps its own) to be looked at.

Marked host_only: the other Debian release's root (scripts/slurm-other) has no Chromium.
No Slurm.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from test_contact_sheet import make_frames, run_template, sheet_of
from test_report import Page, array_report
from test_report_lab import artifacts_dir, browse, chromium

from jobsmith.agent.views.contact_html import render_contact_page
from jobsmith.agent.views.report_html import render_html

pytestmark = pytest.mark.host_only

#: counts the images the browser decoded, once the page has loaded
PROBE = (
    "window.addEventListener('load', () => document.body.setAttribute('data-decoded', "
    "[...document.images].filter(i => i.complete && i.naturalWidth > 0).length));"
)


def with_probe(text: str) -> str:
    """The page with PROBE added, allowed by its hash alone: the page's own policy
    otherwise unchanged (its img-src is what lets the thumbnails show, or not)."""
    digest = base64.b64encode(hashlib.sha256(PROBE.encode()).digest()).decode()
    allowed = f"'sha256-{digest}'"
    if "script-src" in text:
        text = text.replace("script-src ", f"script-src {allowed} ", 1)
    else:
        text = text.replace("img-src data:", f"img-src data:; script-src {allowed}", 1)
    return text.replace("</body>", f"<script>{PROBE}</script></body>")


def decoded(dom: str) -> int:
    found = re.search(r"<body[^>]*data-decoded=\"([0-9]+)\"", dom)
    assert found is not None, "the probe did not run"
    return int(found.group(1))


def test_the_contact_sheet_shows_48_decoded_thumbnails_in_chromium(tmp_path: Path) -> None:
    chromium()
    frames = tmp_path / "frames"
    make_frames(frames, range(1, 49))
    run_template(
        "frames_thumbs",
        {"frames_dir": str(frames), "frame_start": 1, "frame_end": 48,
         "output_dir": str(frames / "thumbs")},
        tmp_path,
    )  # fmt: skip
    sheet = sheet_of(frames / "thumbs" / "contact.txt")
    assert sheet.shown == 48
    alone = render_contact_page("20261202T120000.000Z-0123456789ab", "render shot42", [sheet])
    report = render_html(array_report().model_copy(update={"contact_sheets": (sheet,)}))
    profile = tmp_path / "profile"
    for name, text in (("frames", alone), ("report", report)):
        page = tmp_path / f"{name}.html"
        page.write_text(with_probe(text))
        dom = browse(page, profile, "--dump-dom", "--virtual-time-budget=5000")
        seen = Page(dom)
        figures = re.findall(r"<figure class=\"thumb\" data-frame=\"([0-9]+)\"", dom)
        assert figures == [str(n) for n in range(1, 49)], name
        assert sum(link.startswith("data:image/jpeg;base64,") for link in seen.links) == 48
        assert decoded(dom) == 48, name  # every thumbnail drawn, under the page's policy
    shot = artifacts_dir() / "contact-sheet.png"
    (tmp_path / "frames.html").write_text(alone)  # as written: no probe
    browse(tmp_path / "frames.html", profile, f"--screenshot={shot}", "--window-size=1100,700")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_a_policy_without_data_images_shows_none(tmp_path: Path) -> None:
    """The probe can fail: the same page with img-src 'none' decodes no thumbnail."""
    chromium()
    frames = tmp_path / "frames"
    make_frames(frames, range(1, 4), size="32x24")
    run_template(
        "frames_thumbs",
        {"frames_dir": str(frames), "frame_start": 1, "frame_end": 3,
         "output_dir": str(frames / "thumbs")},
        tmp_path,
    )  # fmt: skip
    text = render_contact_page("s", None, [sheet_of(frames / "thumbs" / "contact.txt")])
    page = tmp_path / "page.html"
    page.write_text(with_probe(text).replace("img-src data:", "img-src 'none'"))
    dom = browse(page, tmp_path / "profile", "--dump-dom", "--virtual-time-budget=5000")
    assert decoded(dom) == 0

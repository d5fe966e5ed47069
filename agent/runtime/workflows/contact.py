"""A contact sheet: small thumbnails of a render's frames, or a strip of a transcode's key
frames, that a job made on the cluster (templates frames_thumbs and video_keyframes, the
last steps of the render and transcode plans).

The login node never decodes an image or reads a frame: the job writes one text file,
OUTPUT_DIR/contact.txt, a line per thumbnail, `frame<TAB>N<TAB>BASE64` or
`time<TAB>SECONDS<TAB>BASE64` (`-` instead of the bytes: no thumbnail, the frame is
missing or does not decode), and jobsmith reads that one file through the transport with
bounded reads (agent/runtime/workflows/contactread.py). A report then embeds each
thumbnail as a `data:` URI, so the page stays one self-contained file.

What a job wrote is not trusted: a line that is not of that form, bytes that are not
base64, or do not start as a JPEG does, or are larger than MAX_THUMB_BYTES, are left out
and counted in the sheet's note, never put in a page. Everything here is pure.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: the templates whose jobs make a contact sheet, and what their thumbnails show
SHEET_TEMPLATES: dict[str, Literal["frames", "keyframes"]] = {
    "frames_thumbs": "frames",
    "video_keyframes": "keyframes",
}
#: the file such a job writes in its output_dir
SHEET_FILE = "contact.txt"
#: a thumbnail is a few KB; anything this large is not one and stays out of the page
MAX_THUMB_BYTES = 64 * 1024
_JPEG = b"\xff\xd8\xff"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Thumb(_Model):
    """One frame or key frame of the sheet, with its thumbnail if the job made one."""

    frame: int | None = Field(None, description="render: the frame's number")
    time_s: float | None = Field(None, description="transcode: the key frame's time, seconds")
    jpeg_base64: str | None = Field(
        None, description="the thumbnail, a JPEG in base64 (None: the frame is missing)"
    )

    @property
    def label(self) -> str:
        """'frame 12' or '4.00 s' for a person."""
        if self.frame is not None:
            return f"frame {self.frame}"
        return f"{self.time_s or 0:.2f} s"


class ContactSheet(_Model):
    """The thumbnails one job made, or why there are none (yet)."""

    job_id: str = Field(description="the job that made (or is to make) the thumbnails")
    kind: Literal["frames", "keyframes"] = Field(
        description="a render's frames, or a transcode's key frames"
    )
    path: str = Field(description="the contact.txt the job writes")
    thumbs: tuple[Thumb, ...] = Field((), description="in the order the job listed them")
    note: str | None = Field(None, description="what could not be shown, and why")

    @property
    def shown(self) -> int:
        """Thumbnails with an image."""
        return sum(t.jpeg_base64 is not None for t in self.thumbs)

    @property
    def missing(self) -> int:
        """Frames listed without an image (missing or broken)."""
        return len(self.thumbs) - self.shown


def sheet_source(
    template: str, params: Mapping[str, object]
) -> tuple[Literal["frames", "keyframes"], str] | None:
    """What a job submitted from template with params makes: its kind and the path of its
    contact.txt; None for a job that makes no contact sheet."""
    kind = SHEET_TEMPLATES.get(template)
    out = params.get("output_dir")
    if kind is None or not isinstance(out, str) or not out:
        return None
    return kind, f"{out.rstrip('/')}/{SHEET_FILE}"


def parse_sheet(text: str) -> tuple[list[Thumb], int]:
    """The thumbnails a contact.txt lists, and how many of its lines were left out (not
    of the form, or bytes that are no small JPEG)."""
    thumbs: list[Thumb] = []
    rejected = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        thumb = _thumb(line)
        if thumb is None:
            rejected += 1
        else:
            thumbs.append(thumb)
    return thumbs, rejected


def _thumb(line: str) -> Thumb | None:
    parts = line.split("\t")
    if len(parts) != 3 or not parts[1].isascii():
        return None
    kind, position, data = parts
    image = None
    if data != "-" and (image := _jpeg(data)) is None:
        return None
    if kind == "frame" and position.isdigit() and len(position) <= 9:
        return Thumb(frame=int(position), jpeg_base64=image)
    if kind == "time":
        try:
            at = float(position)
        except ValueError:
            return None
        if math.isfinite(at) and at >= 0:
            return Thumb(time_s=at, jpeg_base64=image)
    return None


def _jpeg(data: str) -> str | None:
    """data if it is base64 of a JPEG of at most MAX_THUMB_BYTES, else None."""
    if not data.isascii() or len(data) > MAX_THUMB_BYTES * 4 // 3 + 4:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return data if raw.startswith(_JPEG) and len(raw) <= MAX_THUMB_BYTES else None


def read_note(rejected: int, truncated: bool) -> str | None:
    """The sheet's note from what reading it left out."""
    said = []
    if rejected:
        said.append(f"{rejected} line(s) of it are no thumbnail and are left out")
    if truncated:
        said.append("it is larger than jobsmith reads: only its first thumbnails are shown")
    return "; ".join(said) or None

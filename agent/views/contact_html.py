"""A contact sheet as HTML: the section the run report embeds, and the page `jobsmith
frames` writes around the same section (`contact_section` and `render_contact_page` are
pure).

Each thumbnail is an `<img>` with a `data:image/jpeg;base64,` URI: the page is one file
that needs no network, and its Content-Security-Policy allows images from `data:` only
and no script at all. The bytes were checked to be base64 of a small JPEG when the sheet
was read (agent/runtime/workflows/contact.py), and are escaped here all the same.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.agent.runtime.workflows.contact import ContactSheet, Thumb
from jobsmith.errors import InputError
from jobsmith.files import write_output

#: the contact page runs nothing and loads nothing but its own data: images
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

#: the section's styles (the report's page adds them to its own)
STYLE = """
.sheet { display: flex; flex-wrap: wrap; gap: 4px; margin: 0.5em 0 1.5em; }
figure.thumb { margin: 0; text-align: center; font-size: 0.7em; color: #555; }
figure.thumb img { display: block; border: 1px solid #ccc; }
figure.thumb .gap { width: 96px; height: 72px; background: #fde8e8; border: 1px solid #d62728; }
"""

_KINDS = {"frames": "frames", "keyframes": "key frames of the output"}


def _e(value: object) -> str:
    return "" if value is None else html.escape(str(value), quote=True)


def contact_section(sheets: Sequence[ContactSheet]) -> str:
    """The contact sheets as one section (nothing when the session made none)."""
    if not sheets:
        return ""
    parts = ["<h2>Contact sheet</h2><section id='contact-sheet'>"]
    for sheet in sheets:
        said = f"job {sheet.job_id}: {sheet.shown} thumbnails of {_KINDS[sheet.kind]}"
        if sheet.missing:
            said += f", {sheet.missing} missing"
        parts.append(
            f"<div class='sheet-of' data-job-id='{_e(sheet.job_id)}' data-kind='{sheet.kind}' "
            f"data-thumbs='{sheet.shown}' data-missing='{sheet.missing}'>"
            f"<p>{_e(said)}</p>"
            + (f"<p class='note'>{_e(sheet.note)}</p>" if sheet.note else "")
            + "<div class='sheet'>"
            + "".join(_figure(t) for t in sheet.thumbs)
            + "</div></div>"
        )
    parts.append("</section>")
    return "".join(parts)


def _figure(thumb: Thumb) -> str:
    where = (
        f"data-frame='{thumb.frame}'" if thumb.frame is not None else f"data-time='{thumb.time_s}'"
    )
    if thumb.jpeg_base64 is None:
        return (
            f"<figure class='thumb missing' {where}><div class='gap'></div>"
            f"<figcaption>{_e(thumb.label)}: missing</figcaption></figure>"
        )
    return (
        f"<figure class='thumb' {where}>"
        f"<img alt='{_e(thumb.label)}' src='data:image/jpeg;base64,{_e(thumb.jpeg_base64)}'>"
        f"<figcaption>{_e(thumb.label)}</figcaption></figure>"
    )


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SheetLine(_Model):
    """One contact sheet in figures."""

    job_id: str = Field(description="the job that made the thumbnails")
    kind: str = Field(description="frames (a render) or keyframes (a transcode)")
    thumbnails: int = Field(description="thumbnails shown")
    missing: int = Field(description="frames listed without one (missing or broken)")
    note: str | None = Field(description="what could not be shown, and why")


class ContactPage(_Model):
    """`jobsmith frames --json`: the page written and its sheets in figures."""

    session_id: str = Field(description="the session")
    title: str | None = Field(description="the session's title")
    path: str = Field(description="the HTML page written")
    sheets: tuple[SheetLine, ...] = Field(description="each contact sheet of the session")

    @classmethod
    def of(
        cls, session_id: str, title: str | None, path: str, sheets: Sequence[ContactSheet]
    ) -> ContactPage:
        lines = tuple(
            SheetLine(
                job_id=s.job_id,
                kind=s.kind,
                thumbnails=s.shown,
                missing=s.missing,
                note=s.note,
            )
            for s in sheets
        )
        return cls(session_id=session_id, title=title, path=path, sheets=lines)


def render_contact_page(session_id: str, title: str | None, sheets: Sequence[ContactSheet]) -> str:
    """The whole page: a heading and the report's contact section."""
    heading = f"jobsmith contact sheet: {title or session_id}"
    body = contact_section(sheets) or (
        "<p class='note' id='no-sheet'>This session made no contact sheet: a render or a "
        "transcode plan makes one as its last step.</p>"
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_CSP}\">"
        f"<title>{_e(heading)}</title><style>body {{ font-family: sans-serif; margin: 1.5em; }}"
        f" .note {{ color: #555; }}{STYLE}</style></head>\n<body>\n"
        f"<h1>{_e(heading)}</h1>\n<p>session {_e(session_id)}</p>\n{body}\n</body></html>\n"
    )


def write_page(text: str, path: Path, what: str) -> Path:
    """Write a page to path, whole or not at all; the absolute path."""
    target = path.absolute()
    try:
        write_output(target, text.encode("utf-8"))
    except OSError as err:
        raise InputError(f"{what}: cannot write {target}: {err.strerror or err}") from err
    return target

"""Reading the contact sheets of a session's jobs through the transport
(agent/runtime/workflows/contact.py parses what is read).

A sheet is read only when the job that makes it has completed (the poll says so; a
pending or running one is a note, and costs no read), from its one contact.txt, in pages
of at most pipelines.MAX_READ_BYTES, at most MAX_PAGES of them: a hundred thumbnails of a
few KB each are half a megabyte, so the bound is never met by a sheet the shipped
templates make, and a file grown past it is shown in part, with a note. No Slurm call is
made: the paths come from the ledger's submission records. A sheet that cannot be read is
a note on it, never an error of the report that asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.workflows import contact as ct

if TYPE_CHECKING:
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.runtime.session.ledger import JobLedger

#: pages of contact.txt read per sheet (each at most MAX_READ_BYTES)
MAX_PAGES = 2


class SheetSources(Protocol):
    """Where a contact sheet's job and file are found."""

    @property
    def ledger(self) -> JobLedger: ...
    @property
    def transport(self) -> Transport: ...


def read_contact_sheets(
    parts: SheetSources, statuses: Mapping[str, JobStatus]
) -> list[ct.ContactSheet]:
    """The contact sheet of every polled job that makes one, in the poll's order; of
    several jobs writing the same sheet (a plan made again), the last one's."""
    found: dict[str, ct.ContactSheet] = {}
    for job_id, status in statuses.items():
        record = parts.ledger.get(job_id)
        source = ct.sheet_source(record.template, record.params) if record else None
        if source is None:
            continue
        kind, path = source
        if status.state is not JobState.COMPLETED:
            note = f"not made yet: job {job_id} is {status.state.value}"
            if status.state.is_terminal:
                note = f"not made: job {job_id} ended {status.state.value}"
            found[path] = ct.ContactSheet(job_id=job_id, kind=kind, path=path, note=note)
            continue
        found[path] = _read(parts, job_id, kind, path)
    return list(found.values())


def _read(parts: SheetSources, job_id: str, kind: str, path: str) -> ct.ContactSheet:
    from jobsmith.agent.runtime.workflows.pipelines import MAX_READ_BYTES, read_command

    text, offset, truncated = "", 0, True
    for _ in range(MAX_PAGES):
        res = parts.transport.run(read_command(path, offset), timeout=30)
        if res.returncode != 0:
            why = "it is not there" if res.returncode == 3 else res.stderr.strip()
            note = f"cannot read {path}: {why or 'unreadable'}"
            return ct.ContactSheet.model_validate(
                {"job_id": job_id, "kind": kind, "path": path, "note": note}
            )
        page = res.stdout
        if len(page.encode()) < MAX_READ_BYTES:
            text, truncated = text + page, False
            break
        whole = page[: page.rfind("\n") + 1]  # a cut line is read again with the next page
        text += whole
        offset += len(whole.encode())
    thumbs, rejected = ct.parse_sheet(text)
    return ct.ContactSheet.model_validate(
        {
            "job_id": job_id,
            "kind": kind,
            "path": path,
            "thumbs": thumbs,
            "note": ct.read_note(rejected, truncated),
        }
    )

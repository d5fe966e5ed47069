"""Reference documents: `jobsmith status --json` of captured sacct output, kept as files.

tests/test_status_reference.py renders each capture below the way `status --json` does
(parse_sacct_parsable, merge_status, show_status) and compares the bytes with the file
in tests/fixtures/status-json/, which was written by this module's main from the code
before the status parse was reworked (issue 26: "status builds no more than it prints"),
so the rework is held to print exactly what it printed. The writer stays out of the
tests (as in golden.py): a test never compares with what it just wrote.

    PYTHONPATH=<checkout>/src python tests/status_reference.py   # rewrite the references
"""

from __future__ import annotations

import contextlib
import gzip
import io
import sys
from pathlib import Path

from jobsmith.adapters.slurm.parsing.parse import parse_sacct_parsable
from jobsmith.adapters.slurm.parsing.status import merge_status
from jobsmith.agent.views.render import show_status

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REFERENCES = FIXTURES / "status-json"
#: every sacct -P capture: the 1,000-task array, and the small ones of many kinds of job
CAPTURES = (
    "lab-22.05/sacct-array-1000.txt.gz",
    "lab-22.05/sacct-accepted-array.txt",
    "lab-22.05/sacct-accepted-released.txt",
    "lab-22.05/sacct-accepted.txt",
    "lab-22.05/sacct-fields-pipe.txt",
    "lab-22.05/sacct-fields-running.txt",
    "lab-22.05/sacct-fields.txt",
    "lab-22.05/sacct-placeholder-pipe.txt",
    "lab-24.11/sacct-fields-pipe.txt",
    "lab-24.11/sacct-fields-running.txt",
    "lab-24.11/sacct-fields.txt",
    "slurm-22.05/sacct-parsable.txt",
    "slurm-24.11/sacct-parsable.txt",
)


def read_capture(name: str) -> str:
    """A capture's text (gzip'ed ones unpacked)."""
    data = (FIXTURES / name).read_bytes()
    return (gzip.decompress(data) if name.endswith(".gz") else data).decode()


def asked(text: str, delimiter: str) -> list[str]:
    """The ids a person would ask `status` about in a capture: each job and whole array,
    and the first task of each array by itself."""
    ids: dict[str, None] = {}
    for record in parse_sacct_parsable(text, delimiter):
        ids[record.array_job_id or record.job_id] = None
    for record in parse_sacct_parsable(text, delimiter):
        if record.array_task_id is not None:
            ids.setdefault(record.job_id, None)
            break
    return list(ids)


def status_json(text: str) -> str:
    """What `jobsmith status --json IDS` prints for the capture (accounting alone)."""
    delimiter = "\x1f" if "\x1f" in text.partition("\n")[0] else "|"
    statuses = merge_status(asked(text, delimiter), parse_sacct_parsable(text, delimiter), [])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show_status(statuses, as_json=True)
    return out.getvalue()


def reference_path(name: str) -> Path:
    """The reference document of a capture."""
    stem = name.removesuffix(".gz").removesuffix(".txt").replace("/", "--")
    return REFERENCES / f"{stem}.json.gz"


def main() -> int:
    REFERENCES.mkdir(parents=True, exist_ok=True)
    for name in CAPTURES:
        document = status_json(read_capture(name)).encode()
        reference_path(name).write_bytes(gzip.compress(document, mtime=0))
        print(reference_path(name).relative_to(FIXTURES.parent.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())

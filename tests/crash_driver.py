"""A multi-job scenario for the crash test: three submissions in one session, as a brain
would run them, with fixed step ids so a restarted driver continues where the log says.

Usage: python crash_driver.py SITE_FILE SESSION_ID WORKDIR
(fault injection comes from JOBSMITH_FAULT_* in the environment, see jobsmith.faults).
"""

from __future__ import annotations

import sys
from pathlib import Path

from jobsmith.agent.app import build_app
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.submission.steps import Submit

PLAN = [
    ("st-plan-a", "echo job-a"),
    ("st-plan-b", "echo job-b"),
    ("st-plan-c", "echo job-c"),
]


def main(site_file: str, session_id: str, workdir: str) -> None:
    app = build_app(site_file=Path(site_file))
    done = {e.step_id for e in app.store.read(session_id) if e.kind is EventKind.RESULT}
    for step_id, command in PLAN:
        if step_id in done:
            continue
        request = JobRequest(template="command", params={"command": command}, log_dir=Path(workdir))
        app.executor.run(session_id, Submit(id=step_id, job=request))


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""Adopting a job the user submitted by hand: bring it under a session, to watch and re-run.

The job keeps its Slurm id. What jobsmith needs later is read from Slurm while the
controller still holds the job: its batch script (for a re-run), its output paths, and
its resources from accounting. An adopted job is not a submission: it counts against no
budget. Slurm's answers arrive decoded with U+FFFD for bytes that are not UTF-8
(adapters/transport.py): fine for a name or a path shown to
a person, but a script so decoded is no longer the job's script, so it is not kept.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import Scheduler
from jobsmith.agent.runtime.session.events import EventKind
from jobsmith.agent.runtime.session.ledger import JobLedger, SubmissionRecord
from jobsmith.agent.runtime.session.session_log import SessionLog
from jobsmith.agent.runtime.session.store import SessionStore
from jobsmith.errors import InputError, JobNotFound, JobsmithError

_UNSAFE = re.compile(r"[^A-Za-z0-9_.,:/@%+\-\[\]]")


def adopt(
    store: SessionStore, ledger: JobLedger, scheduler: Scheduler, cluster: str, job_id: str
) -> tuple[str, SubmissionRecord]:
    """Create a session holding job_id; returns (session id, the record made for it)."""
    if "_" in job_id:
        raise InputError(f"adopt the whole array ({job_id.split('_')[0]}), not one task")
    if ledger.get(job_id) is not None:
        raise InputError(f"job {job_id} is already followed by jobsmith")
    status = scheduler.status([job_id], datetime.now() - timedelta(days=30))[job_id]
    rec = status.record or (status.tasks[0] if status.tasks else None)
    if rec is None:
        raise JobNotFound(f"job {job_id}: Slurm does not know it")
    options = _options(rec, scheduler, job_id, array=bool(status.tasks))
    script, script_note = _batch_script(scheduler, job_id)
    session = store.create({"title": f"adopt {job_id}", "origin": "adopt"})
    log = SessionLog(store, session)
    step = {"action": "adopt", "job_id": job_id}
    intent = {
        "step": step,
        "job_name": options.job_name,
        "options": options.model_dump(mode="json"),
        "script": script,
        "adopted": True,
    }
    if script_note:
        intent["script_note"] = script_note
    log.append(EventKind.INTENT, intent, f"adopt-{job_id}")
    log.append(
        EventKind.RESULT,
        {"outcome": "done", "action": "adopt", "adopted": True, "job_id": job_id},
        f"adopt-{job_id}",
    )
    record = SubmissionRecord(
        job_id=job_id,
        cluster=cluster,
        template="(adopted)",
        params={},
        options=options,
        script_sha256="",
        submitted_at=rec.submit_time or datetime.now(),
        session_id=session,
    )
    ledger.record(record)
    return session, record


def _options(rec: JobRecord, scheduler: Scheduler, job_id: str, array: bool) -> JobOptions:
    try:
        out, err = scheduler.output_paths(job_id)
    except JobNotFound:
        out = err = None
    return JobOptions(
        job_name=_UNSAFE.sub("_", rec.name) or "adopted",
        partition=rec.partition,
        account=rec.account,
        time_limit_s=rec.timelimit_s,
        mem_mb=rec.req_mem_bytes // (1 << 20) if rec.req_mem_bytes else None,
        cpus_per_task=rec.alloc_cpus or None,
        array=_array_spec(scheduler, job_id) if array else None,
        output=_pattern(out, job_id, array),
        error=_pattern(err, job_id, array),
    )


def _array_spec(scheduler: Scheduler, job_id: str) -> str | None:
    status = scheduler.status([job_id], datetime.now() - timedelta(days=30))[job_id]
    ids = sorted(t.array_task_id for t in status.tasks if t.array_task_id is not None)
    return ",".join(map(str, ids)) or None


def _pattern(path: str | None, job_id: str, array: bool) -> str | None:
    """Turn the expanded path of the job (or its first task) back into a %-pattern."""
    if not path or _UNSAFE.search(path):
        return None
    if array:
        return re.sub(rf"{job_id}_\d+", "%A_%a", path)
    return path.replace(job_id, "%j")


def _batch_script(scheduler: Scheduler, job_id: str) -> tuple[str | None, str | None]:
    """(the job's batch script, None), or (None, why it cannot be re-run from it)."""
    scripts = scheduler.capabilities().scripts
    if scripts is None:
        return None, "the controller gave no batch script: this scheduler hands none back"
    try:
        script = scripts.batch_script(job_id)
    except JobsmithError as err:
        return None, f"the controller gave no batch script: {err}"
    # U+FFFD stands for bytes that were not UTF-8 (a script that really holds one is
    # refused too: only a re-run is lost, never the watching)
    if "\ufffd" in script:
        return None, (
            "its batch script is not UTF-8 text, so jobsmith cannot re-run it byte for "
            "byte; re-run it by hand"
        )
    return script or None, None

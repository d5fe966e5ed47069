"""How each command shows its result: `--json` (stable shapes) or text for a person."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jobsmith.agent.views.output import print_document, print_json, print_table

if TYPE_CHECKING:
    from jobsmith.adapters.records import JobRecord
    from jobsmith.adapters.scheduler import JobStatus, TestOnlyResult
    from jobsmith.agent.runtime.documents import (
        ControlResult,
        JobStatusDocument,
        LogView,
        PipelineStatusDocument,
        PlanStatusDocument,
        StagingResult,
    )
    from jobsmith.agent.runtime.glancefacts import GlanceFacts
    from jobsmith.agent.runtime.session.events import Event, SessionInfo
    from jobsmith.agent.runtime.session.readmodel import TokenTotals
    from jobsmith.agent.runtime.session.store import PruneReport
    from jobsmith.agent.runtime.sitefile import SiteCheckReport, SiteInitResult, SiteShow
    from jobsmith.agent.runtime.submission.advising.advice import SubmitAdvice
    from jobsmith.agent.runtime.submission.approval.approvals import PendingApproval
    from jobsmith.agent.runtime.submission.judging.judge import CheckedJob, Judgement
    from jobsmith.agent.runtime.submission.judging.policy import Ruling
    from jobsmith.agent.runtime.submission.steps import StepResult
    from jobsmith.agent.runtime.workflows.feeding.split import Part
    from jobsmith.agent.runtime.workflows.pipelinerun import Launched
    from jobsmith.agent.runtime.workflows.progress import TaskProgress, WorkProgress
    from jobsmith.job_templates import Template

#: arrays with more tasks than this show only their unfinished and failed tasks as text
_MAX_TASK_ROWS = 20


def show_status(
    statuses: Mapping[str, JobStatus],
    as_json: bool,
    sessions: Mapping[str, str] | None = None,
    headlines: Mapping[str, str] | None = None,
    progress: Mapping[str, WorkProgress] | None = None,
    workloads: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Print `jobsmith status`: jobs grouped under the sessions that submitted them, a
    session with a headline (a pipeline's, in one line) under it; a render's or a
    transcode's progress in its row's note. --json: the jobs, and the fed workloads
    they belong to, if any (agent/runtime/workflows/feeding/progress.py)."""
    from jobsmith.agent.runtime.documents import StatusDocument

    document = StatusDocument.of(statuses, sessions, progress)
    if as_json and workloads:
        print_json({**document.full(), "workloads": list(workloads)})
        return
    if as_json:
        print_document(document)
        return
    by_session: dict[str, list[JobStatusDocument]] = {}
    for job in document.jobs:
        by_session.setdefault(job.session_id or "", []).append(job)
    if len(by_session) > 1 or "" not in by_session:
        for session, group in by_session.items():
            print(f"session {session or '(none)'}:")
            if session in (headlines or {}):
                print(f"  {(headlines or {})[session]}")
            _status_table(group)
    else:
        _status_table(list(document.jobs))
    for session, line in (headlines or {}).items():
        if session not in by_session:  # a fed workload none of whose parts has a job yet
            print(f"session {session}:")
            print(f"  {line}")


def show_glance(statuses: Mapping[str, JobStatus], facts: GlanceFacts) -> None:
    """Print `jobsmith status` without job ids: one line per session, what runs or waits
    and what failed first, at most 40 lines (agent/views/glance.py)."""
    from datetime import UTC, datetime

    from jobsmith.agent.views.glance import HEIGHT, build_glance, render_glance

    glance = build_glance(statuses, facts, datetime.now(UTC))
    for line in render_glance(glance, terminal_width(), HEIGHT):
        print(line)


def terminal_width() -> int:
    """The terminal's width if stdout is one (never less than 40), else 80: a pipe or a
    file has no width, and an 80-column screen is the one the glance promises to fit."""
    import shutil
    import sys

    from jobsmith.agent.views.glance import WIDTH

    if not sys.stdout.isatty():
        return WIDTH
    return max(shutil.get_terminal_size((WIDTH, 40)).columns, 40)


def _status_table(jobs: list[JobStatusDocument]) -> None:
    rows: list[list[object]] = []
    for job in jobs:
        if job.tasks:
            counts = ", ".join(f"{n} {s}" for s, n in sorted(job.task_counts.items()))
            if job.progress is not None:
                counts = f"{job.progress.done}/{job.progress.total} {job.progress.unit}; {counts}"
            rows.append([job.job_id, _name(job.tasks[0]), job.state, "", "", "", counts])
            said = {t.task_id: t for t in job.progress.running} if job.progress else {}
            rows += [
                _with_progress(_record_row(t, None), said.get(t.job_id))
                for t in _tasks_to_show(job.tasks)
            ]
        elif job.record is not None:
            rows.append(_record_row(job.record, job))
        else:
            rows.append([job.job_id, "", job.state, "", "", "", "not in Slurm yet"])
    if not rows:
        print_table(None, ["no jobs"], [])
        return
    print_table(None, ["JOBID", "NAME", "STATE", "EXIT", "ELAPSED", "MAXRSS", "NOTE"], rows)


def _with_progress(row: list[object], said: TaskProgress | None) -> list[object]:
    """A running task's row with what its output says in the note."""
    if said is None:
        return row
    if said.frames is not None:
        text = f"{said.frames_done}/{said.frames} frames"
        if said.frame is not None:
            samples = f" sample {said.samples_done}/{said.samples}" if said.samples else ""
            text += f", frame {said.frame}{samples}"
    elif said.percent is not None:
        text = said.line()
    else:
        text = ""
    if said.note:
        text = f"{text} ({said.note})" if text else said.note
    row[-1] = f"{row[-1]} {text}".strip()
    return row


def _tasks_to_show(tasks: tuple[JobRecord, ...]) -> list[JobRecord]:
    if len(tasks) <= _MAX_TASK_ROWS:
        return list(tasks)
    return [t for t in tasks if t.state.value != "COMPLETED"][:_MAX_TASK_ROWS]


def _record_row(rec: JobRecord, st: JobStatusDocument | None) -> list[object]:
    from jobsmith.agent.runtime.requeues import record_phrase

    exit_text = "" if rec.exit_code is None else f"{rec.exit_code}:{rec.signal or 0}"
    note = rec.reason or ""
    if rec.cancelled_by:
        note = f"cancelled by uid {rec.cancelled_by}"
    requeued = record_phrase(rec)
    if requeued:
        note = f"{requeued}; {note}" if note else requeued
    if st is not None and st.estimated_start and rec.state.value == "PENDING":
        note = f"{note} (est. start {st.estimated_start:%Y-%m-%d %H:%M})".strip()
    return [
        rec.job_id,
        _name(rec),
        rec.state.value,
        exit_text,
        _duration(rec.elapsed_s),
        _mem(rec.max_rss_bytes),
        note,
    ]


def _name(rec: JobRecord) -> str:
    return rec.name.split(".js-")[0]


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return ""
    hours, rem = divmod(seconds, 3600)
    return f"{hours}:{rem // 60:02d}:{rem % 60:02d}"


def _mem(value: int | None) -> str:
    if value is None:
        return ""
    for unit in ("B", "K", "M", "G"):
        if value < 1024:
            return f"{value:.0f}{unit}"
        value //= 1024
    return f"{value}T"


def show_logs(view: LogView, as_json: bool) -> None:
    """Print `jobsmith logs`."""
    if as_json:
        print_json(view)
        return
    import sys

    if view.truncated:
        sys.stderr.write(f"==> {view.path} (last {len(view.lines)} lines) <==\n")
    for line in view.lines:
        sys.stdout.write(line + "\n")


def show_waited(
    statuses: Mapping[str, JobStatus],
    progress: Mapping[str, WorkProgress],
    got: StagingResult | None,
    as_json: bool,
) -> None:
    """Print `jobsmith wait`: the jobs as they ended, then (--get) what was copied back;
    --json: one document, the outputs under `got`."""
    from jobsmith.agent.runtime.documents import StatusDocument

    if got is not None and as_json:
        print_json({**StatusDocument.of(statuses, None, progress).full(), "got": got})
        return
    show_status(statuses, as_json, progress=progress)
    if got is not None:
        show_staged(got, as_json=False)


def show_staged(result: StagingResult, as_json: bool) -> None:
    """Print `jobsmith put` / `get`: a line per file, how much crossed the link."""
    if as_json:
        print_json(result)
        return
    for f in result.files:
        if f.transferred == 0:
            how = "already there, not copied again"
        elif f.transferred < f.size:
            how = f"{_mib(f.transferred)} sent of {_mib(f.size)} (resumed or delta)"
        else:
            how = f"{_mib(f.size)} copied"
        print(f"{f.source} -> {f.target}: {how} ({f.via}, {result.where})")
    for line in result.not_got:
        print(f"not got: {line}")


def copy_progress(action: str, quiet: bool) -> Callable[[str], Callable[[int, int], None]]:
    """A follower for put/get: for a file of 16 MiB or more, a line on stderr every 5 s
    and at its end (quiet: none, e.g. with --json)."""
    import sys
    import time

    def follow(name: str) -> Callable[[int, int], None]:
        last, ended = [time.monotonic()], [False]

        def tell(done: int, total: int) -> None:
            now = time.monotonic()
            if quiet or ended[0] or total < 16 << 20 or (now - last[0] < 5 and done < total):
                return
            last[0], ended[0] = now, done >= total
            sys.stderr.write(
                f"{action} {name}: {_mib(done)} of {_mib(total)} ({done * 100 // total}%)\n"
            )

        return tell

    return follow


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def show_control(result: ControlResult, as_json: bool) -> None:
    """Print cancel / hold / release."""
    if as_json:  # a workload's keys only where one was named: hold's document unchanged
        print_json(result.model_dump(mode="json", exclude_none=True))
        return
    done = {"cancel": "cancelled", "hold": "held", "release": "released"}[result.action]
    for step_id in result.workloads or ():
        print(f"cancelled workload {step_id}: no part of it is submitted after this")
    for step_id in result.already_cancelled or ():
        print(f"workload {step_id} is already cancelled")
    if result.job_ids or not (result.workloads or result.already_cancelled):
        print(f"{done}: {' '.join(result.job_ids)}")
    for job_id in result.already_running:
        print(
            f"  {job_id} was already running: the hold does not stop it, only keeps it from "
            f"starting again if it is requeued (jobsmith cancel {job_id} stops it)"
        )


def show_site_check(report: SiteCheckReport, as_json: bool) -> None:
    """Print `jobsmith site check`."""
    if as_json:
        print_json(report)
        return
    print(f"site files: {', '.join(report.files)}")
    print(f"cluster {report.cluster}, Slurm {report.slurm_version}")
    if not report.mismatches:
        print("no mismatches: the site config agrees with the cluster")
    for mismatch in report.mismatches:
        print(str(mismatch))


def show_site(shown: SiteShow, as_json: bool) -> None:
    """Print `jobsmith site show` (and `--explain`: who set each value)."""
    if as_json:
        skip = {"explained"} if shown.explained is None else set()
        print_json(shown.model_dump(mode="json", exclude=skip))
        return
    print(f"site files: {', '.join(shown.files)}")
    if shown.centre:
        print(f"limits: {shown.centre} (the centre's; the other files may only tighten them)")
    if shown.explained is None:
        from jobsmith.site_config.yamlfile import dump_yaml

        print(dump_yaml(shown.config), end="")
        return
    for s in shown.explained:
        value = s.value
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # as the file says it: core_hours: 10, not 10.0
        value = value if isinstance(value, str) else json.dumps(value)
        where = f"{s.file}:{s.line}" if s.file and s.line else s.file or "jobsmith's default"
        print(f"{s.field}: {value}  ({where})")


def show_site_init(result: SiteInitResult, as_json: bool) -> None:
    """Print `jobsmith site init`."""
    if as_json:
        print_json(result)
    elif result.path is None:
        print(result.yaml, end="")
    else:
        print(f"wrote {result.path}; check it with: jobsmith site check")


def show_templates(templates: list[Template], as_json: bool) -> None:
    """Print `jobsmith templates list`."""
    if as_json:
        print_json(
            {
                "templates": [
                    {"name": t.name, "description": t.description, "file": str(t.spec_path)}
                    for t in templates
                ]
            }
        )
        return
    print_table(None, ["NAME", "DESCRIPTION"], [[t.name, t.description] for t in templates])


def show_template(template: Template, as_json: bool) -> None:
    """Print `jobsmith templates show NAME`."""
    if as_json:
        print_json(
            {
                "name": template.name,
                "file": str(template.spec_path),
                "spec": template.spec.model_dump(mode="json", exclude_none=True),
                "body": template.body,
            }
        )
        return
    print(f"{template.name}: {template.description}\n({template.spec_path})\n")
    rows = []
    for name, spec in template.spec.params.items():
        default = "(required)" if spec.required else spec.default
        extra = f" e.g. {spec.example}" if spec.required and spec.example is not None else ""
        choices = f" [{', '.join(map(str, spec.choices))}]" if spec.choices else ""
        rows.append([name, spec.type.value, default, spec.description + choices + extra])
    print_table("parameters", ["NAME", "TYPE", "DEFAULT", "DESCRIPTION"], rows)
    resources = template.spec.resources.model_dump(mode="json", exclude_none=True)
    if resources:
        print("\nresource defaults: " + ", ".join(f"{k}={v}" for k, v in resources.items()))
    print("\nbody (Jinja2; rendered into the batch script after the #SBATCH lines):")
    print(template.body.rstrip("\n"))


def checked_document(checked: CheckedJob) -> dict[str, object]:
    """The render document (`render --json`, `submit --dry-run --json`) with its verdict."""
    return checked.document().full()


def show_rendered(
    checked: CheckedJob,
    as_json: bool,
    advice: SubmitAdvice | None = None,
    feeding: tuple[Ruling, tuple[Part, ...]] | None = None,
) -> None:
    """Print `jobsmith render` / `submit --dry-run`: the exact script (and the advice).
    feeding: the site's limit it passes and the parts `submit` would feed it in instead
    (agent/runtime/workflows/feeding/), said on stderr, and as `"feeding"` in --json."""
    if as_json:
        document = checked_document(checked)
        if feeding is not None:
            document["feeding"] = _feeding_json(*feeding)
        print_json(document if advice is None else {**document, "advice": _advice_json(advice)})
        return
    print(checked.job.script, end="")
    show_advice(advice)
    if feeding is not None:
        from jobsmith.agent.views.output import note

        note(f"jobsmith: {_feeding_json(*feeding)['line']}")


def _feeding_json(over: Ruling, parts: tuple[Part, ...]) -> dict[str, object]:
    """A dry run's word on an array submit would feed in parts."""
    from jobsmith.agent.runtime.workflows.feeding.split import in_words

    tasks = sum(p.count for p in parts)
    line = (
        f"over what the site takes at once ({over.rule}), so submit would not refuse it: "
        f"{tasks} tasks {in_words(parts)}, each part submitted as the ones before end "
        "(by `jobsmith watch`, or `wait` on a part's job)"
    )
    return {
        "tasks": tasks,
        "parts": len(parts),
        "part_size": max(p.count for p in parts),
        "throttle": max((p.throttle for p in parts if p.throttle is not None), default=None),
        "over": {"rule": over.rule, "message": over.message},
        "line": line,
    }


def show_advice(advice: SubmitAdvice | None) -> None:
    """The advice at submission, a note per offer (nothing if there is none)."""
    if advice is None:
        return
    from jobsmith.agent.views.advice import advice_lines
    from jobsmith.agent.views.output import note

    for line in advice_lines(advice):
        note(f"jobsmith: {line}")


def _advice_json(advice: SubmitAdvice) -> object:
    return advice.model_dump(mode="json")


def show_test_only(
    checked: CheckedJob, result: TestOnlyResult, as_json: bool, advice: SubmitAdvice | None = None
) -> None:
    """Print `jobsmith submit --test-only` (exit 4 if Slurm would refuse the job)."""
    if as_json:
        document = {"job": checked_document(checked), "test_only": result.model_dump(mode="json")}
        print_json(document if advice is None else {**document, "advice": _advice_json(advice)})
    elif result.ok:
        when = (
            f"{result.estimated_start:%Y-%m-%d %H:%M}"
            if result.estimated_start
            else "unknown (Slurm's estimate is unreliable for GPU jobs on this version)"
        )
        print(f"Slurm would accept it: partition {result.partition}, estimated start {when}")
    else:
        print(f"Slurm would refuse it: {result.message}")
    if not as_json:
        show_advice(advice)
    if not result.ok:
        raise SystemExit(4)


def show_submitted(
    session_id: str, result: StepResult, as_json: bool, advice: SubmitAdvice | None = None
) -> None:
    """Print `jobsmith submit`: Slurm's job id first, so scripts can read it."""
    from jobsmith.agent.views.output import note

    summary = result.summary
    if as_json:
        extra = {} if advice is None else {"advice": _advice_json(advice)}
        print_json({"session_id": session_id, "step_id": result.step_id, **summary, **extra})
        return
    show_advice(advice)
    if summary.get("workload"):
        _show_workload(session_id, summary)
        return
    print(summary["job_id"])
    tasks = f", {summary['array_tasks']} array tasks" if summary.get("array_tasks") else ""
    note(
        f"submitted as Slurm job {summary['job_id']}{tasks}; logs: {summary['stdout']} "
        f"(session {session_id})"
    )
    for warning in summary.get("warnings") or []:
        note(f"sbatch said: {warning}")


def _show_workload(session_id: str, summary: Mapping[str, Any]) -> None:
    """`submit` of an array over the site's submit limits or MaxArraySize: fed in parts
    (agent/runtime/workflows/feeding/feeder.py). The first part's job id, if one fit;
    if none did, no line on stdout (a script's `id=$(…)` gets nothing, and exit 0: the
    workload is recorded and `watch` feeds it), and stderr says why."""
    from jobsmith.agent.views.output import note

    tasks, parts, fed = summary["workload_tasks"], summary["workload_parts"], summary["fed_parts"]
    where = f"workload {summary['workload']}, session {session_id}"
    if not summary.get("job_id"):  # nothing fitted: no job id, so no line on stdout
        note(
            f"jobsmith: nothing submitted yet: {tasks} tasks in {parts} parts (over what the "
            f"site takes at once: its submit limits, MaxArraySize), and none fits now "
            f"({summary.get('waiting') or 'your queue is full'}). The workload is recorded: "
            f"`jobsmith watch` submits its parts as room frees, and `jobsmith status`, `wait` "
            f"and `cancel` take its step id {summary['workload']} ({where})"
        )
        return
    print(summary["job_id"])
    note(
        f"over what the site takes at once (its submit limits, MaxArraySize): {tasks} tasks "
        f"in {parts} parts, {fed} submitted now; the rest "
        f"are submitted as parts end, by `jobsmith watch` or `jobsmith wait` on the workload "
        f"({summary['workload']}) or a part's job ({where})"
    )


def show_step_result(result: StepResult, as_json: bool) -> None:
    """Print the result of an approved step."""
    if as_json:
        print_json(result)
    elif result.summary.get("job_id"):
        print(result.summary["job_id"])
    else:
        print(f"{result.action}: {result.outcome.value}")


def show_pending(items: list[PendingApproval], as_json: bool) -> None:
    """Print `jobsmith pending`."""
    from jobsmith.agent.runtime.documents import PendingDocument

    if as_json:
        print_json(PendingDocument.of(items).full())
        return
    if not items:
        print("nothing waits for approval")
    for item in items:
        cost = item.cost or {}
        print(f"{item.step_id}  {item.action}  asked {item.asked_at:%Y-%m-%d %H:%M} UTC")
        print(f"  why: {item.reason}")
        if cost:
            print(
                f"  cost: {cost.get('tasks')} tasks, {cost.get('core_hours')} core-h, "
                f"{cost.get('gpu_hours')} GPU-h, {cost.get('node_hours')} node-h"
            )
        if item.script:
            print(f"  script (sha256 {item.script_sha256}):")
            print("    " + item.script.rstrip("\n").replace("\n", "\n    "))


def show_sessions(infos: list[SessionInfo], total_bytes: int, as_json: bool) -> None:
    """Print `jobsmith sessions list`."""
    if as_json:
        print_json({"sessions": infos, "size_bytes": total_bytes})
        return
    rows = [
        [i.id, i.title or "", i.last_seq + 1, f"{i.last_event_at:%Y-%m-%d %H:%M}"] for i in infos
    ]
    print_table(None, ["SESSION", "TITLE", "EVENTS", "LAST EVENT (UTC)"], rows)
    print(f"store size: {_mem(total_bytes)}")


def show_events(events: list[Event], as_json: bool, usage: TokenTotals | None = None) -> None:
    """Print `jobsmith sessions show`: the events, then what the session's model calls
    cost (from its fold), if it made any."""
    from jobsmith.agent.runtime.documents import SessionDocument
    from jobsmith.agent.runtime.session.readmodel import TokenTotals

    if as_json:
        print_json(SessionDocument(events=tuple(events), usage=usage or TokenTotals()).full())
        return
    for e in events:
        data = dict(e.data)
        detail = data.get("error") or data.get("reason") or data.get("job_id") or ""
        step = f" {e.step_id}" if e.step_id else ""
        outcome = f" {data['outcome']}" if "outcome" in data else ""
        print(f"{e.seq:>4} {e.at:%H:%M:%S} {e.kind.value}{step}{outcome} {detail}".rstrip())
    if usage is not None and usage.calls:
        print(usage.in_words())


def show_prune(report: PruneReport, as_json: bool) -> None:
    """Print `jobsmith sessions prune`."""
    if as_json:
        print_json(report)
        return
    verb = "would remove" if report.dry_run else "removed"
    print(f"{verb} {len(report.removed)} sessions, {_mem(report.bytes_freed)}")


def show_plan_check(judged: Judgement, as_json: bool) -> None:
    """Print `jobsmith plan check`: every script in order, then the plan's cost and verdict
    (exit 3 if the policy would refuse the plan, 8 if it would wait for a person)."""
    from jobsmith.agent.runtime.workflows.plans import approval_text

    doc = judged.document()
    if as_json:
        print_json(doc.full())
    else:
        scripts = {step.name: step.job.script for step in doc.steps}
        print(approval_text(judged.plan, scripts, doc.workload), end="")
        cost = doc.cost
        print(
            f"### plan {doc.plan}: {len(doc.steps)} jobs, {cost['tasks']} task(s), "
            f"{cost['core_hours']:g} core-hours, {cost['gpu_hours']:g} GPU-hours: "
            f"{doc.policy['verdict']}"
            + (f" ({doc.policy['message']})" if doc.policy["message"] else "")
        )
    if doc.policy["verdict"] == "refuse":
        raise SystemExit(3)
    if doc.policy["verdict"] == "approve":
        raise SystemExit(8)


def show_plan_run(session_id: str, result: StepResult, as_json: bool) -> None:
    """Print `jobsmith plan run`: one line per job, Slurm's id first."""
    from jobsmith.agent.views.output import note

    if as_json:
        print_json({"session_id": session_id, "step_id": result.step_id, **result.summary})
        return
    summary = result.summary
    for name, job_id in summary["jobs"].items():
        print(f"{job_id}\t{name}")
    if summary.get("workload"):  # a step over the site's limits: fed in parts
        then = ", ".join(summary.get("followers") or ())
        note(
            f"jobsmith: workload {summary['workload']}: {summary['workload_tasks']} tasks in "
            f"{summary['workload_parts']} parts (over what the site takes at once), fed as "
            f"room appears by `jobsmith watch` or `jobsmith wait`"
            + (f"; {then} submitted after its last part, waiting for all of them" if then else "")
        )
    note(f"plan {summary['plan']} submitted (jobsmith plan status {session_id})")


def show_plan_status(doc: PlanStatusDocument, as_json: bool) -> None:
    """Print `jobsmith plan status`: the steps as a tree, each with its job's state."""
    if as_json:
        print_json(doc.full())
        return
    print(f"plan {doc.plan} (session {doc.session_id}): {doc.outcome or 'submitting'}")
    for step in doc.steps:
        indent = "  " * step.depth + ("└ " if step.depth else "")
        waits = "; ".join(f"{k} {', '.join(v)}" for k, v in step.waits_for.items())
        state = step.state or "not submitted"
        if step.reason and step.state in ("PENDING", None):  # None: fed, or waiting for it
            state += f" ({step.reason})"
        tasks = ", ".join(f"{n} {s.lower()}" for s, n in sorted(step.task_counts.items()))
        line = f"{indent}{step.name}  {step.job_id or '-'}  {state}"
        print(line + (f"  [{tasks}]" if tasks else "") + (f"  ({waits})" if waits else ""))


def show_pipeline_launched(launched: Launched, as_json: bool) -> None:
    """Print `pipeline run` / `pipeline resume`: the head job's id first."""
    from jobsmith.agent.views.output import note

    summary = launched.result.summary
    if as_json:
        print_json(
            {
                "session_id": launched.session_id,
                "step_id": launched.result.step_id,
                "notes": list(launched.notes),
                **summary,
            }
        )
        return
    for line in launched.notes:
        note(line)
    print(summary["job_id"])
    note(
        f"head job {summary['job_id']} submitted; follow it with "
        f"`jobsmith pipeline status {launched.session_id}`"
    )


def show_pipeline_status(doc: PipelineStatusDocument, as_json: bool) -> None:
    """Print `pipeline status`: the head job, tasks by status, failures, the engine's words."""
    if as_json:
        print_json(doc.full())
        return
    head = f"{doc.head_job_id or '-'} {doc.head_state or 'not submitted'}"
    print(f"{doc.engine} {doc.pipeline} (session {doc.session_id}, attempt {doc.attempt})")
    print(f"  head job {head}; launch dir {doc.launch_dir}")
    tasks = ", ".join(f"{n} {s.lower()}" for s, n in sorted(doc.task_counts.items()))
    print(f"  tasks: {tasks or 'none yet'} (at most {doc.max_concurrent_tasks} at once)")
    for task in doc.failed:
        code = f" exit {task.exit_code}" if task.exit_code is not None else ""
        print(f"  failed: {task.name} (Slurm job {task.native_id or '?'}{code})")
    for message in doc.messages[-5:]:
        print(f"  {message.kind.value.lower()}: {message.text}")
    if doc.next:
        print(f"  next: {doc.next}")


def show_pipeline_lines(docs: list[PipelineStatusDocument], as_json: bool) -> None:
    """Print `pipeline status --list`: one line per pipeline."""
    if as_json:
        print_json([d.full() for d in docs])
        return
    for doc in docs:
        print(doc.line())

"""A run report as one self-contained HTML page (`render_html` is pure: RunReport -> str).

The page needs no network: plotly.js is inlined once (include_plotlyjs=True on the first
figure), there are no links to fetch, and its Content-Security-Policy forbids loading
anything. Every fact is also in plain tables (`#task-rows`, one `<tr>` per task with its
figures in data attributes), so a person without JavaScript, and a test, can read it.

Nothing a job controls becomes markup or script: job names, stderr quotes and remedies
are HTML-escaped into the tables, and the figures carry only job ids, states and numbers
(plotly writes its data as JSON with `<` and `/` escaped, and would itself interpret
some tags in labels, so names are kept out of them). plotly is imported here, when a
page is rendered, never by the CLI's start-up.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobsmith.adapters.states import JobState
from jobsmith.agent.views import contact_html
from jobsmith.agent.views.report import ReportTask, RunReport

if TYPE_CHECKING:
    from plotly.graph_objects import Figure

_MIB = 1024**2
#: the running part of a task's bar, by how it ended
_COLOURS = {"ok": "#2ca02c", "failed": "#d62728", "running": "#1f77b4", "other": "#ff7f0e"}
_QUEUED = "#b0b0b0"
#: no network, ever: the page's own scripts, each allowed by its hash, and its styles
#: (plotly needs eval for its plot functions, inline styles for its figures and data:
#: images for its mode bar). No other inline script runs: were escaping ever to fail,
#: a script a job's text smuggled in would have no hash (issue 24, part 10)
_CSP = (
    "default-src 'none'; script-src {hashes} 'unsafe-eval'; "
    "style-src 'unsafe-inline'; img-src data: blob:; font-src data:"
)
_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script>", re.DOTALL | re.IGNORECASE)


def _csp(body: str) -> str:
    """The policy allowing exactly body's inline scripts, by their sha256 (base64, as CSP
    writes hashes: not the hex of agent/runtime/submission/hashing.py)."""
    hashes = sorted(
        {
            "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
            for s in _SCRIPT.findall(body)
        }
    )
    return _CSP.format(hashes=" ".join(hashes) or "'none'")


_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { background: #fde8e8; }
.figures > div { margin-bottom: 1em; }
.note { color: #555; }
pre { white-space: pre-wrap; margin: 0; }
"""


def write_report(report: RunReport, path: Path) -> Path:
    """Render report and write it to path, whole or not at all; the absolute path."""
    return contact_html.write_page(render_html(report), path, "report")


def render_html(report: RunReport) -> str:
    """The whole page."""
    title = f"jobsmith run report: {report.title or report.session_id}"
    body = [
        f"<h1>{_e(title)}</h1>",
        _overview(report),
        contact_html.contact_section(report.contact_sheets),
        _figures(report),
        _task_table(report.tasks),
        _failures(report),
        _reruns(report),
    ]
    text = "\n".join(body)
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{_csp(text)}\">"
        f"<title>{_e(title)}</title><style>{_STYLE}{contact_html.STYLE}</style></head>\n<body>\n"
        + text
        + "\n</body></html>\n"
    )


def _e(value: object) -> str:
    """Text (or an attribute value) as HTML that can only ever be text."""
    return "" if value is None else html.escape(str(value), quote=True)


def _overview(report: RunReport) -> str:
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(report.task_counts.items()))
    tasks = sum(t.tasks for t in report.tasks)
    rows = [
        ("session", report.session_id),
        ("opened", f"{report.created:%Y-%m-%d %H:%M:%S %Z}"),
        ("report made", f"{report.generated_at:%Y-%m-%d %H:%M:%S}"),
        ("jobs", f"{len(report.jobs)} ({tasks} tasks: {counts or 'none'})"),
        ("failures diagnosed", str(len(report.failures))),
        ("re-runs", str(len(report.reruns))),
        ("core-hours used", f"{report.core_hours:.4f}"),
        ("GPU-hours used", f"{report.gpu_hours:.4f}"),
    ]
    rows += [(f"job {j.job_id}", j.progress.line()) for j in report.jobs if j.progress]
    if report.usage.calls:
        rows.append(("model", report.usage.in_words()))
    cells = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    table = (
        f"<table id='overview' data-core-hours='{report.core_hours}' "
        f"data-gpu-hours='{report.gpu_hours}'>{cells}</table>"
    )
    notes = "".join(f"<p class='note'>{_e(n)}</p>" for n in report.notes)
    if not report.jobs:
        notes += "<p class='note' id='no-jobs'>This session submitted no jobs.</p>"
    return table + notes


# --- figures (plotly) ----------------------------------------------------------------------


def _figures(report: RunReport) -> str:
    """The timeline, memory and CPU figures; plotly.js inlined with the first."""
    if not report.tasks:
        return ""
    figures = [_timeline(report.tasks, report.generated_at)]
    used = [t for t in report.tasks if t.req_mem_bytes or t.max_rss_bytes is not None]
    if used:
        figures.append(_memory(used))
    measured = [t for t in report.tasks if t.cpu_efficiency is not None]
    if measured:
        figures.append(_cpu(measured))
    parts = [
        fig.to_html(
            full_html=False,
            include_plotlyjs=(n == 0),
            default_width="100%",
            config={"displaylogo": False},  # its link to plotly.com: nothing points outside
        )
        for n, fig in enumerate(figures)
    ]
    return "<h2>Timeline and use</h2><div class='figures'>" + "".join(parts) + "</div>"


def _outcome(state: str) -> str:
    known = JobState.known(state)
    if known is JobState.COMPLETED:
        return "ok"
    if known is not None and known.is_failure:
        return "failed"
    if known is not None and known.is_active:
        return "running"
    return "other"


def _span_ms(start: datetime, end: datetime, least: float = 0.0) -> float:
    return max(least, (end - start).total_seconds() * 1000)


def _least_run_ms(tasks: Sequence[ReportTask], now: datetime) -> float:
    """The narrowest a run is drawn: a task that failed in its first second still shows
    (a 200th of the timeline; its hover text and the table give the real times)."""
    starts = [s for t in tasks if (s := t.submit_time or t.start_time) is not None]
    ends = [t.end_time or now for t in tasks]
    return _span_ms(min(starts), max(ends)) / 200 if starts else 0.0


def _timeline(tasks: Sequence[ReportTask], now: datetime) -> Figure:
    """Each task's bar: queued (submit -> start), then running (start -> end, or now),
    coloured by how it ended."""
    import plotly.graph_objects as go

    fig = go.Figure()
    queued = [(t, t.submit_time, t.start_time or t.end_time or now) for t in tasks]
    fig.add_trace(_bars("queued", _QUEUED, queued))
    least = _least_run_ms(tasks, now)
    for outcome, colour in _COLOURS.items():
        ran = [
            (t, t.start_time, t.end_time or now)
            for t in tasks
            if t.start_time and _outcome(t.state) == outcome
        ]
        if ran:
            fig.add_trace(_bars(outcome, colour, ran, least))
    fig.update_layout(
        title="Timeline: queued, then running (submit, start, end per task)",
        barmode="overlay",
        height=min(4000, 160 + 24 * len(tasks)),
        xaxis={"type": "date", "title": "time"},
        yaxis={"type": "category", "autorange": "reversed", "title": "job or task"},
        legend={"orientation": "h"},
        margin={"l": 90, "r": 20, "t": 60, "b": 40},
    )
    return fig


def _bars(
    name: str,
    colour: str,
    spans: Iterable[tuple[ReportTask, datetime | None, datetime]],
    least: float = 0.0,
) -> Any:
    """One trace of horizontal bars on a date axis: base is where a bar starts, x its
    length in milliseconds (what plotly's own timeline does)."""
    import plotly.graph_objects as go

    items = [(t, start, end) for t, start, end in spans if start is not None]
    return go.Bar(
        name=name,
        orientation="h",
        y=[t.job_id for t, _, _ in items],
        base=[start.isoformat() for _, start, _ in items],
        x=[_span_ms(start, end, least) for _, start, end in items],
        marker_color=colour,
        hovertext=[f"{t.job_id} {t.state}: {name} {start:%H:%M:%S}" for t, start, _ in items],
        hoverinfo="text",
    )


def _memory(tasks: Sequence[ReportTask]) -> Figure:
    import plotly.graph_objects as go

    ids = [t.job_id for t in tasks]
    fig = go.Figure(
        [
            go.Bar(name="requested (MiB)", x=ids, y=[_mib(t.req_mem_bytes) for t in tasks]),
            go.Bar(name="MaxRSS (MiB)", x=ids, y=[_mib(t.max_rss_bytes) for t in tasks]),
        ]
    )
    fig.update_layout(
        title="Memory: peak used (MaxRSS) against requested",
        barmode="group",
        height=380,
        xaxis={"type": "category", "title": "job or task"},
        yaxis={"title": "MiB"},
    )
    return fig


def _cpu(tasks: Sequence[ReportTask]) -> Figure:
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Bar(
            name="CPU efficiency",
            x=[t.job_id for t in tasks],
            y=[round(100 * (t.cpu_efficiency or 0), 1) for t in tasks],
        )
    )
    fig.update_layout(
        title="CPU efficiency: TotalCPU / (elapsed x allocated CPUs)",
        height=340,
        xaxis={"type": "category", "title": "job or task"},
        yaxis={"title": "%", "range": [0, 105]},
    )
    return fig


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / _MIB, 1)


# --- tables ------------------------------------------------------------------------------------

_TASK_COLUMNS = (
    "job or task",
    "name",
    "state",
    "exit",
    "submitted",
    "started",
    "ended",
    "elapsed (s)",
    "CPUs",
    "GPUs",
    "CPU efficiency",
    "MaxRSS (MiB)",
    "requested (MiB)",
    "memory used",
    "core-hours",
    "GPU-hours",
    "diagnosis",
)


def _task_table(tasks: Sequence[ReportTask]) -> str:
    if not tasks:
        return ""
    head = "".join(f"<th>{_e(c)}</th>" for c in _TASK_COLUMNS)
    rows = "\n".join(_task_row(t) for t in tasks)
    return (
        "<h2>Jobs and tasks</h2>"
        f"<table id='task-rows'><thead><tr>{head}</tr></thead><tbody>\n{rows}\n</tbody></table>"
    )


def _task_row(t: ReportTask) -> str:
    data = {
        "job-id": t.job_id,
        "session-job": t.session_job,
        "state": t.state,
        "tasks": t.tasks,
        "submit-time": _iso(t.submit_time),
        "start-time": _iso(t.start_time),
        "end-time": _iso(t.end_time),
        "elapsed-s": t.elapsed_s,
        "alloc-cpus": t.alloc_cpus,
        "gpus": t.gpus,
        "total-cpu-s": t.total_cpu_s,
        "cpu-efficiency": t.cpu_efficiency,
        "max-rss-bytes": t.max_rss_bytes,
        "req-mem-bytes": t.req_mem_bytes,
        "core-hours": t.core_hours,
        "gpu-hours": t.gpu_hours,
    }
    attrs = " ".join(f"data-{k}='{_e('' if v is None else v)}'" for k, v in data.items())
    exit_text = "" if t.exit_code is None else f"{t.exit_code}:{t.signal or 0}"
    cells = [
        (t.job_id, ""),
        (t.name, ""),
        (t.state, ""),
        (exit_text, "num"),
        (_clock(t.submit_time), ""),
        (_clock(t.start_time), ""),
        (_clock(t.end_time), ""),
        (t.elapsed_s, "num"),
        (t.alloc_cpus, "num"),
        (t.gpus, "num"),
        (_percent(t.cpu_efficiency), "num"),
        (_mib(t.max_rss_bytes) if t.max_rss_bytes is not None else "unknown", "num"),
        (_mib(t.req_mem_bytes), "num"),
        (_percent(t.mem_efficiency), "num"),
        (f"{t.core_hours:.4f}", "num"),
        (f"{t.gpu_hours:.4f}", "num"),
        (t.verdict, ""),
    ]
    tds = "".join(f"<td class='{cls}'>{_e(v)}</td>" for v, cls in cells)
    css = " class='failed'" if _outcome(t.state) == "failed" else ""
    return f"<tr{css} {attrs}>{tds}</tr>"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _clock(when: datetime | None) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S}" if when else ""


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def _failures(report: RunReport) -> str:
    if not report.failures:
        return ""
    items = []
    for d in report.failures:
        evidence = "".join(f"<li><pre>{_e(line)}</pre></li>" for line in d.evidence)
        notes = "".join(f"<li class='note'>{_e(line)}</li>" for line in d.notes)
        items.append(
            f"<li data-job-id='{_e(d.job_id)}' data-verdict='{_e(d.verdict.value)}'>"
            f"<strong>{_e(d.job_id)}</strong>: {_e(d.verdict.value)}"
            f"<p>remedy: {_e(d.remedy)}</p><ul>{evidence}{notes}</ul></li>"
        )
    return "<h2>Failures</h2><ul id='failures'>" + "".join(items) + "</ul>"


def _reruns(report: RunReport) -> str:
    if not report.reruns and not report.decisions:
        return ""
    parts = ["<h2>Decisions and re-runs</h2>"]
    if report.decisions:
        rows = "".join(
            f"<tr data-job-id='{_e(d.job_id)}'><td>{_e(_clock(d.at))}</td><td>{_e(d.job_id)}"
            f"</td><td>{_e(d.brain)}</td><td>{_e(d.action)}</td><td>{_e(d.reason)}</td></tr>"
            for d in report.decisions
        )
        parts.append(
            "<table id='decisions'><tr><th>at</th><th>failed job</th><th>by</th>"
            f"<th>action</th><th>why</th></tr>{rows}</table>"
        )
    if report.reruns:
        rows = "".join(
            f"<tr data-rerun-of='{_e(r.rerun_of)}' data-job-id='{_e(r.job_id)}'>"
            f"<td>{_e(_clock(r.at))}</td><td>{_e(r.rerun_of)}</td><td>{_e(r.job_id)}</td>"
            f"<td>{_e(r.outcome)}</td><td>{_e(_changes(r.mem_mb, r.time_limit_s))}</td>"
            f"<td>{_e(r.reason)}</td></tr>"
            for r in report.reruns
        )
        parts.append(
            "<table id='reruns'><tr><th>at</th><th>re-run of</th><th>as job</th>"
            f"<th>outcome</th><th>changed</th><th>why</th></tr>{rows}</table>"
        )
    return "".join(parts)


def _changes(mem_mb: int | None, time_limit_s: int | None) -> str:
    said = []
    if mem_mb is not None:
        said.append(f"--mem {mem_mb}M")
    if time_limit_s is not None:
        said.append(f"--time {time_limit_s}s")
    return ", ".join(said) or "unchanged"

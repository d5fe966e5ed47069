"""`jobsmith report` at the terminal: the session in figures and where its page is.

With `--json`, the summary document (agent/views/report.py, ReportSummary) instead.
"""

from __future__ import annotations

from jobsmith.agent.views.contact_html import ContactPage
from jobsmith.agent.views.output import print_document
from jobsmith.agent.views.report import ReportSummary


def show_contact_page(page: ContactPage, as_json: bool) -> None:
    """`jobsmith frames`: each contact sheet in a line, and the page's path."""
    if as_json:
        print_document(page)
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(soft_wrap=True, highlight=False)
    title = f": {page.title}" if page.title else ""
    console.print(Text(f"session {page.session_id}{title}"))
    if not page.sheets:
        console.print(Text("  no contact sheet: a render or a transcode plan makes one"))
    for sheet in page.sheets:
        missing = f", {sheet.missing} missing" if sheet.missing else ""
        console.print(Text(f"  job {sheet.job_id}: {sheet.thumbnails} {sheet.kind}{missing}"))
        if sheet.note:
            console.print(Text(f"    note: {sheet.note}"))
    console.print(Text(f"contact sheet written to {page.path}"), style="bold")


def show_report(summary: ReportSummary, as_json: bool) -> None:
    """Print the summary: jobs, tasks by state, failures, core- and GPU-hours, the page."""
    if as_json:
        print_document(summary)
        return
    # rich, for the layout; Text keeps a title or remedy with [brackets] from being markup
    from rich.console import Console
    from rich.text import Text

    console = Console(soft_wrap=True, highlight=False)
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(summary.task_counts.items()))
    title = f": {summary.title}" if summary.title else ""
    console.print(Text(f"session {summary.session_id}{title}"))
    console.print(Text(f"  jobs: {summary.jobs}, tasks: {summary.tasks} ({counts or 'none'})"))
    console.print(Text(f"  failures: {len(summary.failures)}, re-runs: {summary.reruns}"))
    for failure in summary.failures:
        console.print(Text(f"    {failure.job_id}: {failure.verdict}: {failure.remedy}"))
    console.print(
        Text(f"  used: {summary.core_hours:.4f} core-hours, {summary.gpu_hours:.4f} GPU-hours")
    )
    for job_id, line in summary.progress.items():
        console.print(Text(f"  job {job_id}: {line}"))
    for step_id, line in summary.workloads.items():
        console.print(Text(f"  workload {step_id}: {line}"))
    if summary.thumbnails:
        console.print(Text(f"  contact sheet: {summary.thumbnails} thumbnails"))
    if summary.usage.calls:
        console.print(Text(f"  model: {summary.usage.in_words()}"))
    for line in summary.notes:
        console.print(Text(f"  note: {line}"))
    console.print(Text(f"report written to {summary.path}"), style="bold")

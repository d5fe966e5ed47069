"""Pipelines, the agent's side (agent/runtime/workflows/pipelines.py): the site's policy resolved
into
the engine's limits, the paths a request names kept inside the allowed roots, the head job
a submission of the pipeline_head template, and an engine's records read from where the
last read stopped. The engines themselves are tested in test_nextflow_* and
test_snakemake_*; the whole path on the lab cluster in test_pipeline_lab.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from scheduler_double import site_config

from jobsmith.adapters.snakemake import SnakemakeEngine
from jobsmith.adapters.workflow import EngineKind, LaunchRequest, RecordFile
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import PipelinePayload
from jobsmith.agent.runtime.submission.request.jobs import JobRequest
from jobsmith.agent.runtime.workflows import pipelines as pl
from jobsmith.errors import InputError, PolicyError
from jobsmith.job_templates.loader import TemplateLibrary, shipped_library
from jobsmith.job_templates.render import RenderedBody, render_body


def test_the_engine_queue_is_capped_by_the_concurrency_limit_less_the_head_job(
    tmp_path: Path,
) -> None:
    site = site_config(tmp_path, {"max_concurrent_jobs": 10})
    assert pl.size_queue(site, 4) == pl.Sizing(4, None)
    capped = pl.size_queue(site, 50)
    assert capped.max_tasks == 9
    assert capped.note is not None and "policy.max_concurrent_jobs is 10" in capped.note
    assert pl.size_queue(site, None).max_tasks == 9  # the default (100) is capped too
    assert pl.size_queue(site_config(tmp_path), None) == pl.Sizing(pl.DEFAULT_MAX_TASKS, None)
    with pytest.raises(PolicyError, match="needs 2 at least"):
        pl.size_queue(site_config(tmp_path, {"max_concurrent_jobs": 1}), None)


def test_the_engine_site_carries_the_sites_limits(tmp_path: Path) -> None:
    site = site_config(tmp_path, {"budgets": {"submissions_per_hour": 120}})
    resolved = pl.engine_site(site, partition=None, max_tasks=7, head_partition=None)
    default = next(n for n, p in site.partitions.items() if p.default)
    assert (resolved.partition, resolved.head_partition) == (default, default)
    assert resolved.account == "lab" and resolved.max_concurrent_tasks == 7
    assert resolved.submissions_per_hour == 120 and resolved.default_mem_mb == 1000
    assert {p.name for p in resolved.partitions} == set(site.partitions)
    with pytest.raises(InputError, match="partition 'nope' is not in the site config; valid: "):
        pl.engine_site(site, partition="nope", max_tasks=1, head_partition=None)


def _request(tmp_path: Path, **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {
        "engine": EngineKind.SNAKEMAKE,
        "pipeline": str(tmp_path / "Snakefile"),
        "launch_dir": str(tmp_path / "run"),
    }
    return LaunchRequest.model_validate({**fields, **kw})


def test_paths_outside_the_allowed_roots_are_refused_by_name(tmp_path: Path) -> None:
    site = site_config(tmp_path / "root")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "Snakefile").write_text("rule all:\n    input: []\n")  # it exists
    pl.check_paths(_request(tmp_path / "root"), site)
    with pytest.raises(PolicyError, match=r"/etc/passwd is outside the allowed roots"):
        pl.check_paths(_request(tmp_path / "root", params_file="/etc/passwd"), site)
    with pytest.raises(PolicyError, match=r"Snakefile is outside the allowed roots"):
        pl.check_paths(_request(tmp_path), site)
    # a Nextflow pipeline by name is not a path; one on disk is checked like any other
    nf = {"engine": EngineKind.NEXTFLOW, "pipeline": "nf-core/demo"}
    pl.check_paths(_request(tmp_path / "root", **nf), site)
    with pytest.raises(PolicyError, match="outside the allowed roots"):
        pl.check_paths(_request(tmp_path / "root", **{**nf, "pipeline": "/etc"}), site)


def test_the_head_job_is_the_pipeline_head_template_with_the_engines_files(
    tmp_path: Path,
) -> None:
    site = site_config(tmp_path, {"max_concurrent_jobs": 5})
    resolved = pl.engine_site(site, partition=None, max_tasks=4, head_partition=None)
    resources = JobRequest(template="pipeline_head", mem_mb=3000)
    job = pl.head_job(SnakemakeEngine(), resolved, _request(tmp_path), 2, resources)
    assert job.template == pl.HEAD_TEMPLATE and job.mem_mb == 3000
    assert job.partition == resolved.head_partition
    assert job.params["engine"] == "snakemake" and job.params["launch_dir"] == str(tmp_path / "run")
    assert "--rerun-incomplete" in job.params["engine_args"]  # type: ignore[operator]
    assert "4" in str(job.params["config_text"])  # the engine's jobs: the capped queue


def _run_with(session: str, request: LaunchRequest, tmp_path: Path) -> pl.PipelineRun:
    site = site_config(tmp_path)
    resolved = pl.engine_site(site, partition=None, max_tasks=3, head_partition=None)
    data = PipelinePayload(request=request, site=resolved, attempt=1, step_id="st-1")
    at = datetime(2026, 11, 30, tzinfo=UTC)
    opened = Event(session_id=session, seq=0, kind=EventKind.SESSION_OPENED, at=at)
    launched = Event(
        session_id=session,
        seq=1,
        kind=EventKind.PIPELINE,
        at=at,
        step_id="st-1",
        data=data.model_dump(mode="json"),
    )
    return pl.pipeline_of([opened, launched])


def test_a_record_is_read_line_by_line_from_the_last_offset(tmp_path: Path) -> None:
    """A line still being written waits for the next read; the offset counts bytes."""
    run = _run_with("s1", _request(tmp_path), tmp_path)
    record = RecordFile(path=".jobsmith/snakemake-1.log", kind="console")
    engine = SnakemakeEngine()
    first = pl.progress(engine, run, record, "Building DAG of jobs...\npartial", final=False)
    assert first.offset == len(b"Building DAG of jobs...\n")
    run.offsets[pl.record_key(1, record)] = first.offset
    second = pl.progress(engine, run, record, "partial line é\n", final=True)
    assert second.offset == first.offset + len("partial line é\n".encode())
    assert second.final
    assert pl.read_command("/x/y", 10)[-3:] == ["11", "/x/y", str(pl.MAX_READ_BYTES)]


def test_a_state_directory_linked_out_of_the_roots_is_refused(tmp_path: Path) -> None:
    """`.jobsmith` in the launch directory as a symlink out of the allowed roots: the head
    job would write its configuration and console there (issue 24, part 3)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "run").mkdir(parents=True)
    outside.mkdir()
    site = site_config(root)
    resolved = pl.engine_site(site, partition=None, max_tasks=4, head_partition=None)
    request = _request(root)
    job = pl.head_job(SnakemakeEngine(), resolved, request, 1, JobRequest(template="x"))

    def render() -> RenderedBody:
        template = TemplateLibrary([shipped_library()]).get(pl.HEAD_TEMPLATE)
        return render_body(template, job.params, allowed_roots=[root], base_dir=root)

    written = render().output_paths  # a plain directory: fine
    assert root / "run" / ".jobsmith" / "profile" / "config.yaml" in written
    (root / "run" / ".jobsmith").symlink_to(outside)
    with pytest.raises(PolicyError, match=r"run/.jobsmith/profile/config.yaml' \(resolves to"):
        render()

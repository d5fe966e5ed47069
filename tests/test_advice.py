"""Advice at submission (issue 14, parts 1 and 2), on the scheduler double.

The right-sizing rule on records built here (pure), and the Adviser's use of Slurm:
how many calls it makes, which partitions it asks about, when it offers one, and that a
Slurm error never stops a submission. The lab test (test_advice_lab.py) does the same
on real accounting and real `sbatch --test-only` estimates.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import TestOnlyResult
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import SubmissionRecord
from jobsmith.agent.runtime.submission.advising.advice import Adviser, SubmitAdvice
from jobsmith.agent.runtime.submission.advising.sizing import p95, propose, samples, usage_of
from jobsmith.agent.runtime.submission.request.jobs import AssembledJob, JobRequest, assemble
from jobsmith.agent.views.advice import advice_lines
from jobsmith.job_templates import TemplateLibrary, shipped_library
from tests.scheduler_double import SchedulerDouble, site_config

MIB = 2**20
NOW = datetime(2026, 12, 1, 12, 0)


def _run(i: int, rss_mb: float, elapsed: int, cpu_s: float = 0.0, cpus: int = 1) -> JobRecord:
    return JobRecord(
        job_id=str(i),
        job_id_raw=str(i),
        name="command.js-x",
        state=JobState.COMPLETED,
        max_rss_bytes=int(rss_mb * MIB),
        elapsed_s=elapsed,
        total_cpu_s=cpu_s,
        alloc_cpus=cpus,
    )


# --- the rule ----------------------------------------------------------------------------


def test_p95_is_an_observed_value_by_nearest_rank() -> None:
    assert p95([5.0]) == 5.0
    assert p95([float(i) for i in range(1, 21)]) == 19.0  # ceil(0.95*20) = 19th
    assert p95([float(i) for i in range(1, 101)]) == 95.0


def test_a_request_far_above_what_runs_used_gets_a_smaller_one() -> None:
    runs = [_run(i, 5900 + i, 1200, cpu_s=1200, cpus=1) for i in range(20)]
    usage = usage_of(runs, "same template", ["1"])
    proposal = propose(usage, {"mem_mb": 64 * 1024, "time_limit_s": 4 * 3600, "cpus_per_task": 1})
    assert proposal is not None
    changes = {c.field: c for c in proposal.changes}
    # 95th percentile 5918 MiB, x1.25 = 7398, rounded up to 256 MiB steps
    assert changes["mem_mb"].proposed == 7424
    assert changes["mem_mb"].option == "--mem 7424M"
    # 1200 s x1.5 = 1800 s, a 5-minute multiple already
    assert changes["time_limit_s"].proposed == 1800
    assert changes["time_limit_s"].option == "--time 00:30:00"
    assert "cpus_per_task" not in changes  # one CPU asked, nothing to shrink
    assert proposal.proposed() == {"mem_mb": 7424, "time_limit_s": 1800}


def test_a_request_close_to_use_gets_no_proposal() -> None:
    runs = [_run(i, 3000, 1500) for i in range(5)]
    usage = usage_of(runs, "same template", ["1"])
    # 3000 MiB -> 3840 proposed; 4096 is not 1.5x that
    assert propose(usage, {"mem_mb": 4096, "time_limit_s": 3000, "cpus_per_task": 1}) is None


def test_idle_cpus_are_proposed_away_only_from_runs_long_enough_to_tell() -> None:
    busy_one = [_run(i, 100, 600, cpu_s=600, cpus=8) for i in range(4)]
    usage = usage_of(busy_one, "same template", ["1"])
    assert usage.busy_cpus_p95 == 1.0
    assert usage.cpu_efficiency_median == 0.125
    proposal = propose(usage, {"mem_mb": 512, "time_limit_s": 900, "cpus_per_task": 8})
    assert proposal is not None
    assert {c.field: c.proposed for c in proposal.changes} == {"cpus_per_task": 2}
    too_short = [_run(i, 100, 5, cpu_s=5, cpus=8) for i in range(4)]
    assert usage_of(too_short, "same template", ["1"]).busy_cpus_p95 is None


def test_a_field_the_template_takes_from_a_parameter_is_never_proposed() -> None:
    usage = usage_of([_run(i, 100, 600, cpu_s=600, cpus=8) for i in range(4)], "x", ["1"])
    requested = {"mem_mb": 512, "time_limit_s": 900, "cpus_per_task": 8}
    assert propose(usage, requested, fixed={"cpus_per_task"}) is None


def test_only_completed_runs_are_samples() -> None:
    failed = _run(1, 60000, 10).model_copy(update={"state": JobState.OUT_OF_MEMORY})
    ok = _run(2, 100, 10)
    assert samples([[failed, ok]]) == [ok]


@settings(max_examples=200, deadline=None)
@given(
    peaks=st.lists(st.floats(0.1, 200_000), min_size=1, max_size=40),
    elapsed=st.lists(st.integers(0, 7 * 86400), min_size=1, max_size=40),
    mem=st.integers(1, 2_000_000),
    limit=st.integers(60, 30 * 86400),
)
def test_a_proposal_is_always_smaller_than_asked_and_above_what_runs_used(
    peaks: list[float], elapsed: list[int], mem: int, limit: int
) -> None:
    took = [elapsed[i % len(elapsed)] for i in range(len(peaks))]
    runs = [_run(i, p, t) for i, (p, t) in enumerate(zip(peaks, took, strict=True))]
    usage = usage_of(runs, "same template", ["1"])
    proposal = propose(usage, {"mem_mb": mem, "time_limit_s": limit, "cpus_per_task": 1})
    for change in proposal.changes if proposal else ():
        assert change.proposed < change.requested
        if change.field == "mem_mb":
            assert change.proposed >= p95(peaks)
            assert change.proposed % 256 == 0
        if change.field == "time_limit_s":
            assert change.proposed >= p95([float(t) for t in took])
            assert change.proposed % 300 == 0


# --- the adviser, on the double ---------------------------------------------------------


class PartitionDouble(SchedulerDouble):
    """The double, with a start estimate per partition (read from the script's header)."""

    def __init__(self, starts: dict[str, datetime | None], unavailable: str | None = None) -> None:
        super().__init__()
        self.starts = starts
        self.unavailable = unavailable

    def test_only(self, script: str) -> TestOnlyResult:
        self._call("test_only", script)
        self._reachable()
        match = re.search(r"^#SBATCH --partition=(\S+)", script, re.MULTILINE)
        part = match.group(1) if match else "debug"
        start = self.starts.get(part)
        reliable = "--gres" not in script
        return TestOnlyResult(
            ok=True,
            estimated_start=start,
            partition=part,
            estimate_reliable=reliable,
            message=f"Job 1 to start at {start} in partition {part}",
        )


def _adviser(
    tmp_path: Path, slurm: SchedulerDouble, records: list[SubmissionRecord], **policy: Any
) -> Adviser:
    site = site_config(tmp_path, {"advice": policy} if policy else None)
    library = TemplateLibrary([shipped_library()])

    def build(request: JobRequest) -> AssembledJob:
        template = library.get(request.template)
        return assemble(template, request, site, cwd=tmp_path, header=slurm.script_header)

    return Adviser(
        scheduler=slurm,
        site=site,
        assemble=build,
        records=lambda: records,
        fixed_fields=lambda t: set(library.get(t).spec.resources.references()),
        now=lambda: NOW,
    )


def _record(job_id: str, params: dict[str, object], template: str = "command") -> SubmissionRecord:
    return SubmissionRecord(
        job_id=job_id,
        cluster="doublelab",
        template=template,
        params=params,
        options=JobOptions(job_name=f"{template}.js-abc"),
        script_sha256="0" * 64,
        submitted_at=NOW - timedelta(hours=int(job_id)),
    )


REQUEST = JobRequest(template="command", params={"command": "run-it"}, mem_mb=2000)


def test_no_history_and_one_partition_costs_no_slurm_call(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW})
    advice = _adviser(tmp_path, slurm, [], earliest_start="off").advise(REQUEST)
    assert advice == SubmitAdvice(partition="debug")
    assert slurm.calls == []


def test_the_history_is_one_status_call_and_same_parameters_come_first(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW + timedelta(hours=2)})
    same = [_record(str(i), {"command": "run-it"}) for i in (1, 2, 3)]
    other = [_record(str(i), {"command": "other"}) for i in (4, 5, 6)]
    for rec in same:
        slurm.set_state(rec.job_id, JobState.COMPLETED, max_rss_bytes=300 * MIB, elapsed_s=60)
    for rec in other:
        slurm.set_state(rec.job_id, JobState.COMPLETED, max_rss_bytes=3000 * MIB, elapsed_s=60)
    advice = _adviser(tmp_path, slurm, same + other, earliest_start="off").advise(REQUEST)
    assert slurm.count("status") == 1
    assert advice.sizing is not None
    assert advice.sizing.usage.basis == "same template and parameters"
    assert advice.sizing.usage.runs == 3
    assert advice.sizing.proposed()["mem_mb"] == 768  # 300 + 256 = 556 -> 768
    # what it buys: the cost with the proposal, and Slurm asked for both starts
    assert advice.requested_cost is not None and advice.proposed_cost is not None
    assert advice.proposed_cost.core_hours < advice.requested_cost.core_hours
    assert slurm.count("test_only") == 2


def test_too_few_runs_of_the_same_parameters_fall_back_to_the_template(tmp_path: Path) -> None:
    slurm = PartitionDouble({})
    recs = [_record("1", {"command": "run-it"}), _record("2", {"a": 1}), _record("3", {"b": 2})]
    for rec in recs:
        slurm.set_state(rec.job_id, JobState.COMPLETED, max_rss_bytes=100 * MIB, elapsed_s=30)
    slurm.set_state("4", JobState.FAILED, max_rss_bytes=100 * MIB, elapsed_s=30)
    recs.append(_record("4", {"c": 3}))
    advice = _adviser(tmp_path, slurm, recs, earliest_start="off").advise(REQUEST)
    assert advice.sizing is not None
    assert advice.sizing.usage.basis == "same template"
    assert advice.sizing.usage.runs == 3  # the failed run is no sample


def test_the_earliest_partition_is_offered_only_if_clearly_earlier(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW + timedelta(hours=1), "small": NOW})
    advice = _adviser(tmp_path, slurm, [], right_size="off").advise(REQUEST)
    assert [e.partition for e in advice.partitions] == ["debug", "small"]  # no GPU partition
    assert advice.earliest == "small"
    slurm.starts["small"] = NOW + timedelta(hours=1) - timedelta(seconds=30)
    assert _adviser(tmp_path, slurm, [], right_size="off").advise(REQUEST).earliest is None


def test_a_partition_the_job_does_not_fit_is_not_asked(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW + timedelta(hours=1), "small": NOW})
    big = REQUEST.model_copy(update={"mem_mb": 3500})  # over small's 3000
    advice = _adviser(tmp_path, slurm, [], right_size="off").advise(big)
    assert advice.partitions == ()  # only debug fits: nothing to compare
    assert slurm.count("test_only") == 0


def test_a_gpu_job_is_offered_gpu_partitions_only_with_the_caveat(tmp_path: Path) -> None:
    slurm = PartitionDouble({"gpu": NOW})
    gpu = JobRequest(template="command", params={"command": "x"}, gpus=1, partition="gpu")
    advice = _adviser(tmp_path, slurm, [], right_size="off").advise(gpu)
    assert advice.partitions == ()  # only gpu has GPUs
    assert advice.earliest is None


def test_where_every_partition_has_gpus_a_cpu_job_is_offered_them_all(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW + timedelta(hours=1), "gpu": NOW})
    adviser = _adviser(tmp_path, slurm, [], right_size="off")
    adviser._site = adviser._site.model_copy(
        update={"partitions": {n: p.model_copy(update={"max_gpus_per_node": 2})
                               for n, p in adviser._site.partitions.items()}}
    )  # fmt: skip
    advice = adviser.advise(REQUEST)
    assert [e.partition for e in advice.partitions] == ["debug", "small", "gpu"]
    assert advice.earliest == "gpu"


def test_slurm_not_answering_gives_advice_that_says_so(tmp_path: Path) -> None:
    slurm = PartitionDouble({}, unavailable="slurmctld is not answering")
    advice = _adviser(tmp_path, slurm, [_record("1", {})]).advise(REQUEST)
    assert advice.unavailable is not None and "slurmctld" in advice.unavailable
    assert advice.sizing is None and advice.earliest is None
    assert advice_lines(advice) == ["no advice this time: slurmctld is not answering"]


def test_taking_the_advice_changes_only_what_was_taken(tmp_path: Path) -> None:
    slurm = PartitionDouble({"debug": NOW + timedelta(hours=1), "small": NOW})
    recs = [_record(str(i), {"command": "run-it"}) for i in (1, 2, 3)]
    for rec in recs:
        slurm.set_state(rec.job_id, JobState.COMPLETED, max_rss_bytes=100 * MIB, elapsed_s=30)
    advice = _adviser(tmp_path, slurm, recs).advise(REQUEST)
    taken = advice.taken(right_size=True, earliest=False)
    assert taken.applied == ("right_size",)
    request = taken.apply_to(REQUEST, right_size=True, earliest=False)
    assert request.mem_mb == 512 and request.partition is None
    both = advice.apply_to(REQUEST, right_size=True, earliest=True)
    assert both.partition == "small"
    lines = advice_lines(taken)
    assert lines[0].startswith("right-sized: 3 completed runs (same template and parameters)")
    assert "--mem 512M" in lines[0] and "instead of --mem 2000M" in lines[0]
    assert "--partition small (or --earliest)" in lines[1]
    assert lines[-1].startswith("(estimates are Slurm's")
    assert advice_lines(SubmitAdvice(partition="debug")) == []

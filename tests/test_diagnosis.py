"""Failure diagnosis (agent/diagnosis/table.py) on real failures.

Every test says where its failure comes from:
- `fixture_*`: the accounting and job logs captured from Slurm 22.05 and 24.11
  (tests/fixtures/slurm-*, see its README), each read with both the parsable and the JSON
  parser;
- `captured_*`: real text captured by hand where a test cannot make the failure itself:
  tests/fixtures/lab-22.05/job-output (it needed root: a full tmpfs, Lmod, an
  administrator's scancel; its README says how), and public bug reports for the CUDA
  message (there is no GPU here);
- `constructed_*`: a real record with its state changed, where the failure cannot be
  produced on this machine (a node failure would kill every job on the shared lab node);
- `lab_*`: failures produced now on the lab cluster as its unprivileged user, submitted
  with plain `sbatch --parsable` and read back with SlurmScheduler.status, as the
  executor will.
"""

from __future__ import annotations

import errno
import math
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import JobStatus
from jobsmith.adapters.slurm.parsing.parse import (
    parse_key_values,
    parse_sacct_json,
    parse_sacct_parsable,
    parse_squeue_json,
)
from jobsmith.adapters.slurm.scheduler import SlurmScheduler
from jobsmith.adapters.slurm.transport import LocalTransport
from jobsmith.adapters.states import JobState
from jobsmith.agent.diagnosis.table import Diagnosis, Verdict, diagnose

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CAPTURED = FIXTURES / "lab-22.05" / "job-output"
MIB = 1024**2

# --- the parser fixtures of both Slurm versions --------------------------------------------

SOURCES = [(v, fmt) for v in ("22.05", "24.11") for fmt in ("parsable", "json")]
source_params = pytest.mark.parametrize(("version", "fmt"), SOURCES, ids=lambda x: str(x))

#: what each fixture job did (tests/fixtures/README.md) and the verdict it must get
FIXTURE_VERDICTS = {
    "ok": Verdict.COMPLETED,
    "oom": Verdict.OUT_OF_MEMORY,
    "arr_0": Verdict.COMPLETED,
    "arr_1": Verdict.COMPLETED,
    "arr_2": Verdict.MISSING_INPUT,
    "arr_3": Verdict.COMPLETED,
    "timeout": Verdict.TIMEOUT,
    "nocmd": Verdict.COMMAND_NOT_FOUND,
    "cancelled": Verdict.CANCELLED,
    "dep": Verdict.DEPENDENCY_NEVER_SATISFIED,
}


def fixture_records(version: str, fmt: str) -> dict[str, JobRecord]:
    """The fixture's jobs by name ('arr_2' for task 2), from the parsable or JSON capture."""
    folder = FIXTURES / f"slurm-{version}"
    if fmt == "parsable":
        records = parse_sacct_parsable((folder / "sacct-parsable.txt").read_text())
    else:
        records = parse_sacct_json((folder / "sacct.json").read_text())
    return {_key(r): r for r in records}


def _key(rec: JobRecord) -> str:
    return rec.name if rec.array_task_id is None else f"{rec.name}_{rec.array_task_id}"


def fixture_log(version: str, rec: JobRecord) -> list[str]:
    """The job's output file as Slurm wrote it (stdout and stderr together), if captured."""
    found = sorted((FIXTURES / f"slurm-{version}" / "job-output").glob(f"*_{rec.job_id}.out"))
    return found[0].read_text().splitlines() if found else []


def fixture_reason(version: str, job_id: str) -> str | None:
    """The controller's pending reason, from the squeue --json captured with the jobs."""
    text = (FIXTURES / f"slurm-{version}" / "squeue-pending.json").read_text()
    return next((q.reason for q in parse_squeue_json(text) if q.job_id == job_id), None)


def fixture_diagnosis(version: str, fmt: str, name: str) -> Diagnosis:
    rec = fixture_records(version, fmt)[name]
    reason = fixture_reason(version, rec.job_id) if rec.state is JobState.PENDING else None
    return diagnose(rec, fixture_log(version, rec), reason=reason)


@source_params
def test_fixture_every_job_gets_its_verdict(version: str, fmt: str) -> None:
    got = {
        name: fixture_diagnosis(version, fmt, name).verdict
        for name in fixture_records(version, fmt)
    }
    assert got == FIXTURE_VERDICTS


@source_params
def test_fixture_memory_kill_without_cgroups(version: str, fmt: str) -> None:
    d = fixture_diagnosis(version, fmt, "oom")
    assert d.verdict is Verdict.OUT_OF_MEMORY
    assert "sacct State FAILED, ExitCode 0:9" in d.evidence
    # sacct -P names the uid, sacct --json the user
    assert any(e.startswith("batch step CANCELLED by ") and e.endswith(" 0:9") for e in d.evidence)
    assert any("exceeded memory limit (" in e and "being killed" in e for e in d.evidence)
    # 2 x 50M = 100M against 1.5 x ~410M = ~620M: the MaxRSS side wins, rounded up to 700M
    assert d.retryable and d.suggested == {"mem_mb": 700}
    assert "--mem 700M" in d.remedy and "lower bound at a sampled kill" in d.remedy
    assert d.efficiency.mem_efficiency is not None and d.efficiency.mem_efficiency > 8


@source_params
def test_fixture_memory_kill_read_from_accounting_alone(version: str, fmt: str) -> None:
    """The log may be gone: FAILED by SIGKILL with its batch step cancelled by root is
    slurmstepd's memory kill (an administrator's scancel reads CANCELLED on the job)."""
    rec = fixture_records(version, fmt)["oom"]
    d = diagnose(rec, [])
    assert d.verdict is Verdict.OUT_OF_MEMORY and d.suggested == {"mem_mb": 700}
    assert not any("exceeded memory limit" in e for e in d.evidence)


#: the batch step of a job killed at its time limit, as sacct records it (a race: see
#: test_lab_timeout)
BATCH_STEP_AT_TIMEOUT = (
    "batch step CANCELLED, ExitCode 0:15",
    "batch step FAILED, ExitCode 15:0",
    "batch step TIMEOUT, ExitCode 0:0",
)


@source_params
def test_fixture_timeout(version: str, fmt: str) -> None:
    d = fixture_diagnosis(version, fmt, "timeout")
    assert d.verdict is Verdict.TIMEOUT
    assert d.evidence[0].startswith("sacct State TIMEOUT")
    # how the batch step's end is recorded is a race between slurmstepd's SIGTERM to the
    # script and to its child: killed by the signal (0:15), or its status 15 (seen in CI)
    assert {"batch step CANCELLED, ExitCode 0:15", "batch step FAILED, ExitCode 15:0"} & set(
        d.evidence
    ), d.evidence
    assert any("DUE TO TIME LIMIT" in e for e in d.evidence)
    assert d.retryable and d.suggested == {"time_limit_s": 120}
    assert "--time 00:02:00" in d.remedy


@source_params
def test_fixture_command_not_found(version: str, fmt: str) -> None:
    # the 22.05 JSON hides exit code 127 (it reports every normal exit as 0): the shell's
    # line alone decides there
    d = fixture_diagnosis(version, fmt, "nocmd")
    assert d.verdict is Verdict.COMMAND_NOT_FOUND and not d.retryable
    assert any(e.endswith("4: bwa_not_installed: not found") for e in d.evidence)
    assert "`bwa_not_installed` is not on the job's PATH" in d.remedy and d.suggested == {}


@source_params
def test_fixture_missing_input_in_one_array_task(version: str, fmt: str) -> None:
    d = fixture_diagnosis(version, fmt, "arr_2")
    assert d.job_id == {"22.05": "333_2", "24.11": "6_2"}[version]
    assert d.verdict is Verdict.MISSING_INPUT and not d.retryable
    assert "cat: /data/in_2.mov: No such file or directory" in d.evidence
    assert d.remedy.startswith("`/data/in_2.mov` does not exist")


@source_params
def test_fixture_cancelled_by_root_before_it_started(version: str, fmt: str) -> None:
    d = fixture_diagnosis(version, fmt, "cancelled")
    assert d.verdict is Verdict.CANCELLED and not d.retryable
    assert d.evidence[0].startswith(
        "sacct State CANCELLED by " + ("0" if fmt == "parsable" else "root")
    )
    assert "by root" in d.remedy and "before it started" in d.remedy
    assert "administrators" in d.remedy


@source_params
def test_fixture_dependency_never_satisfied_needs_the_controllers_reason(
    version: str, fmt: str
) -> None:
    rec = fixture_records(version, fmt)["dep"]
    reason = fixture_reason(version, rec.job_id)
    assert reason == "DependencyNeverSatisfied"
    d = diagnose(rec, [], reason=reason)
    assert d.verdict is Verdict.DEPENDENCY_NEVER_SATISFIED and not d.retryable
    assert "reason DependencyNeverSatisfied" in d.evidence
    assert f"scancel {rec.job_id}" in d.remedy
    # accounting alone says 'None' (or 'Dependency'): the job is merely not finished
    assert diagnose(rec, []).verdict is Verdict.UNKNOWN


@source_params
def test_fixture_completed(version: str, fmt: str) -> None:
    d = fixture_diagnosis(version, fmt, "ok")
    assert d.verdict is Verdict.COMPLETED and not d.retryable and d.suggested == {}
    assert d.evidence == ("sacct State COMPLETED, ExitCode 0:0",)
    assert d.remedy.startswith("nothing to fix")


# --- growth and caps, on the real 22.05 memory kill and timeout ---------------------------


def oom_record() -> JobRecord:
    return fixture_records("22.05", "parsable")["oom"]  # MaxRSS 424416K, ReqMem 50M


def test_memory_growth_is_capped_by_the_partition() -> None:
    lines = fixture_log("22.05", oom_record())
    d = diagnose(oom_record(), lines, partition_max_mem_mb=64000)
    assert d.suggested == {"mem_mb": 700}
    capped = diagnose(oom_record(), lines, partition_max_mem_mb=500)
    assert capped.retryable and capped.suggested == {"mem_mb": 500}
    assert "--mem 500M, the partition's maximum" in capped.remedy
    assert "would be 700M" in capped.remedy


def test_memory_at_the_partitions_cap_is_not_retryable() -> None:
    # the job already used 414M: a partition allowing 400M cannot ever fit it
    d = diagnose(oom_record(), fixture_log("22.05", oom_record()), partition_max_mem_mb=400)
    assert d.verdict is Verdict.OUT_OF_MEMORY
    assert not d.retryable and d.suggested == {}
    assert "partition's maximum of 400M" in d.remedy


def test_memory_growth_doubles_the_request_when_that_is_larger() -> None:
    # asked for 1010M and was killed at ~414M sampled: 2 x 1010M = 2020M, rounded up to 2100M
    rec = oom_record().model_copy(update={"req_mem_bytes": 1010 * MIB})
    d = diagnose(rec, [])
    assert d.suggested == {"mem_mb": 2100}
    assert "max(2 x 1010M requested, 1.5 x MaxRSS 414M)" in d.remedy


def test_time_growth_is_capped_by_the_partition() -> None:
    rec = fixture_records("22.05", "parsable")["timeout"]
    lines = fixture_log("22.05", rec)
    capped = diagnose(rec, lines, partition_max_time_s=90)
    assert capped.retryable and capped.suggested == {"time_limit_s": 90}
    assert "--time 00:01:30, the partition's maximum" in capped.remedy
    at_cap = diagnose(rec, lines, partition_max_time_s=60)
    assert not at_cap.retryable and at_cap.suggested == {}
    assert "already had the partition's maximum time (00:01:00)" in at_cap.remedy


# --- real text captured by hand -----------------------------------------------------------


def captured(job_id: str) -> tuple[JobRecord, list[str]]:
    """Accounting and output file of a job in tests/fixtures/lab-22.05/job-output."""
    records = parse_sacct_parsable((CAPTURED / "sacct-parsable.txt").read_text())
    rec = next(r for r in records if r.job_id == job_id)
    (log,) = CAPTURED.glob(f"*_{job_id}.out")
    return rec, log.read_text().splitlines()


def test_captured_unknown_lmod_module_wins_over_the_command_not_found_it_causes() -> None:
    rec, lines = captured("2507")  # Lmod 8.6.19: `module load fastqc/0.12.1`, then fastqc
    assert rec.exit_code == 127 and any("fastqc: command not found" in ln for ln in lines)
    d = diagnose(rec, lines)
    assert d.verdict is Verdict.MODULE_NOT_LOADED and not d.retryable
    assert any("The following module(s) are unknown" in e for e in d.evidence)
    assert "module fastqc/0.12.1" in d.evidence
    assert "no module fastqc/0.12.1" in d.remedy and "module spider" in d.remedy


def test_captured_no_space_left_on_a_full_tmpfs() -> None:
    rec, lines = captured("2508")  # dd into a 1 MB tmpfs
    d = diagnose(rec, lines)
    assert d.verdict is Verdict.DISK_FULL and not d.retryable
    assert (
        "dd: error writing '/mnt/jobsmith-full/results.bin': No space left on device" in d.evidence
    )
    assert "writing /mnt/jobsmith-full/results.bin" in d.remedy


def test_disk_quota_exceeded_is_a_full_disk_too() -> None:
    # The quota case cannot be produced here (no quota tools): the 2508 dd line with the
    # C library's own text for EDQUOT, os.strerror(errno.EDQUOT), in place of ENOSPC's.
    rec, lines = captured("2508")
    quota = [ln.replace(os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT)) for ln in lines]
    d = diagnose(rec, quota)
    assert d.verdict is Verdict.DISK_FULL
    assert any(e.endswith(": Disk quota exceeded") for e in d.evidence)


def test_captured_cancel_by_an_administrator() -> None:
    rec, lines = captured("2509")  # alice's job, scancel'ed by root while it ran
    d = diagnose(rec, lines)
    assert d.verdict is Verdict.CANCELLED and not d.retryable
    assert "sacct State CANCELLED by 0, ExitCode 0:0" in d.evidence
    assert "slurmstepd-vm: error: *** JOB 2509 ON vm CANCELLED AT 2026-11-29T09:51:37 ***" in (
        d.evidence
    )
    assert "cancelled by root" in d.remedy and "administrators" in d.remedy
    assert "before it started" not in d.remedy


#: CUDA out-of-memory messages as PyTorch printed them in real runs, quoted from public bug
#: reports (no GPU here). The accounting is the real 22.05 array task that exited 1.
CUDA_REPORTS = {
    # https://github.com/One-2-3-45/One-2-3-45/issues/25 (torch 2.x message)
    "torch.cuda.OutOfMemoryError": "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 1.69 GiB (GPU 0; 14.56 GiB total capacity; 649.97 MiB already allocated; "
    "1.31 GiB free; 1.01 GiB reserved in total by PyTorch) If reserved memory is >> "
    "allocated memory try setting max_split_size_mb to avoid fragmentation.  See "
    "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
    # https://github.com/open-mmlab/mmsegmentation/issues/944 (torch 1.x message)
    "RuntimeError": "RuntimeError: CUDA out of memory. Tried to allocate 1006.00 MiB (GPU 0; "
    "10.91 GiB total capacity; 9.18 GiB already allocated; 569.81 MiB free; 9.49 GiB "
    "reserved in total by PyTorch)",
}


@pytest.mark.parametrize("kind", sorted(CUDA_REPORTS))
def test_captured_cuda_out_of_memory(kind: str) -> None:
    rec = fixture_records("22.05", "parsable")["arr_2"]
    d = diagnose(rec, ["epoch 1/10", CUDA_REPORTS[kind]])
    assert d.verdict is Verdict.CUDA_OOM and not d.retryable and d.suggested == {}
    assert any(e.startswith(kind + ": CUDA out of memory") for e in d.evidence)
    assert all(len(e) <= 200 for e in d.evidence)  # long lines are cut for quoting
    assert "GPU ran out of memory" in d.remedy and "--mem will not help" in d.remedy


# --- constructed: what this machine cannot produce ----------------------------------------

#: slurmstepd's own format string for a node failure, from `strings /usr/sbin/slurmstepd`
#: of Slurm 22.05.8: '*** %s ON %s CANCELLED AT %s DUE TO NODE FAILURE, SEE SLURMCTLD LOG
#: FOR DETAILS ***'
NODE_FAILURE_LINE = (
    "slurmstepd-vm: error: *** JOB 334 ON vm CANCELLED AT 2026-11-29T08:21:02 DUE TO NODE "
    "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***"
)


def test_constructed_cgroup_out_of_memory_state() -> None:
    # the lab enforces memory without cgroups (FAILED 0:9, above); sites with cgroup
    # enforcement give the state OUT_OF_MEMORY: the real 24.11 record with that state
    rec = fixture_records("24.11", "json")["oom"]
    d = diagnose(rec.model_copy(update={"state": JobState.OUT_OF_MEMORY, "signal": 0}), [])
    assert d.verdict is Verdict.OUT_OF_MEMORY and d.retryable
    assert d.evidence[0].startswith("sacct State OUT_OF_MEMORY")
    assert d.suggested == {"mem_mb": 700}  # 1.5 x MaxRSS 410M, rounded up


def test_constructed_node_failure() -> None:
    rec = fixture_records("22.05", "parsable")["timeout"]
    d = diagnose(rec.model_copy(update={"state": JobState.NODE_FAIL}), [NODE_FAILURE_LINE])
    assert d.verdict is Verdict.NODE_FAILURE and d.retryable and d.suggested == {}
    assert d.evidence[0].startswith("sacct State NODE_FAIL") and "nodes vm" in d.evidence
    assert "requeues" in d.remedy and "--exclude=vm" in d.remedy


def test_constructed_node_failure_then_requeued_needs_no_resubmission() -> None:
    rec = fixture_records("22.05", "parsable")["dep"]  # a real PENDING record
    d = diagnose(rec, [NODE_FAILURE_LINE], reason="BeginTime")
    assert d.verdict is Verdict.NODE_FAILURE and not d.retryable
    assert NODE_FAILURE_LINE in d.evidence and "requeued" in d.remedy


def test_constructed_preempted_and_not_requeued() -> None:
    # PreemptMode=CANCEL ends the job PREEMPTED for good (the lab requeues instead: see
    # test_lab_preempted_job_is_requeued for that real case)
    rec = fixture_records("24.11", "json")["timeout"]
    d = diagnose(rec.model_copy(update={"state": JobState.PREEMPTED}), [])
    assert d.verdict is Verdict.PREEMPTED and d.retryable and d.suggested == {}
    assert "--requeue" in d.remedy


# --- real failures on the lab cluster -----------------------------------------------------

lab = pytest.mark.usefixtures("lab_cluster")


@dataclass(frozen=True)
class Ran:
    """A job the test submitted, as accounting and its output file show it."""

    job_id: str
    status: JobStatus
    record: JobRecord
    lines: list[str]


def sbatch(workdir: Path, name: str, body: str, *options: str) -> str:
    """Submit a bash script as this (unprivileged) user; its output goes to NAME_JOBID.out."""
    script = f"#!/bin/bash\n#SBATCH -J {name}\n#SBATCH -o {workdir}/{name}_%j.out\n{body}\n"
    res = subprocess.run(
        ["sbatch", "--parsable", "-t", "5", *options],
        input=script,
        capture_output=True,
        text=True,
        cwd=workdir,
        timeout=30,
        check=True,
    )
    return res.stdout.strip().split(";")[0]


def ended(st: JobStatus) -> bool:
    """Terminal, and accounting has caught up: the batch step is there and ended too."""
    rec = st.record
    batch = next((s for s in rec.steps if s.step == "batch"), None) if rec else None
    return st.state.is_terminal and batch is not None and batch.state.is_terminal


def wait_for(job_id: str, done: Callable[[JobStatus], bool], timeout_s: float) -> JobStatus:
    """Poll SlurmScheduler.status (one sacct, at most one squeue) until done(status)."""
    scheduler = SlurmScheduler(LocalTransport())
    since = datetime.now() - timedelta(minutes=10)
    deadline = time.monotonic() + timeout_s
    while True:
        st = scheduler.status([job_id], since)[job_id]
        if done(st):
            return st
        assert time.monotonic() < deadline, f"job {job_id} not there yet: {st}"
        time.sleep(1)


def run(
    workdir: Path,
    name: str,
    body: str,
    *options: str,
    done: Callable[[JobStatus], bool] = ended,
    timeout_s: float = 300,
) -> Ran:
    job_id = sbatch(workdir, name, body, *options)
    st = wait_for(job_id, done, timeout_s)
    assert st.record is not None
    return Ran(job_id, st, st.record, output(workdir, name, job_id))


def output(workdir: Path, name: str, job_id: str) -> list[str]:
    path = workdir / f"{name}_{job_id}.out"
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def scancel(*job_ids: str) -> None:
    subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30, check=False)


@lab
def test_lab_out_of_memory(workdir: Path) -> None:
    # tail keeps the whole NUL-filled "line" in memory until its input ends: 400 MB
    # against --mem=50M, held long enough for the 2-second sampler to see it
    ran = run(
        workdir,
        "oom",
        "{ head -c 400M /dev/zero; sleep 20; } | tail > /dev/null",
        "--mem=50M",
        done=lambda st: ended(st) and st.record is not None and st.record.max_rss_bytes is not None,
    )
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.OUT_OF_MEMORY and d.job_id == ran.job_id
    assert "sacct State FAILED, ExitCode 0:9" in d.evidence
    assert "batch step CANCELLED by 0, ExitCode 0:9" in d.evidence
    assert any("exceeded memory limit (" in e for e in d.evidence)
    # the rule: max(2 x requested, 1.5 x the peak seen), in whole 100 MiB
    used = max(int(e.split("(")[1].split(" ")[0]) for e in d.evidence if "exceeded memory" in e)
    peak = max(used, ran.record.max_rss_bytes or 0)
    expected = math.ceil(max(2 * 50 * MIB, 1.5 * peak) / (100 * MIB)) * 100
    assert d.retryable and d.suggested == {"mem_mb": expected} and expected > 100
    assert f"--mem {expected}M" in d.remedy


@lab
@pytest.mark.slow  # 75-90 s: Slurm ends it at its 1-minute limit
def test_lab_timeout(workdir: Path) -> None:
    # about a minute: Slurm ends it at its 1-minute limit (KillWait=2 on the lab)
    ran = run(workdir, "timeout", "sleep 300", "-t", "1", timeout_s=420)
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.TIMEOUT and d.retryable
    assert d.evidence[0].startswith("sacct State TIMEOUT")
    # how the batch step's end is recorded is a race between slurmstepd's SIGTERM to the
    # script and to its child, and the time limit: killed by the signal (0:15), its
    # status 15, or the step's own TIMEOUT (all three seen in CI); the verdict is the same
    assert set(BATCH_STEP_AT_TIMEOUT) & set(d.evidence), d.evidence
    assert any(e.endswith("DUE TO TIME LIMIT ***") for e in d.evidence)
    assert d.suggested == {"time_limit_s": 120} and "--time 00:02:00" in d.remedy
    # sleep uses no CPU: the remedy warns that more time may not be what it needs
    assert d.efficiency.cpu_efficiency is not None and d.efficiency.cpu_efficiency < 0.05
    assert "stuck waiting" in d.remedy
    at_cap = diagnose(ran.record, ran.lines, partition_max_time_s=60)
    assert not at_cap.retryable and at_cap.suggested == {}


@lab
@pytest.mark.parametrize(
    ("body", "exit_code", "how", "quoted"),
    [
        (
            'echo "indexing"; echo "error: reference index is corrupt" >&2; exit 3',
            "3:0",
            "it exited with status 3",
            "error: reference index is corrupt",
        ),
        (
            'echo "about to crash" >&2; kill -SEGV $$',
            "0:11",
            "it was killed by signal 11 (SIGSEGV)",
            "about to crash",
        ),
    ],
    ids=["exit-3", "sigsegv"],
)
def test_lab_nonzero_exit(workdir: Path, body: str, exit_code: str, how: str, quoted: str) -> None:
    ran = run(workdir, "exit", body)
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.NONZERO_EXIT and not d.retryable
    assert f"sacct State FAILED, ExitCode {exit_code}" in d.evidence
    assert quoted in d.evidence
    assert d.remedy.startswith(how) and repr(quoted) in d.remedy


@lab
def test_lab_missing_input(workdir: Path) -> None:
    missing = workdir / "in" / "sample_7.csv"
    ran = run(workdir, "missing", f'sort "{missing}" > "{workdir}/sorted.csv"')
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.MISSING_INPUT and not d.retryable
    assert f"sort: cannot read: {missing}: No such file or directory" in d.evidence
    assert d.remedy.startswith(f"`{missing}` does not exist")


@lab
def test_lab_command_not_found(workdir: Path) -> None:
    ran = run(workdir, "nocmd", "echo aligning\nbwa_not_installed mem ref.fa reads.fq")
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.COMMAND_NOT_FOUND and not d.retryable
    assert "sacct State FAILED, ExitCode 127:0" in d.evidence
    assert any(e.endswith("bwa_not_installed: command not found") for e in d.evidence)
    assert "`bwa_not_installed` is not on the job's PATH" in d.remedy


@lab
def test_lab_module_command_missing(workdir: Path) -> None:
    # no Lmod on the lab: bash knows no `module`, and the tool it should have loaded is
    # missing next; the module is the cause (Lmod's own error: the captured_ test above)
    ran = run(workdir, "nomodule", "module load fastqc/0.12.1\nfastqc sample_1.fastq.gz")
    d = diagnose(ran.record, ran.lines)
    assert d.verdict is Verdict.MODULE_NOT_LOADED and not d.retryable
    assert any(e.endswith("module: command not found") for e in d.evidence)
    assert "`module` command is not defined" in d.remedy


@lab
def test_lab_cancelled_by_its_user(workdir: Path) -> None:
    job_id = sbatch(workdir, "cancelme", "echo started\nsleep 120")
    try:
        wait_for(job_id, lambda st: st.state is JobState.RUNNING, 300)
        SlurmScheduler(LocalTransport()).cancel([job_id])
        st = wait_for(job_id, ended, 60)
    finally:
        scancel(job_id)
    assert st.record is not None
    d = diagnose(st.record, output(workdir, "cancelme", job_id))
    uid = str(os.getuid())
    assert d.verdict is Verdict.CANCELLED and not d.retryable
    assert f"sacct State CANCELLED by {uid}, ExitCode 0:0" in d.evidence
    assert any(f"*** JOB {job_id} ON " in e and "CANCELLED AT" in e for e in d.evidence)
    assert f"uid {uid} (not root" in d.remedy and "resubmit it unchanged" in d.remedy


@lab
def test_lab_dependency_on_a_failed_job(workdir: Path) -> None:
    failed = sbatch(workdir, "fails", "exit 1")
    dep = sbatch(workdir, "waits", "echo never", f"--dependency=afterok:{failed}")
    try:
        st = wait_for(dep, lambda s: s.reason == "DependencyNeverSatisfied", 300)
    finally:
        scancel(dep)
    assert st.record is not None
    d = diagnose(st.record, [], reason=st.reason)
    assert d.verdict is Verdict.DEPENDENCY_NEVER_SATISFIED and not d.retryable
    assert "reason DependencyNeverSatisfied" in d.evidence
    assert f"scancel {dep}" in d.remedy and d.suggested == {}


def node_memory_mb() -> int:
    out = subprocess.run(
        ["scontrol", "show", "node", "-o"], capture_output=True, text=True, check=True
    )
    return int(parse_key_values(out.stdout.splitlines()[0])["RealMemory"])


@lab
def test_lab_preempted_job_is_requeued(workdir: Path) -> None:
    # Partition "preempt" is requeued by "high" (scripts/slurm-lab). Each job asks for 60%
    # of the node's memory, so the high one can only start by preempting the other.
    mem = f"--mem={node_memory_mb() * 6 // 10}M"
    low = sbatch(
        workdir, "low", "echo started\nsleep 120", "-p", "preempt", mem, "--open-mode=append"
    )
    high = ""
    try:
        wait_for(low, lambda st: st.state is JobState.RUNNING, 300)
        high = sbatch(workdir, "high", "true", "-p", "high", mem, "-t", "1")

        def requeued(st: JobStatus) -> bool:
            return not st.state.is_terminal and any(
                "DUE TO PREEMPTION" in ln for ln in output(workdir, "low", low)
            )

        st = wait_for(low, requeued, 300)
    finally:
        scancel(low, *([high] if high else []))
    assert st.record is not None
    d = diagnose(st.record, output(workdir, "low", low), reason=st.reason)
    assert d.verdict is Verdict.PREEMPTED
    assert any(e.endswith("DUE TO PREEMPTION ***") for e in d.evidence)
    # Slurm runs it again by itself: a resubmission would run it twice
    assert not d.retryable and "requeued" in d.remedy and d.suggested == {}

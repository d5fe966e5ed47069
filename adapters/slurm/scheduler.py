"""The Slurm implementation of the Scheduler protocol and of every capability in
adapters/capabilities.py, over any Transport.

Submissions are never duplicated: every script carries a unique tag in its job name
(which accounting always stores, unlike --comment), and before any retry the tag is
looked up in the controller and in accounting.

Where the site keeps no accounting (adapters/slurm/parsing/accounting.py), status and lookups
read the controller alone, which holds a finished job only for MinJobAge.
"""

from __future__ import annotations

import getpass
import re
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import Enum

from jobsmith.adapters.capabilities import Capabilities
from jobsmith.adapters.options import Dependency, JobOptions
from jobsmith.adapters.records import JobRecord, QueueRecord
from jobsmith.adapters.scheduler import (
    EnvironmentInputs,
    JobStatus,
    SubmitLimits,
    SubmitResult,
    TestOnlyResult,
    task_range_size,
)
from jobsmith.adapters.slurm.commands import argv
from jobsmith.adapters.slurm.commands.logpaths import expand_log_pattern
from jobsmith.adapters.slurm.commands.options import dependency_spec, render_directives
from jobsmith.adapters.slurm.commands.sbatch_script import SbatchScripts
from jobsmith.adapters.slurm.commands.slurmenv import environment_inputs
from jobsmith.adapters.slurm.inflight import SUBMIT_TAG_ENV, orphan_sbatch_alive, remote_probe
from jobsmith.adapters.slurm.parsing.accounting import (
    NO_ACCOUNTING,
    AccountingDisabled,
    AccountingFacts,
    AccountingMemory,
    facts_from_config,
)
from jobsmith.adapters.slurm.parsing.facts import build_facts
from jobsmith.adapters.slurm.parsing.offers import offers_only_job_state
from jobsmith.adapters.slurm.parsing.parse import (
    RUN_FIELDS,
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    USAGE_FIELDS,
    parse_job_states,
    parse_key_values,
    parse_sacct_parsable,
    parse_squeue,
)
from jobsmith.adapters.slurm.parsing.qoslimits import (
    QOS_FIELDS,
    QUEUED_FORMAT,
    USER_ASSOC_FIELDS,
    SubmitFacts,
    applicable,
    counted,
    parse_qos_submit,
    parse_queued,
    parse_user_assoc,
)
from jobsmith.adapters.slurm.parsing.status import (
    controller_status,
    merge_status,
    started_among,
)
from jobsmith.adapters.slurm.remembered import KnownSubmitFacts, Remembered
from jobsmith.adapters.states import JobState
from jobsmith.adapters.transport import CommandResult, Transport
from jobsmith.errors import JobNotFound, SchedulerError, SchedulerUnavailable
from jobsmith.site_config.facts import ClusterFacts

# sbatch's own words for "try again later", across versions; anything else is a refusal
# (bad partition, over a limit) that a retry would only repeat.
_TRANSIENT = re.compile(
    r"temporarily unable|Socket timed out|Unable to contact slurm controller|"
    r"Connection refused|Zero Bytes were transmitted|Resource temporarily unavailable",
    re.IGNORECASE,
)
# scancel, scontrol and squeue's words for a job id the controller does not know
_UNKNOWN_JOB = re.compile(r"Invalid job id specified", re.IGNORECASE)
_TEST_ONLY = re.compile(
    r"Job (?P<id>\d+) to start at (?P<start>\S+) using (?P<cpus>\d+) processors on nodes "
    r"(?P<nodes>\S+) in partition (?P<partition>\S+)"
)


class SlurmScheduler:
    """Slurm through its command-line tools."""

    def __init__(
        self,
        transport: Transport,
        *,
        timeout_s: float = 30.0,
        submit_attempts: int = 3,
        retry_delay_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        memory: AccountingMemory | None = None,
        submit_memory: Remembered[KnownSubmitFacts] | None = None,
        remote: bool = False,
    ) -> None:
        self._transport = transport
        # remote: the commands run on another host (SSH). A command that timed out or lost
        # its connection there is not known to be dead, so "the tag is not found" is never
        # final: no second sbatch, and no "never reached Slurm" for crash recovery.
        self._remote = remote
        self._timeout = timeout_s
        self._attempts = submit_attempts
        self._delay = retry_delay_s
        self._sleep = sleep
        self._version: str | None = None
        self._memory = memory
        self._facts: AccountingFacts | None = None  # learned by this process
        self._config_read = False
        self._submit_facts: dict[str, SubmitFacts] = {}  # by user, read once per process
        self._submit_memory = submit_memory  # and kept a while between processes
        self._only_job_state: bool | None = None  # squeue --only-job-state, asked once

    def version(self) -> str:
        """The Slurm version from `sbatch --version`, e.g. '22.05.8'."""
        if self._version is None:
            out = self._checked(argv.sbatch_version()).stdout.strip()
            self._version = out.split()[-1] if out else "unknown"
        return self._version

    # --- submission -------------------------------------------------------------------

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        """Submit once; on an unclear answer, look the tag up before trying again."""
        started = datetime.now() - timedelta(minutes=5)
        last_error: SchedulerError | None = None
        for attempt in range(1, self._attempts + 1):
            if attempt > 1:
                found = self.find_by_name(options.job_name, started)
                if found:
                    return _result(found[0], options, (), attempt - 1, recovered=True)
                self._sleep(self._delay * attempt)
            try:
                # the tag in sbatch's environment lets a resumed session find an sbatch that
                # outlived its parent (see agent/runtime/recovery/resume.py)
                env = {**argv.SLURM_ENV, SUBMIT_TAG_ENV: options.job_name}
                res = self._transport.run(
                    argv.sbatch_submit(), timeout=self._timeout, stdin=script, env=env
                )
            except SchedulerUnavailable as exc:
                if self._remote:
                    return self._recovered_or_unknown(options, started, exc)
                last_error = exc  # sbatch was killed and reaped: the lookup above is final
                continue
            job_id = _parse_job_id(res.stdout) if res.returncode == 0 else None
            if job_id is not None:
                return _result(job_id, options, _lines(res.stderr), attempt, recovered=False)
            last_error = _submit_error(res, options)
            if not isinstance(last_error, SchedulerUnavailable):
                raise last_error
        found = self.find_by_name(options.job_name, started)
        if found:
            return _result(found[0], options, (), self._attempts, recovered=True)
        assert last_error is not None
        raise last_error

    def _recovered_or_unknown(
        self, options: JobOptions, since: datetime, lost: SchedulerUnavailable
    ) -> SubmitResult:
        """After a remote sbatch gave no answer: the job if Slurm shows it, else unknown."""
        found = self.find_by_name(options.job_name, since)
        if found:
            return _result(found[0], options, (), 1, recovered=True)
        raise SchedulerUnavailable(
            f"{lost}; the sbatch on the login node may still submit {options.job_name}, so "
            "it is not sent again: `jobsmith sessions resume SESSION` says later whether "
            "Slurm got it"
        ) from lost

    def find_by_name(self, job_name: str, since: datetime) -> list[str]:
        """Ids of jobs named job_name: controller first (current), then accounting."""
        res = self._checked(argv.squeue_by_name(job_name))
        ids = _unique_lines(res.stdout)
        if ids or not self._uses_accounting():
            return ids
        try:
            res = self._checked(argv.sacct_by_name(job_name, since))
        except AccountingDisabled:
            return []  # the controller's answer is all there is (see has_accounting)
        self._accounting_answered()
        return [i for i in _unique_lines(res.stdout) if "." not in i]

    def test_only(self, script: str) -> TestOnlyResult:
        """`sbatch --test-only`: Slurm's verdict and start estimate, nothing submitted."""
        res = self._transport.run(
            argv.sbatch_test_only(), timeout=self._timeout, stdin=script, env=argv.SLURM_ENV
        )
        text = (res.stderr + res.stdout).strip()
        match = _TEST_ONLY.search(text)
        if res.returncode != 0 or match is None:
            return TestOnlyResult(ok=False, message=_strip_prefix(text))
        start = datetime.fromisoformat(match.group("start"))
        # 22.05 answers GRES jobs with dates thousands of years ahead (see lab notes)
        reliable = start.year <= datetime.now().year + 1
        return TestOnlyResult(
            ok=True,
            estimated_start=start if reliable else None,
            partition=match.group("partition"),
            estimate_reliable=reliable,
            message=_strip_prefix(text),
        )

    # --- status -----------------------------------------------------------------------

    def status(
        self, job_ids: Sequence[str], since: datetime, *, terms: bool = True
    ) -> dict[str, JobStatus]:
        """One sacct call for all jobs, plus one squeue only where sacct cannot answer
        (queue_need); without accounting, one squeue --me alone (a job it no longer shows
        is FINAL_UNKNOWN). terms=False: sacct without QoS and TRES (USAGE_FIELDS), a
        third of the time in slurmdbd."""
        if not job_ids:
            return {}
        if not self._uses_accounting():
            return controller_status(job_ids, self.queue())
        try:
            accounting = self.accounting(job_ids, since, SACCT_FIELDS if terms else USAGE_FIELDS)
        except AccountingDisabled:
            return controller_status(job_ids, self.queue())
        self._accounting_answered()
        need = queue_need(job_ids, accounting)
        queue: list[QueueRecord] = []
        if need is QueueNeed.DETAIL:
            queue = self.queue()
        elif need is QueueNeed.STATES:
            queue = self.queue_states(job_ids)
        return merge_status(job_ids, accounting, queue)

    def usage(self, job_ids: Sequence[str], since: datetime) -> dict[str, JobStatus]:
        """One sacct call for what the jobs used (USAGE_FIELDS: no QOS or TRES columns,
        each of which costs sacct a lookup of its own in slurmdbd), no squeue."""
        if not job_ids or not self._uses_accounting():
            return {}
        try:
            res = self._checked(argv.sacct_jobs(job_ids, since, USAGE_FIELDS))
        except AccountingDisabled:
            return {}
        self._accounting_answered()
        return merge_status(job_ids, parse_sacct_parsable(res.stdout, argv.DELIMITER), [])

    def accounting(
        self, job_ids: Sequence[str], since: datetime, fields: Sequence[str] = SACCT_FIELDS
    ) -> list[JobRecord]:
        """sacct records for the jobs (all tasks of arrays), in one call, whatever the rows
        hold: a just-ended job's stand-in row is marked (JobRecord.stand_in), never asked
        for again here; the agent fills it from what it submitted
        (agent/runtime/recovery/standin.py)."""
        res = self._checked(argv.sacct_jobs(job_ids, since, fields))
        return parse_sacct_parsable(res.stdout, argv.DELIMITER)

    # --- accounting or not ------------------------------------------------------------

    def has_accounting(self) -> bool:
        """False where the site keeps no accounting: from this process's sacct answers,
        else the remembered answer while fresh, else `scontrol show config`."""
        return self._known_facts().accounting

    def min_job_age_s(self) -> int | None:
        """MinJobAge, how long the controller keeps a finished job (None if unreadable)."""
        facts = self._known_facts()
        if facts.min_job_age_s is None and not self._config_read:
            facts = self._read_config()  # learned from sacct alone: MinJobAge not read yet
        return facts.min_job_age_s

    def max_array_size(self) -> int | None:
        """MaxArraySize, the cap on array indices (None if it cannot be read: sbatch stays
        the judge), from the same remembered `scontrol show config` as MinJobAge."""
        try:
            facts = self._known_facts()
            if facts.max_array_size is None and not self._config_read:
                facts = self._read_config()  # remembered before it was read, or from sacct
        except SchedulerError:
            return None
        return facts.max_array_size

    def _known_facts(self) -> AccountingFacts:
        if self._facts is not None:
            return self._facts
        remembered = self._memory.load() if self._memory else None
        if remembered is not None and remembered.fresh(datetime.now(UTC)):
            self._facts = remembered
            return remembered
        return self._read_config()

    def _read_config(self) -> AccountingFacts:
        facts = facts_from_config(self._checked(argv.scontrol_show_config()).stdout)
        self._config_read = True
        self._learn(facts)
        return facts

    def _uses_accounting(self) -> bool:
        """Whether to ask sacct at all: no while known (or freshly remembered) to be off.

        An unknown or stale answer means try sacct: its answer is the cheap re-check.
        """
        if self._facts is None:
            remembered = self._memory.load() if self._memory else None
            if remembered is None or not remembered.fresh(datetime.now(UTC)):
                return True
            self._facts = remembered
        return self._facts.accounting

    def _accounting_answered(self) -> None:
        """sacct worked: remember it, unless this process already knew."""
        if self._facts is None or not self._facts.accounting:
            self._learn_accounting(True)

    def _learn_accounting(self, accounting: bool) -> None:
        remembered = self._facts or (self._memory.load() if self._memory else None)
        age = remembered.min_job_age_s if remembered else None
        cap = remembered.max_array_size if remembered else None
        facts = AccountingFacts(
            accounting=accounting,
            min_job_age_s=age,
            max_array_size=cap,
            checked_at=datetime.now(UTC),
        )
        self._learn(facts)

    def _learn(self, facts: AccountingFacts) -> None:
        self._facts = facts
        if self._memory is not None:
            self._memory.save(facts)

    def active_tasks(self) -> int:
        """How many of the caller's jobs and array tasks are queued or running (one squeue)."""
        return sum(task_range_size(q) for q in self.queue() if q.state.is_active)

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        """The MaxSubmit limits a job would be under (adapters/slurm/parsing/qoslimits.py), counted
        with one squeue of the caller's jobs, which is skipped when none applies; for an
        array, MaxArraySize too (remembered as MinJobAge is: no call most times)."""
        base, rules = applicable(self._submit_facts_of(user), options)
        if options.array is not None:
            base = base.model_copy(update={"max_array_size": self.max_array_size()})
        if not rules:
            return base
        queue = parse_queued(self._checked(argv.squeue_submit_counts(QUEUED_FORMAT)).stdout)
        return counted(base, rules, queue)

    def _submit_facts_of(self, user: str) -> SubmitFacts:
        """sacctmgr's QoS and association limits, asked once per process and remembered
        between processes for a few minutes (remembered.py): an admin changes them
        rarely. The two sacctmgr calls run at once (each waits 0.1-0.3 s on slurmdbd,
        which a plan's submission waited for one after the other: issue 26)."""
        if user in self._submit_facts:
            return self._submit_facts[user]
        known = self._submit_memory.load() if self._submit_memory else None
        remembered = known.fresh(user, datetime.now(UTC)) if known else None
        if remembered is not None:
            self._submit_facts[user] = remembered
            return remembered
        from concurrent.futures import ThreadPoolExecutor

        try:
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="sacctmgr") as pool:
                qos = pool.submit(self._checked, argv.sacctmgr_qos_submit(QOS_FIELDS))
                assoc = pool.submit(
                    self._checked, argv.sacctmgr_user_assoc(user, USER_ASSOC_FIELDS)
                )
                qos_text, assoc_text = qos.result().stdout, assoc.result().stdout
            answered = True
        except SchedulerError:
            # no slurmdbd to ask (a site without accounting enforces no such limit): Slurm
            # stays the judge at sbatch, so a check that cannot be made stops nothing
            qos_text = assoc_text = ""
            answered = False  # and is not remembered: slurmdbd may be back next time
        default, assocs = parse_user_assoc(assoc_text, user)
        facts = SubmitFacts(
            user=user, default_account=default, qos=parse_qos_submit(qos_text), assocs=assocs
        )
        self._submit_facts[user] = facts
        if answered and self._submit_memory is not None:
            now = datetime.now(UTC)
            self._submit_memory.save((known or KnownSubmitFacts()).adding(facts, now))
        return facts

    def dbd_backlog(self) -> int:
        """Messages the controller still has to send to slurmdbd (sdiag's agent queue).

        While it is above zero, accounting may not yet know jobs the controller has
        already forgotten. Unknown (no such line) counts as zero.
        """
        res = self._checked(["sdiag"])
        match = re.search(r"DBD Agent queue size:\s*(\d+)", res.stdout)
        return int(match.group(1)) if match else 0

    def queue(self) -> list[QueueRecord]:
        """The caller's jobs as the controller holds them, in one call."""
        res = self._checked(argv.squeue_mine(SQUEUE_FORMAT))
        return parse_squeue(res.stdout, argv.DELIMITER)

    def queue_states(self, job_ids: Sequence[str]) -> list[QueueRecord]:
        """Only the states of these jobs, as the controller holds them: `squeue
        --only-job-state` where the installed squeue offers it (24.05+: one light RPC, no
        job table lock), else the full queue(). Whether it does is asked once per process
        (`squeue --usage`, which asks no controller)."""
        if self._only_job_state is None:
            usage = self._transport.run(
                argv.squeue_usage(), timeout=self._timeout, env=argv.SLURM_ENV
            )
            self._only_job_state = offers_only_job_state(usage.stdout + usage.stderr)
        if not self._only_job_state:
            return self.queue()
        try:
            res = self._checked(argv.squeue_states(job_ids))
        except JobNotFound:
            return []  # every id is one the controller no longer holds
        return parse_job_states(res.stdout, argv.DELIMITER)

    # --- control ----------------------------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel the jobs."""
        self._checked(argv.scancel(job_ids))

    def hold(self, job_ids: Sequence[str]) -> list[str]:
        """Hold the jobs; the ones among them that had already started. Slurm holds a
        running job without a word (`scontrol hold` exits 0, squeue shows it RUNNING,
        JobHeldUser) and it runs on, the hold only keeping it from starting again after a
        requeue. One squeue tells them (queue_states), asked for a hold only; if it does
        not answer, the hold stands and no job is named."""
        self._checked(argv.scontrol_hold(job_ids))
        try:
            queue = self.queue_states(job_ids)
        except SchedulerError:
            return []
        return started_among(job_ids, queue)

    def release(self, job_ids: Sequence[str]) -> None:
        """Release held jobs."""
        self._checked(argv.scontrol_release(job_ids))

    def set_dependencies(self, job_id: str, dependencies: Sequence[Dependency]) -> None:
        """`scontrol update JobId=… Dependency=…` ('' clears them)."""
        self._checked(argv.scontrol_update_dependency(job_id, dependency_spec(dependencies)))

    def exclude_nodes(self, job_id: str, nodes: str) -> None:
        """`scontrol update JobId=… ExcNodeList=…`."""
        self._checked(argv.scontrol_update_excluded(job_id, nodes))

    def runs(self, job_ids: Sequence[str], since: datetime) -> list[JobRecord]:
        """`sacct -D -X` for the jobs (RUN_FIELDS), one record per run: sacct prints a
        requeued job's runs under one id, so each row is read on its own."""
        if not job_ids or not self._uses_accounting():
            return []
        try:
            res = self._checked(argv.sacct_runs(job_ids, since, RUN_FIELDS))
        except AccountingDisabled:
            return []
        header, *rows = res.stdout.splitlines() or [""]
        out: list[JobRecord] = []
        for row in rows:
            out += parse_sacct_parsable(f"{header}\n{row}", argv.DELIMITER)
        return out

    def output_paths(self, job_id: str) -> tuple[str | None, str | None]:
        """StdOut/StdErr from `scontrol show job` (only while the controller holds the job)."""
        res = self._transport.run(
            argv.scontrol_show_job(job_id), timeout=self._timeout, env=argv.SLURM_ENV
        )
        if res.returncode != 0:
            raise JobNotFound(
                f"job {job_id}: the controller no longer holds it, so its log paths are "
                "unknown unless jobsmith submitted it"
            )
        # an array prints one line per record; the first is the one asked for
        fields = parse_key_values(res.stdout.splitlines()[0] if res.stdout else "")
        return fields.get("StdOut"), fields.get("StdErr")

    def log_path(self, options: JobOptions, job_id: str, stream: str, since: datetime) -> str:
        """The -o/-e pattern expanded for job_id; %j of an array task asks accounting for
        the task's own id. Relative paths are taken from the job's -D directory."""
        pattern = (options.error if stream == "stderr" else None) or options.output
        if pattern is None:
            pattern = "slurm-%A_%a.out" if options.array else "slurm-%j.out"
        array_id, _, task = job_id.partition("_")
        raw = job_id
        if task and "%j" in pattern:
            record = self.status([job_id], since)[job_id].record
            raw = record.job_id_raw if record is not None else job_id
        path = expand_log_pattern(
            pattern,
            job_id_raw=raw,
            array_job_id=array_id if task else None,
            array_task_id=int(task) if task.isdigit() else None,
            job_name=options.job_name,
            user=getpass.getuser(),
        )
        if not path.startswith("/") and options.chdir:
            path = f"{options.chdir.rstrip('/')}/{path}"
        return path

    def script_header(self, options: JobOptions) -> list[str]:
        """options as `#SBATCH` directives, in a fixed order (stable to diff and hash)."""
        return render_directives(options)

    def is_header_line(self, line: str) -> bool:
        """True for an `#SBATCH` directive line."""
        return line.startswith("#SBATCH")

    def batch_script(self, job_id: str) -> str:
        """`scontrol write batch_script` of a job the controller still holds."""
        return self._checked(["scontrol", "write", "batch_script", job_id, "-"]).stdout

    def submission_environment(self, environ: Mapping[str, str]) -> EnvironmentInputs:
        """The SBATCH_* defaults jobsmith folds, and the input variables it refuses."""
        return environment_inputs(environ)

    def submission_in_flight(self, job_name: str) -> bool:
        """True while an sbatch of this user's carrying job_name's tag still runs where
        submissions run: here, or over SSH on the login node (asked there, in its /proc;
        True when it cannot say, so crash recovery never submits twice on a guess)."""
        if not self._remote:
            return orphan_sbatch_alive(job_name)
        try:
            res = self._transport.run(remote_probe(job_name), timeout=self._timeout)
        except SchedulerError:
            return True
        return res.returncode != 1

    def submission_host(self) -> str:
        """This machine, or over SSH the login node (see SubmissionProbe)."""
        if not self._remote:
            return socket.gethostname()
        return f"ssh:{getattr(self._transport, 'where', 'login node')}"

    def capabilities(self) -> Capabilities:
        """Slurm has them all: #SBATCH directives, MinJobAge and slurmdbd's lag, an sbatch
        that can outlive its caller, and the batch script of a job the controller holds."""
        return Capabilities(
            directives=self,
            controller=self,
            submissions=self,
            scripts=self,
            own_scripts=SbatchScripts(),
        )

    def cluster_facts(self, user: str) -> ClusterFacts:
        """Partitions, nodes and the user's associations (three read-only commands)."""
        return build_facts(
            self._checked(argv.scontrol_show_partitions()).stdout,
            self._checked(argv.scontrol_show_nodes()).stdout,
            self._checked(argv.sacctmgr_assoc(user)).stdout,
            user=user,
        )

    def _checked(self, command: list[str]) -> CommandResult:
        res = self._transport.run(command, timeout=self._timeout, env=argv.SLURM_ENV)
        if res.returncode != 0:
            message = _strip_prefix(res.stderr.strip() or res.stdout.strip())
            cls = SchedulerError
            if _TRANSIENT.search(message):
                cls = SchedulerUnavailable
            elif _UNKNOWN_JOB.search(message):
                cls = JobNotFound
            elif NO_ACCOUNTING.search(message):
                self._learn_accounting(False)
                raise AccountingDisabled(
                    f"{command[0]} failed: {message}; this cluster keeps no accounting, so "
                    "jobsmith can only read what the controller still holds (MinJobAge)"
                )
            raise cls(f"{command[0]} failed: {message or f'exit status {res.returncode}'}")
        return res


#: How long after a job ends accounting may still be catching up with the controller.
#: slurmdbd lags by seconds (whole array tasks can be missing, and an array can show as
#: one plain record for a moment); minutes are a wide margin.
SETTLE_S = 120


class QueueNeed(Enum):
    """What a status poll must still ask the controller after sacct answered."""

    NONE = "none"  #: accounting alone is complete and current enough
    STATES = "states"  #: only whether the controller still holds ended jobs as ended
    DETAIL = "detail"  #: the controller's full records (reason, start estimate, name)


def queue_need(job_ids: Sequence[str], records: list[JobRecord]) -> QueueNeed:
    """Ask squeue only where sacct cannot answer.

    - DETAIL when a job is not in accounting yet, or accounting holds only a stand-in row
      for it (its name and state lag: agent/runtime/recovery/standin.py), or it is
      pending: why it waits, what it waits for and when it is expected to start are the
      controller's alone, and accounting's pending array range goes stale as tasks start;
      and while an array has a task running: accounting can miss a task that just
      started or ended (seen in CI: "array 0-5 -> 0-3,5" six seconds in), and the first
      poll's compare (agent/runtime/submission/accepted.py) must not take that for
      Slurm shrinking the array;
    - STATES when every job has ended but some only within SETTLE_S: accounting can
      still miss whole array tasks then, so the controller confirms the end;
    - STATES also, whatever else runs, when a job's latest run ended PREEMPTED or
      NODE_FAIL within SETTLE_S: Slurm may be requeuing it (its next run's row comes a
      moment later), and only the controller says it is pending again, so a job Slurm
      requeues is never taken for one that failed (and re-run by the rule brain);
    - NONE otherwise: running jobs (accounting's state and elapsed time are current, its
      lag only delays an end by a poll) and jobs that ended long ago.
    """
    seen = {r.array_job_id or r.job_id_raw for r in records} | {r.job_id_raw for r in records}
    if any(job_id not in seen for job_id in job_ids):
        return QueueNeed.DETAIL
    if any(r.stand_in or r.state is JobState.PENDING for r in records):
        return QueueNeed.DETAIL
    if any(r.array_job_id is not None and r.state.is_active for r in records):
        return QueueNeed.DETAIL
    settled = datetime.now() - timedelta(seconds=SETTLE_S)
    recent = [r for r in records if r.end_time is None or r.end_time > settled]
    if any(r.state in _MAY_BE_REQUEUED for r in recent):
        return QueueNeed.STATES
    if any(r.state.is_active for r in records):
        return QueueNeed.NONE
    if recent:
        return QueueNeed.STATES
    return QueueNeed.NONE


#: how a run ends that Slurm may requeue (preemption with PreemptMode=REQUEUE, a node
#: failure where JobRequeue=1)
_MAY_BE_REQUEUED = frozenset({JobState.PREEMPTED, JobState.NODE_FAIL})


def _result(
    job_id: str, opts: JobOptions, warnings: tuple[str, ...], attempts: int, *, recovered: bool
) -> SubmitResult:
    return SubmitResult(
        job_id=job_id,
        job_name=opts.job_name,
        tag=opts.tag(),
        warnings=warnings,
        recovered=recovered,
        attempts=attempts,
    )


def _submit_error(res: CommandResult, opts: JobOptions) -> SchedulerError:
    message = _strip_prefix(res.stderr.strip() or res.stdout.strip()) or f"exit {res.returncode}"
    if res.returncode == 0:
        return SchedulerError(f"sbatch answered without a job id for {opts.job_name}: {message}")
    if _TRANSIENT.search(message):
        return SchedulerUnavailable(f"sbatch could not reach Slurm: {message}")
    return SchedulerError(f"Slurm refused job {opts.job_name}: {message}")


def _parse_job_id(stdout: str) -> str | None:
    """`sbatch --parsable` prints 'jobid' or 'jobid;cluster' as its last line."""
    lines = _lines(stdout)
    if not lines:
        return None
    job_id = lines[-1].split(";")[0]
    return job_id if job_id.isdigit() else None


def _lines(text: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _unique_lines(text: str) -> list[str]:
    return list(dict.fromkeys(_lines(text)))


def _strip_prefix(text: str) -> str:
    """Drop the 'sbatch: error: ' style prefixes Slurm puts on each line."""
    lines = [re.sub(r"^\w+: (error: |warning: )?", "", line) for line in _lines(text)]
    return "; ".join(lines)

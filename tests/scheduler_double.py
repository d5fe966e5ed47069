"""A scheduler DOUBLE for the agent-logic tests, and the real parts wired around it.

`SchedulerDouble` implements the Scheduler protocol (adapters/scheduler.py), and every
capability the Slurm adapter has (adapters/capabilities.py), over a small in-memory job
table: a submission gets the next job id and PENDING, and the test sets
every later state itself (`set_state`, `set_tasks`). It records each call, so a test can
say what the agent asked of Slurm and how often. It is no model of Slurm: nothing runs,
nothing changes state unless the test says so. The real-cluster tests (test_sessions,
test_watch, test_crash, test_claims) check the agent against Slurm itself; these tests
check the agent's own decisions, fast and without the lab.

`AgentHarness` wires the real Executor, FileSessionStore (in a temporary directory),
JobLedger and shipped templates to the double, under a clock the test moves.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from jobsmith.adapters.capabilities import Capabilities
from jobsmith.adapters.options import JobOptions, array_last_index
from jobsmith.adapters.records import JobRecord
from jobsmith.adapters.scheduler import (
    EnvironmentInputs,
    JobStatus,
    SubmitLimit,
    SubmitLimits,
    SubmitResult,
    TestOnlyResult,
)
from jobsmith.adapters.slurm.commands.logpaths import expand_log_pattern
from jobsmith.adapters.slurm.commands.options import render_directives
from jobsmith.adapters.slurm.commands.slurmenv import environment_inputs
from jobsmith.adapters.slurm.inflight import orphan_sbatch_alive
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.ledger import JobLedger
from jobsmith.agent.runtime.session.readmodel import SessionFolds
from jobsmith.agent.runtime.session.store import FileSessionStore
from jobsmith.agent.runtime.submission.executor import Executor
from jobsmith.errors import JobNotFound, SchedulerError, SchedulerUnavailable
from jobsmith.job_templates import TemplateLibrary, shipped_library
from jobsmith.site_config import SiteConfig
from jobsmith.site_config.facts import ClusterFacts

MIB = 1024**2


class SimulatedCrash(BaseException):
    """The agent's process dying at this point (no handler may catch it, as with SIGKILL)."""


class SchedulerDouble:
    """A Scheduler test double: an in-memory job table the test drives; records every call.

    Knobs a test may set:
    - `unavailable`: a message; every call that would reach Slurm raises
      SchedulerUnavailable with it (a controller that does not answer);
    - `submit_error`: what submit raises instead of accepting the job (SchedulerError:
      Slurm said no; SimulatedCrash: the agent died while sbatch ran, before Slurm got it);
    - `answer_lost`: what submit raises after accepting the job (Slurm has it, the agent
      never heard: SchedulerUnavailable, or SimulatedCrash for an agent killed then);
    - `warnings`: what sbatch printed on stderr with an accepted job;
    - `active`: what active_tasks() returns (default: the table's unfinished tasks);
    - `backlog`: slurmdbd's agent queue for dbd_backlog() (resume waits while it is > 0);
    - `on_find`: called on every find_by_name (a test can move its clock there: slow Slurm).
    - `accounting`: False for a site without accounting (has_accounting());
    - `min_job_age`: the controller's MinJobAge for min_job_age_s().
    - `earlier_runs`: records of runs Slurm requeued, which runs() adds before the table's;
    - `submit_limit`: QoS name -> its MaxSubmitPU for submit_limits() (none by default; a
      job naming no QoS is in "normal"), counted over the table's unfinished jobs.
    - `max_array_size`: the cluster's MaxArraySize (None: not known), which submit_limits()
      names for an array and submit() enforces as Slurm does (the highest index is capped).
    """

    def __init__(self, first_id: int = 1000) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.jobs: dict[str, JobStatus] = {}
        self.terms_asked: list[bool] = []  # status(terms=...) of each call, in order
        self.names: dict[str, str] = {}  # job name (with its tag) -> job id
        self.scripts: dict[str, str] = {}  # job id -> the script submitted
        self.options: dict[str, JobOptions] = {}  # job id -> its options
        self.unavailable: str | None = None
        self.submit_error: BaseException | None = None
        self.answer_lost: BaseException | None = None
        self.warnings: tuple[str, ...] = ()
        self.active: int | None = None
        self.backlog = 0
        self.on_find: Callable[[], object] | None = None
        self.accounting = True
        self.min_job_age: int | None = 300
        self.submit_limit: dict[str, int] = {}
        self.max_array_size: int | None = None
        self.earlier_runs: list[JobRecord] = []
        self._next_id = first_id

    # --- the Scheduler protocol ----------------------------------------------------

    def version(self) -> str:
        """A fixed version string."""
        self._call("version")
        return "24.11.1"

    def submit(self, script: str, options: JobOptions) -> SubmitResult:
        """Accept the job as PENDING under the next id (unless a knob says otherwise)."""
        self._call("submit", script, options)
        self._reachable()
        if self.submit_error is not None:
            raise self.submit_error
        cap = self.max_array_size
        if options.array is not None and cap is not None and array_last_index(options.array) >= cap:
            raise SchedulerError(
                "sbatch: error: Batch job submission failed: Invalid job array specification"
            )
        job_id = str(self._next_id)
        self._next_id += 1
        self.names[options.job_name] = job_id
        self.scripts[job_id] = script
        self.options[job_id] = options
        self.jobs[job_id] = JobStatus(job_id=job_id, state=JobState.PENDING)
        if self.answer_lost is not None:
            raise self.answer_lost
        return SubmitResult(
            job_id=job_id, job_name=options.job_name, tag=options.tag(), warnings=self.warnings
        )

    def test_only(self, script: str) -> TestOnlyResult:
        """Always: Slurm would accept it, to start on New Year's Day 2030 at noon."""
        self._call("test_only", script)
        self._reachable()
        start = datetime(2030, 1, 1, 12, 0)
        return TestOnlyResult(ok=True, estimated_start=start, message="the double would accept it")

    def status(
        self, job_ids: Sequence[str], since: datetime, *, terms: bool = True
    ) -> dict[str, JobStatus]:
        """The table's entry for each id; NOT_VISIBLE for an id the table lacks (the
        entries are what they are: terms is only remembered, in terms_asked)."""
        self._call("status", tuple(job_ids), since)
        self.terms_asked.append(terms)
        self._reachable()
        return {
            j: self.jobs.get(j, JobStatus(job_id=j, state=JobState.NOT_VISIBLE)) for j in job_ids
        }

    def find_by_name(self, job_name: str, since: datetime) -> list[str]:
        """The id of the job submitted under job_name, if the double accepted one."""
        self._call("find_by_name", job_name, since)
        if self.on_find is not None:
            self.on_find()
        self._reachable()
        return [self.names[job_name]] if job_name in self.names else []

    def usage(self, job_ids: Sequence[str], since: datetime) -> dict[str, JobStatus]:
        """As status (counted as a status call): the double has one table."""
        return self.status(job_ids, since)

    def active_tasks(self) -> int:
        """`active` if set, else the unfinished jobs and array tasks in the table."""
        self._call("active_tasks")
        self._reachable()
        if self.active is not None:
            return self.active
        return sum(
            sum(1 for t in s.tasks if not t.state.is_terminal) if s.tasks else 1
            for s in self.jobs.values()
            if not s.state.is_terminal
        )

    def submit_limits(self, user: str, options: JobOptions) -> SubmitLimits:
        """The job's QoS's `submit_limit`, with the table's unfinished jobs in that QoS
        (each array task counts one, as Slurm counts them); no limit unless set."""
        self._call("submit_limits", user, options)
        self._reachable()
        qos = options.qos or "normal"
        limit = self.submit_limit.get(qos)
        cap = self.max_array_size if options.array is not None else None
        if limit is None:
            return SubmitLimits(qos=qos, account=options.account, max_array_size=cap)
        queued = 0
        for job_id, status in self.jobs.items():
            opts = self.options.get(job_id)  # None: a job the test put in the table
            if not status.state.is_terminal and ((opts and opts.qos) or "normal") == qos:
                queued += opts.array_size() if opts else 1
        found = SubmitLimit(
            rule="MaxSubmitPU", holder=f"QoS {qos} (per user)", limit=limit, queued=queued
        )
        return SubmitLimits(qos=qos, account=options.account, limits=(found,), max_array_size=cap)

    def cancel(self, job_ids: Sequence[str]) -> None:
        """Mark the jobs CANCELLED."""
        self._call("cancel", tuple(job_ids))
        self._reachable()
        for j in job_ids:
            self.jobs[j] = JobStatus(job_id=j, state=JobState.CANCELLED)

    def hold(self, job_ids: Sequence[str]) -> list[str]:
        """Record the call; the jobs among them the double has started (running on, as
        Slurm's do)."""
        self._call("hold", tuple(job_ids))
        self._reachable()
        return [j for j in job_ids if j in self.jobs and self.jobs[j].state.has_started]

    def release(self, job_ids: Sequence[str]) -> None:
        """Record the call only."""
        self._call("release", tuple(job_ids))
        self._reachable()

    def set_dependencies(self, job_id: str, dependencies: Sequence[Any]) -> None:
        """Record the call only."""
        self._call("set_dependencies", job_id, tuple(dependencies))
        self._reachable()

    def exclude_nodes(self, job_id: str, nodes: str) -> None:
        """Record the call only."""
        self._call("exclude_nodes", job_id, nodes)
        self._reachable()

    def runs(self, job_ids: Sequence[str], since: datetime) -> list[JobRecord]:
        """`earlier_runs` of the jobs asked about (earlier runs of requeued jobs), then
        their records in the table."""
        self._call("runs", tuple(job_ids))
        self._reachable()
        asked = set(job_ids)
        out = [r for r in self.earlier_runs if (r.array_job_id or r.job_id_raw) in asked]
        for job_id in job_ids:
            status = self.jobs.get(job_id)
            if status is not None:
                out += list(status.tasks) or ([status.record] if status.record else [])
        return out

    def cluster_facts(self, user: str) -> ClusterFacts:
        """A cluster with no partitions and no associations (site check is not tested here)."""
        self._call("cluster_facts", user)
        self._reachable()
        return ClusterFacts(user=user, partitions={}, associations=())

    def output_paths(self, job_id: str) -> tuple[str | None, str | None]:
        """The double keeps no log paths."""
        self._call("output_paths", job_id)
        return None, None

    def log_path(self, options: JobOptions, job_id: str, stream: str, since: datetime) -> str:
        """The -o/-e pattern expanded by the real expander (no accounting: %j is the id)."""
        self._call("log_path", options, job_id, stream)
        pattern = (options.error if stream == "stderr" else None) or options.output
        array_id, _, task = job_id.partition("_")
        return expand_log_pattern(
            pattern or "slurm-%j.out",
            job_id_raw=job_id,
            array_job_id=array_id if task else None,
            array_task_id=int(task) if task.isdigit() else None,
            job_name=options.job_name,
            user="alice",
        )

    # --- the capabilities (adapters/capabilities.py): the double has Slurm's all ------

    def capabilities(self) -> Capabilities:
        """All of them, as the Slurm adapter has (not recorded: it asks Slurm nothing)."""
        return Capabilities(directives=self, controller=self, submissions=self, scripts=self)

    # --- the pure parts are Slurm's own: the double renders as the real adapter does ---

    def script_header(self, options: JobOptions) -> list[str]:
        """The real adapter's #SBATCH rendering."""
        return render_directives(options)

    def is_header_line(self, line: str) -> bool:
        """As the real adapter: an #SBATCH line."""
        return line.startswith("#SBATCH")

    def submission_environment(self, environ: Mapping[str, str]) -> EnvironmentInputs:
        """The real adapter's reading of SBATCH_* variables."""
        return environment_inputs(environ)

    def submission_host(self) -> str:
        """This machine (the double's submissions are local)."""
        return socket.gethostname()

    def submission_in_flight(self, job_name: str) -> bool:
        """The real check of this host's processes (a test can start a real 'orphan')."""
        self._call("submission_in_flight", job_name)
        return orphan_sbatch_alive(job_name)

    def batch_script(self, job_id: str) -> str:
        """The script the double accepted under job_id."""
        self._call("batch_script", job_id)
        self._reachable()
        if job_id not in self.scripts:
            raise JobNotFound(f"scontrol failed: Invalid job id specified ({job_id})")
        return self.scripts[job_id]

    # --- accounting's lag, which `sessions resume` asks about --------------------------

    def dbd_backlog(self) -> int:
        """slurmdbd's agent queue, as the test set it."""
        self._call("dbd_backlog")
        return self.backlog

    def has_accounting(self) -> bool:
        """Whether the site keeps accounting, as the test set it."""
        self._call("has_accounting")
        return self.accounting

    def min_job_age_s(self) -> int | None:
        """MinJobAge, as the test set it."""
        self._call("min_job_age_s")
        return self.min_job_age

    # --- for the test ------------------------------------------------------------------

    def set_state(self, job_id: str, state: JobState, **record: Any) -> JobStatus:
        """Give a (plain) job a state and an accounting record with the given fields."""
        status = JobStatus(job_id=job_id, state=state, record=self.record(job_id, state, **record))
        self.jobs[job_id] = status
        return status

    def set_tasks(
        self, job_id: str, tasks: dict[int, JobState], state: JobState, **record: Any
    ) -> JobStatus:
        """Give an array the overall state and one record per task (same fields each)."""
        recs = tuple(
            self.record(f"{job_id}_{i}", s, array_job_id=job_id, array_task_id=i, **record)
            for i, s in sorted(tasks.items())
        )
        status = JobStatus(job_id=job_id, state=state, tasks=recs)
        self.jobs[job_id] = status
        return status

    def record(self, job_id: str, state: JobState, **fields: Any) -> JobRecord:
        """An accounting record as the adapter would parse it (partition debug by default)."""
        base = job_id.partition("_")[0]
        name = next((n for n, j in self.names.items() if j == base), "job")
        return JobRecord.model_validate(
            {
                "job_id": job_id,
                "job_id_raw": job_id,
                "name": name,
                "state": state,
                "partition": "debug",
                **fields,
            }
        )

    def count(self, name: str) -> int:
        """How many times the agent called this method."""
        return sum(1 for c, _ in self.calls if c == name)

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    def _reachable(self) -> None:
        if self.unavailable is not None:
            raise SchedulerUnavailable(self.unavailable)


@dataclass
class TestClock:
    """A clock the test moves (the store's event times and the executor's `now`)."""

    __test__ = False  # not a pytest test class, despite the name

    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move forward by timedelta(**delta); returns the new time."""
        self.now += timedelta(**delta)
        return self.now


#: the site the harness uses unless a test passes its own policy (lab-like, smaller)
PARTITIONS: dict[str, Any] = {
    "debug": {
        "default": True,
        "max_time": "00:30:00",
        "max_cpus_per_node": 2,
        "max_mem_per_node": 4000,
    },
    "small": {"max_time": "02:00:00", "max_cpus_per_node": 2, "max_mem_per_node": 3000},
    "gpu": {"max_time": "04:00:00", "max_mem_per_node": 4000, "max_gpus_per_node": 2},
}


def site_config(root: Path, policy: dict[str, Any] | None = None) -> SiteConfig:
    """A site whose allowed root is the test's directory; policy replaces the defaults."""
    return SiteConfig.model_validate(
        {
            "cluster": "doublelab",
            "partitions": PARTITIONS,
            "accounts": {"allowed": ["lab"], "default": "lab"},
            "defaults": {"cpus_per_task": 1, "mem_mb": 1000, "time_limit_s": 600},
            "paths": {"scratch": str(root / "scratch"), "allowed_roots": [str(root)]},
            "policy": policy or {},
        }
    )


@dataclass
class AgentHarness:
    """The real executor, session store and ledger, with the scheduler double as Slurm."""

    root: Path
    slurm: SchedulerDouble
    store: FileSessionStore
    ledger: JobLedger
    executor: Executor
    clock: TestClock
    #: every read_output(job_id, stream, tail) the executor made
    outputs: list[tuple[str, str, int]] = field(default_factory=list)
    #: what read_output answers for a job id: its lines, or an error it raises
    logs: dict[str, list[str] | Exception] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        root: Path,
        policy: dict[str, Any] | None = None,
        slurm: SchedulerDouble | None = None,
    ) -> AgentHarness:
        """Everything under root (a pytest tmp_path), with policy as the site's (and slurm
        as Slurm: a subclass of the double, or a new one)."""
        (root / "scratch").mkdir(parents=True, exist_ok=True)
        clock = TestClock()
        slurm = slurm or SchedulerDouble()
        store = FileSessionStore(root / "sessions", clock=clock)
        ledger = JobLedger(root / "jobs")
        outputs: list[tuple[str, str, int]] = []
        logs: dict[str, list[str] | Exception] = {}

        def read_output(job_id: str, stream: str, tail: int) -> dict[str, Any]:
            outputs.append((job_id, stream, tail))
            lines = logs.get(job_id, ["from the double"])
            if isinstance(lines, Exception):
                raise lines
            return {"job_id": job_id, "stream": stream, "lines": lines}

        executor = Executor(
            store=store,
            scheduler=slurm,
            library=TemplateLibrary([shipped_library()]),
            site=site_config(root, policy),
            ledger=ledger,
            cwd=root,
            read_output=read_output,
            clock=clock,
        )
        return cls(root, slurm, store, ledger, executor, clock, outputs, logs)

    def with_policy(self, policy: dict[str, Any]) -> Executor:
        """Another executor on the same store, ledger and double, under another policy."""
        from dataclasses import replace

        return replace(self.executor, site=site_config(self.root, policy))


@dataclass
class HarnessParts:
    """The harness's real parts under the names the planes' small Protocols read (as
    agent/app.py's App has them); a test adds what else its plane reads."""

    h: AgentHarness

    @property
    def store(self) -> FileSessionStore:
        return self.h.store

    @property
    def executor(self) -> Executor:
        return self.h.executor

    @property
    def ledger(self) -> JobLedger:
        return self.h.ledger

    @property
    def scheduler(self) -> SchedulerDouble:
        return self.h.slurm


class Approver(HarnessParts):
    """What `jobsmith approve`/`deny` use (agent/app.py's App has these), as carol."""

    @property
    def folds(self) -> SessionFolds:
        return SessionFolds(self.h.store)

    @property
    def environ(self) -> dict[str, str]:
        return {"USER": "carol"}

"""The application object graph, built once by the CLI entry point and passed down.

Each part is created on first use: `jobsmith status` never loads templates, and
`jobsmith site init` works before any site config exists. This is the composition root
only: the use cases live in the planes that own them (agent/runtime, agent/watcher,
agent/brains, agent/views), each taking the parts it uses through a small Protocol the
App fits, and the faces call them with the App's parts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import JobStatus, Scheduler
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.brains.conversation import Conversation
    from jobsmith.agent.brains.protocol import Brain
    from jobsmith.agent.runtime.session.lastpoll import LastPollFile
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
    from jobsmith.agent.watcher.cycle import WatchCycle
    from jobsmith.agent.watcher.lock import WatchLock
    from jobsmith.agent.watcher.news import News
    from jobsmith.job_templates import TemplateLibrary
    from jobsmith.site_config import LoadedSite
    from jobsmith.site_config.model import SchedulerAccess


@dataclass
class UserDirs:
    """Where jobsmith keeps the user's files (platformdirs; overridable for tests)."""

    config_dir: Path
    state_dir: Path
    system_site_file: Path = Path("/etc/jobsmith/site.yaml")

    @classmethod
    def for_user(cls, environ: Mapping[str, str]) -> UserDirs:
        """XDG locations, honouring JOBSMITH_CONFIG_DIR / JOBSMITH_STATE_DIR overrides."""
        import platformdirs

        config = environ.get("JOBSMITH_CONFIG_DIR") or platformdirs.user_config_dir("jobsmith")
        state = environ.get("JOBSMITH_STATE_DIR") or platformdirs.user_state_dir("jobsmith")
        return cls(config_dir=Path(config), state_dir=Path(state))


@dataclass
class App:
    """Everything a command needs; parts are built lazily."""

    paths: UserDirs
    environ: Mapping[str, str]
    site_file: Path | None = None
    transport_override: Transport | None = field(default=None, repr=False)
    #: `render --no-slurm` (without_slurm): Slurm is asked nothing; without a site file,
    #: jobsmith's stand-in site with this partition (None: its placeholder)
    no_slurm: NoSlurm | None = None

    @cached_property
    def transport(self) -> Transport:
        """How Slurm commands run: the site config's `scheduler.kind`, `local` (this host)
        or `ssh` (a login node, over one reused connection).

        Commands that need no site config (status, cancel, logs) still work without one,
        locally; then the allowlist without site entries applies. paramiko is imported only
        for `ssh`, so local users never load it.
        """
        from jobsmith.adapters.environment_rule import JobEnvironmentRule
        from jobsmith.adapters.slurm.transport import LocalTransport

        if self.no_slurm is not None:
            from jobsmith.adapters.transport import NoCommands

            return NoCommands()
        if self.transport_override is not None:
            return self.transport_override
        try:
            config = self.site.config
            conf = config.scheduler.slurm_conf
            rule = JobEnvironmentRule.for_site(
                config.jobs.environment.allow,
                config.policy.secret_env,
                slurm_conf=None if conf is None else str(conf),
            )
        except ConfigError:
            rule = JobEnvironmentRule()
        access = self.scheduler_access
        if access.kind == "local":
            return LocalTransport(rule)
        assert access.host is not None  # the site config requires it for ssh and openssh
        if access.kind == "openssh":
            from jobsmith.adapters.ssh.openssh import OpenSshTransport

            default = Path.home() / ".ssh" / f"jobsmith-{access.host}.sock"
            return OpenSshTransport(
                access.host,
                control_path=access.control_path or default,
                port=access.port,
                user=access.user,
                known_hosts=access.known_hosts,
                environment=rule,
            )
        from jobsmith.extras import needs_extra

        with needs_extra("ssh", "scheduler.kind: ssh"):
            from jobsmith.adapters.ssh.transport import ParamikoTransport

        return ParamikoTransport(
            access.host,
            port=access.port,
            user=access.user,
            key_file=access.key_file,
            known_hosts=access.known_hosts,
            environment=rule,
        )

    @cached_property
    def scheduler_access(self) -> SchedulerAccess:
        """The site's `scheduler` block: the whole config's, else the block read alone
        (`site init` over SSH starts from a file that holds only it; see
        load_scheduler_access for when that is local)."""
        from jobsmith.site_config.loader import load_scheduler_access

        try:
            return self.site.config.scheduler
        except ConfigError:
            return load_scheduler_access(
                self.site_file,
                environ=self.environ,
                system_file=self.paths.system_site_file,
                user_file=self.paths.config_dir / "site.yaml",
            )

    @property
    def scheduler_via(self) -> str:
        """How Slurm is reached, for messages: 'local', or the kind and user@host:port."""
        where = getattr(self.transport, "where", None)
        return f"{self.scheduler_access.kind} {where}" if where else "local"

    @cached_property
    def scheduler(self) -> Scheduler:
        """Slurm, through the transport, with the site's command timeout, remembering per
        cluster whether the site keeps accounting (adapters/slurm/accounting.py)."""
        from jobsmith.adapters.slurm.accounting import AccountingMemory
        from jobsmith.adapters.slurm.scheduler import SlurmScheduler

        if self.no_slurm is not None:
            from jobsmith.adapters.slurm.unasked import UnaskedSlurm

            return UnaskedSlurm()
        access = self.scheduler_access
        timeout_s, remote = access.command_timeout_s, access.kind != "local"
        try:
            cluster = self.site.config.cluster
        except ConfigError:
            # commands that need no site config still work without one
            cluster = "no-site-config"
        memory = AccountingMemory(self.paths.state_dir / "clusters" / f"{cluster}.json")
        return SlurmScheduler(self.transport, timeout_s=timeout_s, memory=memory, remote=remote)

    @cached_property
    def site(self) -> LoadedSite:
        """The layered site configuration (the admin's file, --site, the user's file)."""
        from jobsmith.site_config import load_site
        from jobsmith.site_config.loader import NoSiteFile, stand_in_site

        try:
            return load_site(
                self.site_file,
                environ=self.environ,
                system_file=self.paths.system_site_file,
                user_file=self.paths.config_dir / "site.yaml",
            )
        except NoSiteFile:
            if self.no_slurm is None:
                raise
            return stand_in_site(self.environ, self.no_slurm.partition, Path.cwd())

    def without_slurm(self, partition: str | None) -> App:
        """This app for a script rendered without Slurm (`render --no-slurm`): no command
        runs (adapters/slurm/unasked.py says what is taken as absent), and without a site
        file jobsmith's stand-in site (site_config/loader.py, stand_in_site) stands in,
        with the partition the request names."""
        return App(self.paths, self.environ, self.site_file, no_slurm=NoSlurm(partition))

    @cached_property
    def ledger(self) -> JobLedger:
        """Submissions this user made with jobsmith."""
        from jobsmith.agent.runtime.session.ledger import JobLedger

        return JobLedger(self.paths.state_dir / "jobs")

    @cached_property
    def library(self) -> TemplateLibrary:
        """Templates: the user's own, then the site's, then the shipped ones (first wins);
        without any site file, the user's own and the shipped ones."""
        from jobsmith.job_templates import TemplateLibrary, shipped_library
        from jobsmith.site_config.loader import NoSiteFile

        try:
            site_dirs = list(self.site.config.paths.template_dirs)
        except NoSiteFile:  # no site file at all: the user's own and the shipped ones
            site_dirs = []
        return TemplateLibrary([self.paths.config_dir / "templates", *site_dirs, shipped_library()])

    # --- sessions and submission ------------------------------------------------------

    @cached_property
    def store(self) -> FileSessionStore:
        """The session log store, in the user's state directory."""
        from jobsmith.agent.runtime.session.store import FileSessionStore

        return FileSessionStore(self.paths.state_dir / "sessions")

    @cached_property
    def executor(self) -> Executor:
        """The policy-bound executor every action goes through."""
        from jobsmith.agent.runtime.logs import read_log
        from jobsmith.agent.runtime.submission.estimates import EstimateCache
        from jobsmith.agent.runtime.submission.executor import Executor
        from jobsmith.agent.runtime.submission.queuecount import QueueCounts

        def read_output(job_id: str, stream: str, tail: int) -> dict[str, object]:
            return read_log(self, job_id, stream, tail).model_dump(mode="json")

        state, slurmless = self.paths.state_dir, self.no_slurm is not None

        return Executor(
            store=self.store,
            scheduler=self.scheduler,
            library=self.library,
            site=self.site.config,
            ledger=self.ledger,
            cwd=Path.cwd(),
            read_output=read_output,
            environ=self.environ,
            folds=self.folds,
            # kept only from the real Slurm's answers (--no-slurm's stand-in answers none)
            estimates=None if slurmless else EstimateCache(state / "start-estimates.json"),
            queue_counts=None if slurmless else QueueCounts(state / "queue-count.json"),
        )

    @cached_property
    def folds(self) -> SessionFolds:
        """Each session's fold (the read model), cached in the state directory."""
        from jobsmith.agent.runtime.session.readmodel import SessionFolds

        return SessionFolds(self.store, self.paths.state_dir / "folds")

    # --- pipelines -------------------------------------------------------------------

    @cached_property
    def pipelines(self) -> Pipelines:
        """Workflow engines' head jobs launched, resumed and followed (the engines are
        chosen here, the composition root; agent/runtime/workflows/pipelinerun.py uses them)."""
        from jobsmith.adapters.nextflow import NextflowEngine
        from jobsmith.adapters.snakemake import SnakemakeEngine
        from jobsmith.adapters.workflow import EngineKind, WorkflowEngine
        from jobsmith.agent.runtime.session.payloads import PipelineBudgetPayload
        from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
        from jobsmith.agent.watcher.polling import SESSION_WINDOW, poll_jobs

        def poll(job_ids: list[str]) -> dict[str, JobStatus]:
            return poll_jobs(self, job_ids, SESSION_WINDOW)

        engines: dict[EngineKind, WorkflowEngine] = {
            EngineKind.NEXTFLOW: NextflowEngine(),
            EngineKind.SNAKEMAKE: SnakemakeEngine(),
        }

        def tell(session_id: str, said: PipelineBudgetPayload) -> None:
            self.news.add("pipeline_budget", session_id=session_id, **said.model_dump())

        return Pipelines(self.executor, self.store, self.transport, poll, engines, tell)

    # --- watching and the model ----------------------------------------------------------

    @cached_property
    def brain(self) -> Brain:
        """Who decides about failed jobs: the site's or user's `brain:` (default: rules)."""
        from jobsmith.agent.brains.protocol import load_brain
        from jobsmith.agent.brains.rules import RuleBrain

        try:
            spec = self.site.config.brain
        except ConfigError:
            spec = "rules"
        return load_brain(spec, {"rules": RuleBrain, "claude": self._claude_brain})

    def _claude_brain(self) -> Brain:
        """The model brain, with the site's `model:` settings; its key is read when it
        first decides, from the environment or the user's key file."""
        # imported here: neither the brain nor the SDK loads unless `brain: claude`
        from jobsmith.agent.brains.claude import ClaudeBrain
        from jobsmith.agent.brains.model_client import KEY_FILE_NAME

        key_file = self.paths.config_dir / KEY_FILE_NAME
        return ClaudeBrain(self.site.config.model, environ=self.environ, key_file=key_file)

    @cached_property
    def conversation(self) -> Conversation:
        """The model conversations of ask, chat and the wakes, with the site's `model:`
        settings; the key is read when one starts (agent/brains/conversation.py)."""
        # imported here: neither the conversation nor the SDK loads for other commands
        from jobsmith.agent.brains.conversation import Conversation
        from jobsmith.agent.brains.model_client import KEY_FILE_NAME

        return Conversation(
            settings=self.site.config.model,
            environ=self.environ,
            key_file=self.paths.config_dir / KEY_FILE_NAME,
            executor=self.executor,
            recent_jobs=self.ledger.recent_job_ids,
            tell=self.news.add,
        )

    def watch_cycle(self, interval_s: float | None = None) -> WatchCycle:
        """One watcher cycle with this app's parts (agent/watcher/cycle.py: run_cycle,
        which says what a cycle does, in order); with the interval, its warnings too."""
        from jobsmith.agent.watcher.cycle import run_cycle

        return run_cycle(self, interval_s)

    @cached_property
    def news(self) -> News:
        """What happened since the user last looked."""
        from jobsmith.agent.watcher.news import News

        return News(self.paths.state_dir)

    @cached_property
    def last_poll_file(self) -> LastPollFile:
        """The newest poll's answer, kept for whoever asks without polling (chat, MCP)."""
        from jobsmith.agent.runtime.session.lastpoll import LastPollFile

        return LastPollFile(self.paths.state_dir / "last_poll.json")

    def watch_lock(self, interval_s: float) -> WatchLock:
        """The user's one-watcher lock, stale after three missed cycles."""
        from jobsmith.agent.watcher.lock import WatchLock

        return WatchLock(self.paths.state_dir / "watch.lock", stale_after_s=3 * interval_s + 60)


@dataclass(frozen=True)
class NoSlurm:
    """How an app runs without Slurm (App.without_slurm)."""

    #: the stand-in site's partition, if one is needed (None: its placeholder)
    partition: str | None = None


def build_app(site_file: Path | None, environ: Mapping[str, str] | None = None) -> App:
    """The CLI's object graph for this user and environment."""
    env = dict(os.environ if environ is None else environ)
    # cron, runuser and some batch systems leave USER or HOME unset; site files expand
    # them, so take them from the password database rather than fail
    if not env.get("USER"):
        import getpass

        env["USER"] = env.get("LOGNAME") or getpass.getuser()
    env["HOME"] = env.get("HOME") or os.path.expanduser("~")
    return App(paths=UserDirs.for_user(env), environ=env, site_file=site_file)

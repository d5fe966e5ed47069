"""The application object graph, built once by the CLI entry point and passed down.

Each part is created on first use: `jobsmith status` never loads templates, and
`jobsmith site init` works before any site config exists. This is the composition root
only: the use cases live in the planes that own them (agent/runtime, agent/watcher,
agent/brains, agent/views), each taking the parts it uses through a small Protocol the
App fits, and the faces call them with the App's parts. How a part is built from the
site's settings is its plane's too (adapters/connection.py, agent/brains/factory.py,
Pipelines.of, Watcher.of): here each part is named, built once, and handed the others.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.adapters.files_there import JobFiles
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.adapters.transport import Transport
    from jobsmith.agent.brains.conversation import Conversation
    from jobsmith.agent.brains.protocol import Brain
    from jobsmith.agent.runtime.blocklist.store import NodeBlocklist
    from jobsmith.agent.runtime.session.lastpoll import LastPollFile
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.session.readmodel import SessionFolds
    from jobsmith.agent.runtime.session.store import FileSessionStore
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
    from jobsmith.agent.watcher.news import News
    from jobsmith.job_templates import TemplateLibrary
    from jobsmith.site_config import LoadedSite
    from jobsmith.site_config.model import SchedulerAccess, SiteConfig


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
        """How Slurm commands run: the site config's `scheduler.kind` (adapters/connection.py).
        Commands that need no site config (status, cancel, logs) still work without one,
        locally; then the allowlist without site entries applies."""
        from jobsmith.adapters.connection import environment_rule, transport_for

        if self.no_slurm is not None:
            from jobsmith.adapters.transport import NoCommands

            return NoCommands()
        if self.transport_override is not None:
            return self.transport_override
        rule = environment_rule(self._config_or_none())
        return transport_for(self.scheduler_access, rule)

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
        """Slurm, through the transport (adapters/connection.py: scheduler_for)."""
        from jobsmith.adapters.connection import scheduler_for

        if self.no_slurm is not None:
            from jobsmith.adapters.slurm.unasked import UnaskedSlurm

            return UnaskedSlurm()
        config = self._config_or_none()
        cluster = None if config is None else config.cluster
        clusters = self.paths.state_dir / "clusters"
        return scheduler_for(self.transport, self.scheduler_access, cluster, clusters)

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

    def _config_or_none(self) -> SiteConfig | None:
        """The site config, or None for commands that need none and find none."""
        try:
            return self.site.config
        except ConfigError:
            return None

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
        from jobsmith.agent.runtime.logs import read_output
        from jobsmith.agent.runtime.submission.advising.estimates import EstimateCache
        from jobsmith.agent.runtime.submission.executor import Executor

        state, slurmless = self.paths.state_dir, self.no_slurm is not None

        return Executor(
            store=self.store,
            scheduler=self.scheduler,
            library=self.library,
            site=self.site.config,
            ledger=self.ledger,
            cwd=Path.cwd(),
            read_output=partial(read_output, self),
            environ=self.environ,
            folds=self.folds,
            blocked_nodes=self.blocklist.blocked,
            files=self.job_files,
            # kept only from the real Slurm's answers (--no-slurm's stand-in answers none)
            estimates=None if slurmless else EstimateCache(state / "start-estimates.json"),
        )

    @cached_property
    def job_files(self) -> JobFiles:
        """The job's files where it runs: this host's for a local site (and without
        Slurm), else the login node's through the transport (adapters/files_there.py)."""
        from jobsmith.adapters.files_there import FilesThere, LocalFiles

        where = getattr(self.transport, "where", None)
        if self.no_slurm is not None or self.scheduler_access.kind == "local" or not where:
            return LocalFiles()
        return FilesThere(self.transport, where, self.scheduler_access.command_timeout_s)

    @cached_property
    def blocklist(self) -> NodeBlocklist:
        """The user's node blocklist of this site's cluster (policy.blocklist; off: none)."""
        from jobsmith.agent.runtime.blocklist.store import NodeBlocklist

        config = self.site.config
        path = self.paths.state_dir / "blocklist" / f"{config.cluster}.jsonl"
        return NodeBlocklist(path, config.policy.blocklist)

    @cached_property
    def folds(self) -> SessionFolds:
        """Each session's fold (the read model), cached in the state directory."""
        from jobsmith.agent.runtime.session.readmodel import SessionFolds

        return SessionFolds(self.store, self.paths.state_dir / "folds")

    @cached_property
    def pipelines(self) -> Pipelines:
        """Workflow engines' head jobs launched, resumed and followed, polled over the
        session window (agent/runtime/workflows/pipelinerun.py)."""
        from jobsmith.agent.runtime.workflows.pipelinerun import Pipelines
        from jobsmith.agent.watcher.polling import session_poll

        return Pipelines.of(self, session_poll(self))

    # --- watching and the model ----------------------------------------------------------

    @cached_property
    def brain(self) -> Brain:
        """Who decides about failed jobs: the site's or user's `brain:` (default: rules)."""
        from jobsmith.agent.brains.factory import brain_for

        return brain_for(self)

    @cached_property
    def conversation(self) -> Conversation:
        """The model conversations of ask, chat and the wakes (agent/brains/factory.py)."""
        from jobsmith.agent.brains.factory import conversation_for

        return conversation_for(self)

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

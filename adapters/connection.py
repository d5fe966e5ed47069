"""How this site's Slurm is reached: the transport its `scheduler` block names, and the
Slurm scheduler over it.

`scheduler.kind` chooses it: `local` runs the commands on this host
(adapters/slurm/transport.py), `ssh` on a login node over one reused paramiko connection
(adapters/ssh/transport.py) and `openssh` through the system's ssh with a control
socket (adapters/ssh/openssh.py). Each applies the one environment rule for jobs and the
login node (adapters/environment_rule.py) with the site's entries. paramiko is imported
only for `ssh`, so local users never load it; without it installed, the error names the
pip extra that brings it (jobsmith/extras.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from jobsmith.adapters.environment_rule import JobEnvironmentRule

if TYPE_CHECKING:
    from jobsmith.adapters.scheduler import Scheduler
    from jobsmith.adapters.transport import Transport
    from jobsmith.site_config.model import SchedulerAccess, SiteConfig


def environment_rule(config: SiteConfig | None) -> JobEnvironmentRule:
    """The environment rule with the site's `jobs.environment.allow`, `policy.secret_env`
    and slurm.conf; without a site config (commands that need none: status, cancel,
    logs), the rule without site entries."""
    if config is None:
        return JobEnvironmentRule()
    conf = config.scheduler.slurm_conf
    return JobEnvironmentRule.for_site(
        config.jobs.environment.allow,
        config.policy.secret_env,
        slurm_conf=None if conf is None else str(conf),
    )


def transport_for(access: SchedulerAccess, rule: JobEnvironmentRule) -> Transport:
    """The transport `access` (the site's scheduler block) names, applying rule."""
    from jobsmith.adapters.slurm.transport import LocalTransport

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


def scheduler_for(
    transport: Transport, access: SchedulerAccess, cluster: str | None, clusters_dir: Path
) -> Scheduler:
    """Slurm through transport, with the site's command timeout, remembering per cluster
    (in clusters_dir) whether the site keeps accounting and, for a few minutes, the
    users' submit limits (adapters/slurm/remembered.py);
    cluster None: no site config (commands that need none still work without one)."""
    from jobsmith.adapters.slurm.parsing.accounting import AccountingMemory
    from jobsmith.adapters.slurm.remembered import KnownSubmitFacts, Remembered
    from jobsmith.adapters.slurm.scheduler import SlurmScheduler

    name = cluster or "no-site-config"
    memory = AccountingMemory(clusters_dir / f"{name}.json")
    limits = Remembered(clusters_dir / f"{name}.submit-limits.json", KnownSubmitFacts)
    remote = access.kind != "local"
    return SlurmScheduler(
        transport,
        timeout_s=access.command_timeout_s,
        memory=memory,
        submit_memory=limits,
        remote=remote,
    )

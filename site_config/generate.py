"""`jobsmith site init`: a starting SiteConfig built from the live cluster's facts (pure).

The result copies the cluster's own limits (so `site check` finds no error in it) and
leaves policy at the model's conservative defaults; a person is expected to read it and
tighten it. Choices that the facts cannot settle:

- accounts and QoS: all the user's associations allow; a default only when there is
  exactly one account (otherwise none, and Slurm's own default account applies);
- partitions: those that admit at least one of the user's accounts;
- paths: the home directory is an allowed root; scratch defaults to `<home>/scratch`
  unless the caller (which may look at the filesystem) passes the site's scratch.
"""

from __future__ import annotations

from pathlib import Path

from jobsmith.errors import ConfigError
from jobsmith.site_config.facts import ClusterFacts, PartitionFacts
from jobsmith.site_config.model import (
    Choice,
    Defaults,
    Partition,
    Paths,
    SiteConfig,
)

_DEFAULT_TIME_S = 3600
_DEFAULT_MEM_MB = 2048


def init_site(
    facts: ClusterFacts,
    user: str,
    *,
    home: Path | None = None,
    scratch: Path | None = None,
    cluster: str | None = None,
) -> SiteConfig:
    """A SiteConfig for user from facts; home defaults to /home/USER (give the real one)."""
    home = home or Path("/home") / user
    scratch = scratch or home / "scratch"
    name = cluster or _cluster_name(facts)
    accounts = facts.accounts(name)
    partitions = {p.name: _partition(p) for p in facts.partitions.values() if _admits(p, accounts)}
    if not partitions:
        raise ConfigError(f"no partition on cluster {name!r} admits user {user!r}'s accounts")
    roots = [home] if scratch.is_relative_to(home) else [home, scratch]
    return SiteConfig(
        cluster=name,
        partitions=partitions,
        accounts=Choice(allowed=accounts, default=accounts[0] if len(accounts) == 1 else None),
        qos=Choice(allowed=facts.qos(name)),
        defaults=_defaults(partitions),
        paths=Paths(scratch=scratch, allowed_roots=roots),
    )


def _cluster_name(facts: ClusterFacts) -> str:
    clusters = facts.clusters()
    if len(clusters) != 1:
        found = ", ".join(clusters) or "none"
        raise ConfigError(
            f"cannot tell the cluster's name from accounting (clusters: {found}); "
            "pass it (ClusterName in slurm.conf)"
        )
    return clusters[0]


def _admits(part: PartitionFacts, accounts: list[str]) -> bool:
    return part.allow_accounts is None or any(a in part.allow_accounts for a in accounts)


def _partition(live: PartitionFacts) -> Partition:
    gpu_type = live.gpu_types[0] if len(live.gpu_types) == 1 else None
    return Partition(
        max_time=live.max_time_s,
        max_nodes=live.node_limit(),
        max_cpus_per_node=live.cpu_limit(),
        max_mem_per_node=live.mem_limit_mb(),
        max_gpus_per_node=live.gpus_per_node,
        gpu_type=gpu_type if live.gpus_per_node else None,
        default=live.default,
    )


def _defaults(partitions: dict[str, Partition]) -> Defaults:
    """Small defaults that fit the default partition (the model insists on it)."""
    default = next((p for p in partitions.values() if p.default), None)
    limits = default or Partition()
    return Defaults(
        cpus_per_task=1,
        mem_mb=min(_DEFAULT_MEM_MB, limits.max_mem_per_node or _DEFAULT_MEM_MB),
        time_limit_s=min(_DEFAULT_TIME_S, limits.max_time or _DEFAULT_TIME_S),
    )

"""`jobsmith site check`: compare a SiteConfig with what the live cluster reports (pure).

Severity says what a mismatch costs:

- error: jobsmith would ask for something Slurm refuses or cannot give (a partition
  that does not exist, a limit above the cluster's, an account the user may not use);
- warning: it works, but probably not as meant (jobsmith's default partition is not
  Slurm's, a partition is down, an account the partition does not admit);
- info: worth knowing (partitions the config leaves out).

A config limit *below* the cluster's is never reported: tightening is what a site file
is for. A config without a limit (None) is not reported either: Slurm enforces its own.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.site_config.facts import ClusterFacts, PartitionFacts
from jobsmith.site_config.model import Partition, SiteConfig
from jobsmith.units import format_duration, format_memory


class Severity(StrEnum):
    """How much a mismatch matters (see the module docstring)."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Mismatch(BaseModel):
    """One difference between the site file and the cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Severity = Field(description="error, warning or info")
    field: str = Field(description="the config field it concerns, e.g. 'partitions.gpu.max_time'")
    message: str = Field(description="what differs, in a sentence")

    def __str__(self) -> str:
        return f"{self.severity.value}: {self.field}: {self.message}"


def check_site(config: SiteConfig, facts: ClusterFacts) -> list[Mismatch]:
    """Every mismatch between config and facts, errors first, in config order."""
    # With a cluster name accounting does not know (reported once, as its own error),
    # judge accounts against all the user's associations rather than flag every one.
    scope = config.cluster if config.cluster in facts.clusters() else None
    found = [
        *_check_cluster(config, facts),
        *_check_partitions(config, facts),
        *_check_default_partition(config, facts),
        *_check_names("accounts", config.accounts.allowed, facts.accounts(scope)),
        *_check_names("qos", config.qos.allowed, facts.qos(scope)),
        *_check_unlisted(config, facts),
    ]
    order = list(Severity)
    return sorted(found, key=lambda m: order.index(m.severity))


def has_errors(mismatches: list[Mismatch]) -> bool:
    """True if any mismatch is an error (the CLI's exit status)."""
    return any(m.severity is Severity.ERROR for m in mismatches)


def _check_cluster(config: SiteConfig, facts: ClusterFacts) -> list[Mismatch]:
    known = facts.clusters()
    if not known:
        why = f"accounting lists no associations for user {facts.user!r}"
        return [_mismatch(Severity.WARNING, "cluster", why)]
    if config.cluster in known:
        return []
    message = (
        f"accounting knows user {facts.user!r} on {', '.join(known)}, not on "
        f"{config.cluster!r} (ClusterName in slurm.conf)"
    )
    return [_mismatch(Severity.ERROR, "cluster", message)]


def _check_partitions(config: SiteConfig, facts: ClusterFacts) -> list[Mismatch]:
    found: list[Mismatch] = []
    for name, part in config.partitions.items():
        live = facts.partitions.get(name)
        if live is None:
            listed = ", ".join(facts.partitions) or "(none)"
            message = f"no partition {name!r} on the cluster; it has {listed}"
            found.append(_mismatch(Severity.ERROR, f"partitions.{name}", message))
            continue
        found += _check_limits(name, part, live)
        found += _check_partition_access(name, live, config)
    return found


def _check_limits(name: str, part: Partition, live: PartitionFacts) -> list[Mismatch]:
    """A config limit above what the partition can give is an error."""
    limits: list[tuple[str, int | None, int | None, str, Callable[[int], str]]] = [
        ("max_time", part.max_time, live.max_time_s, "MaxTime", format_duration),
        ("max_nodes", part.max_nodes, live.node_limit(), "MaxNodes/TotalNodes", str),
        (
            "max_cpus_per_node",
            part.max_cpus_per_node,
            live.cpu_limit(),
            "MaxCPUsPerNode or node CPUs",
            str,
        ),
        (
            "max_mem_per_node",
            part.max_mem_per_node,
            live.mem_limit_mb(),
            "MaxMemPerNode or node RealMemory",
            format_memory,
        ),
        ("max_gpus_per_node", part.max_gpus_per_node, live.gpus_per_node, "node GRES", str),
    ]
    found = []
    for field, ours, theirs, source, show in limits:
        if ours is not None and theirs is not None and ours > theirs:
            message = f"{show(ours)} is above the cluster's {show(theirs)} ({source})"
            found.append(_error(f"partitions.{name}.{field}", message))
    return found + _check_gpu_type(name, part, live) + _check_state(name, live)


def _check_gpu_type(name: str, part: Partition, live: PartitionFacts) -> list[Mismatch]:
    if part.gpu_type is None or part.gpu_type in live.gpu_types:
        return []
    types = ", ".join(live.gpu_types) or "none (GRES is untyped)"
    message = f"GPU type {part.gpu_type!r} is not on the partition's nodes; types: {types}"
    return [_error(f"partitions.{name}.gpu_type", message)]


def _check_state(name: str, live: PartitionFacts) -> list[Mismatch]:
    if live.state == "UP":
        return []
    message = f"the partition is {live.state}: jobs are not started there now"
    return [_mismatch(Severity.WARNING, f"partitions.{name}", message)]


def _check_partition_access(name: str, live: PartitionFacts, config: SiteConfig) -> list[Mismatch]:
    """The default account and QoS should be admitted by every partition jobsmith may use."""
    found = []
    for section, default, admitted in (
        ("accounts", config.accounts.default, live.allow_accounts),
        ("qos", config.qos.default, live.allow_qos),
    ):
        if default is not None and admitted is not None and default not in admitted:
            message = f"partition {name!r} admits only {', '.join(admitted)}, not {default!r}"
            found.append(_mismatch(Severity.WARNING, f"{section}.default", message))
    return found


def _check_default_partition(config: SiteConfig, facts: ClusterFacts) -> list[Mismatch]:
    ours = config.default_partition()
    theirs = facts.default_partition()
    our_name = ours[0] if ours else None
    if our_name == theirs or our_name is None:
        return []  # none marked: jobsmith leaves -p out and Slurm's default applies
    message = f"jobsmith's default partition is {our_name!r}, Slurm's is {theirs!r}"
    field = f"partitions.{our_name}.default"
    return [_mismatch(Severity.WARNING, field, message)]


def _check_names(section: str, allowed: list[str], available: list[str]) -> list[Mismatch]:
    found = []
    for index, name in enumerate(allowed):
        if name not in available:
            offer = ", ".join(available) or "none"
            message = f"{name!r} is not available to the user; sacctmgr lists {offer}"
            found.append(_error(f"{section}.allowed[{index}]", message))
    return found


def _check_unlisted(config: SiteConfig, facts: ClusterFacts) -> list[Mismatch]:
    unlisted = [name for name in facts.partitions if name not in config.partitions]
    if not unlisted:
        return []
    message = f"the cluster also has {', '.join(unlisted)}; jobsmith will not use them"
    return [_mismatch(Severity.INFO, "partitions", message)]


def _error(field: str, message: str) -> Mismatch:
    return _mismatch(Severity.ERROR, field, message)


def _mismatch(severity: Severity, field: str, message: str) -> Mismatch:
    return Mismatch(severity=severity, field=field, message=message)

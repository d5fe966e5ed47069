"""What the live cluster says about itself: partitions, nodes and the user's associations.

`jobsmith site check` and `site init` compare a site file with these facts. They are
scheduler-neutral models; the scheduler adapter fills them in (for Slurm from scontrol
and sacctmgr, adapters/slurm/parsing/facts.py), so nothing here reads a scheduler's output.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field


class _Facts(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PartitionFacts(_Facts):
    """One partition as the controller reports it, with what its nodes offer."""

    name: str = Field(description="PartitionName")
    default: bool = Field(description="Default=YES: used when a job names no partition")
    state: str = Field(description="State: UP, DOWN, DRAIN or INACTIVE")
    max_time_s: int | None = Field(description="MaxTime, seconds; None if UNLIMITED")
    max_nodes: int | None = Field(description="MaxNodes; None if UNLIMITED")
    total_nodes: int | None = Field(description="TotalNodes")
    max_cpus_per_node: int | None = Field(description="MaxCPUsPerNode; None if UNLIMITED")
    max_mem_per_node_mb: int | None = Field(description="MaxMemPerNode, MiB; None if UNLIMITED")
    allow_accounts: tuple[str, ...] | None = Field(description="AllowAccounts; None if ALL")
    allow_qos: tuple[str, ...] | None = Field(description="AllowQos; None if ALL")
    node_cpus: int | None = Field(None, description="most CPUs (CPUTot) of any of its nodes")
    node_mem_mb: int | None = Field(None, description="most RealMemory of any of its nodes")
    gpus_per_node: int = Field(0, description="most GPUs (GRES gpu) on any of its nodes")
    gpu_types: tuple[str, ...] = Field((), description="GPU types named in its nodes' GRES")

    def cpu_limit(self) -> int | None:
        """Most CPUs a job can get on one node: the partition's cap or the node's size."""
        return _smallest(self.max_cpus_per_node, self.node_cpus)

    def mem_limit_mb(self) -> int | None:
        """Most memory a job can get on one node, MiB."""
        return _smallest(self.max_mem_per_node_mb, self.node_mem_mb)

    def node_limit(self) -> int | None:
        """Most nodes one job can get in this partition."""
        return _smallest(self.max_nodes, self.total_nodes)


def _smallest(*limits: int | None) -> int | None:
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


class Association(_Facts):
    """One row of `sacctmgr show assoc`: the user may charge account on cluster."""

    cluster: str
    account: str
    user: str
    partition: str | None = Field(description="None: the association covers all partitions")
    qos: tuple[str, ...] = Field(description="QoS the association may use")


class ClusterFacts(_Facts):
    """The live facts `site check` compares a SiteConfig with."""

    user: str = Field(description="whose associations these are")
    partitions: dict[str, PartitionFacts] = Field(description="by name, in Slurm's order")
    associations: tuple[Association, ...] = Field(description="the user's associations")

    def clusters(self) -> list[str]:
        """Clusters the user has associations on (accounting may span several)."""
        return unique(a.cluster for a in self.associations)

    def accounts(self, cluster: str | None = None) -> list[str]:
        """Accounts the user may charge (on cluster, if given)."""
        return unique(a.account for a in self._on(cluster))

    def qos(self, cluster: str | None = None) -> list[str]:
        """QoS the user may use under any of their associations (on cluster, if given)."""
        return unique(q for a in self._on(cluster) for q in a.qos)

    def default_partition(self) -> str | None:
        """The partition Slurm uses when a job names none."""
        return next((p.name for p in self.partitions.values() if p.default), None)

    def _on(self, cluster: str | None) -> list[Association]:
        return [a for a in self.associations if cluster is None or a.cluster == cluster]


def unique(items: Iterable[str]) -> list[str]:
    """items without repeats, in their first order."""
    return list(dict.fromkeys(items))


class NodeFacts(_Facts):
    """What one node offers, from `scontrol show node -o`."""

    name: str
    cpus: int
    mem_mb: int
    gpus: int
    gpu_types: tuple[str, ...]
    partitions: tuple[str, ...]

"""What the live cluster says about itself, and the pure parsers that read it.

`jobsmith site check` and `site init` compare a site file with three read-only commands'
output (the CLI runs them; everything here only reads text):

- `scontrol show partition -o`: one line per partition, `Key=Value` pairs;
- `scontrol show node -o`: one line per node; gives each node's CPUs (CPUTot), memory
  (RealMemory), GRES and the partitions it belongs to;
- `sacctmgr -P -n show assoc [user=U] format=Cluster,Account,User,Partition,QOS`: the
  user's associations, `|`-separated.

Slurm prints "UNLIMITED" (or "NONE") for a limit that is not set; those become None.
Output that cannot be read raises SchedulerError naming the command and the line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from jobsmith.adapters.slurm.parse import parse_key_values
from jobsmith.errors import SchedulerError
from jobsmith.site_config.units import parse_duration

_UNSET = {"UNLIMITED", "INFINITE", "NONE", "N/A", "(null)", ""}
# A key starts at the line's start or after whitespace; values may hold spaces (OS=,
# Reason=) and '=' after a non-space (TRES=cpu=2,mem=…; JobDefaults=DefCpuPerGPU=1).
# Commas inside parentheses belong to a GRES socket list, e.g. gpu:a100:2(S:0,1).
_GRES_SPLIT = re.compile(r",(?![^(]*\))")


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
        return _unique(a.cluster for a in self.associations)

    def accounts(self, cluster: str | None = None) -> list[str]:
        """Accounts the user may charge (on cluster, if given)."""
        return _unique(a.account for a in self._on(cluster))

    def qos(self, cluster: str | None = None) -> list[str]:
        """QoS the user may use under any of their associations (on cluster, if given)."""
        return _unique(q for a in self._on(cluster) for q in a.qos)

    def default_partition(self) -> str | None:
        """The partition Slurm uses when a job names none."""
        return next((p.name for p in self.partitions.values() if p.default), None)

    def _on(self, cluster: str | None) -> list[Association]:
        return [a for a in self.associations if cluster is None or a.cluster == cluster]


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def build_facts(
    partitions_text: str, nodes_text: str, assoc_text: str, *, user: str
) -> ClusterFacts:
    """ClusterFacts from the three commands' output (see the module docstring)."""
    partitions = parse_partitions(partitions_text)
    nodes = parse_nodes(nodes_text)
    merged = {name: _with_nodes(part, nodes) for name, part in partitions.items()}
    return ClusterFacts(user=user, partitions=merged, associations=parse_assoc(assoc_text, user))


def parse_partitions(text: str) -> dict[str, PartitionFacts]:
    """Partitions from `scontrol show partition -o` (node facts not yet filled in)."""
    partitions = {}
    for line in _lines(text):
        kv = parse_key_values(line)
        if "PartitionName" not in kv:
            raise _unreadable("scontrol show partition", line, "no PartitionName")
        try:
            part = _partition(kv)
        except (ValueError, PydanticCustomError) as exc:
            raise _unreadable("scontrol show partition", line, str(exc)) from exc
        partitions[part.name] = part
    return partitions


def _partition(kv: dict[str, str]) -> PartitionFacts:
    max_time = kv.get("MaxTime", "UNLIMITED")
    return PartitionFacts(
        name=kv["PartitionName"],
        default=kv.get("Default") == "YES",
        state=kv.get("State", "UNKNOWN"),
        max_time_s=None if max_time in _UNSET else parse_duration(max_time),
        max_nodes=_count(kv.get("MaxNodes")),
        total_nodes=_count(kv.get("TotalNodes")),
        max_cpus_per_node=_count(kv.get("MaxCPUsPerNode")),
        max_mem_per_node_mb=_count(kv.get("MaxMemPerNode")),
        allow_accounts=_names(kv.get("AllowAccounts")),
        allow_qos=_names(kv.get("AllowQos")),
    )


def _count(value: str | None) -> int | None:
    return None if value is None or value in _UNSET else int(value)


def _names(value: str | None) -> tuple[str, ...] | None:
    if value is None or value == "ALL":
        return None
    return tuple(v for v in value.split(",") if v)


class NodeFacts(_Facts):
    """What one node offers, from `scontrol show node -o`."""

    name: str
    cpus: int
    mem_mb: int
    gpus: int
    gpu_types: tuple[str, ...]
    partitions: tuple[str, ...]


def parse_nodes(text: str) -> list[NodeFacts]:
    """Nodes from `scontrol show node -o`."""
    nodes = []
    for line in _lines(text):
        kv = parse_key_values(line)
        try:
            gpus, types = parse_gpu_gres(kv.get("Gres", ""))
            node = NodeFacts(
                name=kv["NodeName"],
                cpus=int(kv["CPUTot"]),
                mem_mb=int(kv["RealMemory"]),
                gpus=gpus,
                gpu_types=types,
                partitions=_names(kv.get("Partitions", "")) or (),
            )
        except (KeyError, ValueError) as exc:
            raise _unreadable("scontrol show node", line, f"bad or missing {exc}") from exc
        nodes.append(node)
    return nodes


def parse_gpu_gres(gres: str) -> tuple[int, tuple[str, ...]]:
    """(GPU count, GPU types) of a node's Gres, e.g. 'gpu:2' or 'gpu:a100:2(S:0-1),mps:100'."""
    count = 0
    types: list[str] = []
    for item in _GRES_SPLIT.split(gres):
        fields = item.split("(", 1)[0].split(":")
        if fields[0] != "gpu" or len(fields) < 2:
            continue
        count += int(fields[-1])
        if len(fields) == 3:
            types.append(fields[1])
    return count, tuple(_unique(types))


def _with_nodes(part: PartitionFacts, nodes: list[NodeFacts]) -> PartitionFacts:
    """part with the largest CPU, memory and GPU figures of the nodes that belong to it."""
    members = [n for n in nodes if part.name in n.partitions]
    if not members:
        return part
    return part.model_copy(
        update={
            "node_cpus": max(n.cpus for n in members),
            "node_mem_mb": max(n.mem_mb for n in members),
            "gpus_per_node": max(n.gpus for n in members),
            "gpu_types": tuple(_unique(t for n in members for t in n.gpu_types)),
        }
    )


def parse_assoc(text: str, user: str) -> tuple[Association, ...]:
    """The user's rows of `sacctmgr -P -n show assoc format=Cluster,Account,User,Partition,QOS`.

    Rows of other users and account-level rows (empty User) are skipped, so the output
    of the command with or without `user=U` reads the same.
    """
    rows = []
    for line in _lines(text):
        fields = line.split("|")
        if len(fields) != 5:
            raise _unreadable("sacctmgr show assoc", line, f"{len(fields)} fields, not 5")
        cluster, account, row_user, partition, qos = fields
        if row_user != user:
            continue
        rows.append(
            Association(
                cluster=cluster,
                account=account,
                user=row_user,
                partition=partition or None,
                qos=tuple(q for q in qos.split(",") if q),
            )
        )
    return tuple(rows)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _unreadable(command: str, line: str, why: str) -> SchedulerError:
    shown = line if len(line) <= 120 else line[:117] + "..."
    return SchedulerError(f"cannot read `{command}` output ({why}): {shown}")

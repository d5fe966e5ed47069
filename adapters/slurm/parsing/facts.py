"""Slurm's own words about the cluster, read into the neutral ClusterFacts (pure parsers).

`jobsmith site check` and `site init` compare a site file with three read-only commands'
output (SlurmScheduler.cluster_facts runs them; everything here only reads text):

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

from pydantic_core import PydanticCustomError

from jobsmith.adapters.slurm.parsing.parse import parse_key_values
from jobsmith.errors import SchedulerError
from jobsmith.site_config.facts import (
    Association,
    ClusterFacts,
    NodeFacts,
    PartitionFacts,
    unique,
)
from jobsmith.units import parse_duration

_UNSET = {"UNLIMITED", "INFINITE", "NONE", "N/A", "(null)", ""}
# Commas inside parentheses belong to a GRES socket list, e.g. gpu:a100:2(S:0,1).
_GRES_SPLIT = re.compile(r",(?![^(]*\))")


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
    for line in output_lines(text):
        kv = parse_key_values(line)
        if "PartitionName" not in kv:
            raise unreadable("scontrol show partition", line, "no PartitionName")
        try:
            part = _partition(kv)
        except (ValueError, PydanticCustomError) as exc:
            raise unreadable("scontrol show partition", line, str(exc)) from exc
        partitions[part.name] = part
    return partitions


def _partition(kv: dict[str, str]) -> PartitionFacts:
    max_time = kv.get("MaxTime", "UNLIMITED")
    return PartitionFacts(
        name=kv["PartitionName"],
        default=kv.get("Default") == "YES",
        state=kv.get("State", "UNKNOWN"),
        max_time_s=None if max_time in _UNSET else parse_duration(max_time),
        max_nodes=limit_count(kv.get("MaxNodes")),
        total_nodes=limit_count(kv.get("TotalNodes")),
        max_cpus_per_node=limit_count(kv.get("MaxCPUsPerNode")),
        max_mem_per_node_mb=limit_count(kv.get("MaxMemPerNode")),
        allow_accounts=_names(kv.get("AllowAccounts")),
        allow_qos=_names(kv.get("AllowQos")),
    )


def limit_count(value: str | None) -> int | None:
    """A limit as Slurm prints it: None where it sets none (UNLIMITED, blank, ...)."""
    return None if value is None or value in _UNSET else int(value)


def _names(value: str | None) -> tuple[str, ...] | None:
    if value is None or value == "ALL":
        return None
    return tuple(v for v in value.split(",") if v)


def parse_nodes(text: str) -> list[NodeFacts]:
    """Nodes from `scontrol show node -o`."""
    nodes = []
    for line in output_lines(text):
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
            raise unreadable("scontrol show node", line, f"bad or missing {exc}") from exc
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
    return count, tuple(unique(types))


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
            "gpu_types": tuple(unique(t for n in members for t in n.gpu_types)),
        }
    )


def parse_assoc(text: str, user: str) -> tuple[Association, ...]:
    """The user's rows of `sacctmgr -P -n show assoc format=Cluster,Account,User,Partition,QOS`.

    Rows of other users and account-level rows (empty User) are skipped, so the output
    of the command with or without `user=U` reads the same.
    """
    rows = []
    for line in output_lines(text):
        fields = line.split("|")
        if len(fields) != 5:
            raise unreadable("sacctmgr show assoc", line, f"{len(fields)} fields, not 5")
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


def output_lines(text: str) -> list[str]:
    """A command's output lines, stripped, blank ones left out."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def unreadable(command: str, line: str, why: str) -> SchedulerError:
    """The error for a line of command's output that cannot be read, naming both."""
    shown = line if len(line) <= 120 else line[:117] + "..."
    return SchedulerError(f"cannot read `{command}` output ({why}): {shown}")

"""The site's limits on one submission: partition, account, QoS and per-partition ceilings.

A request over a limit is refused before anything reaches Slurm, with the rule and the
limit named. (The session runtime adds budgets and approvals on top of these.)
"""

from __future__ import annotations

from jobsmith.adapters.options import JobOptions
from jobsmith.errors import PolicyError
from jobsmith.site_config import SiteConfig
from jobsmith.units import format_time_limit


def check_limits(opts: JobOptions, site: SiteConfig) -> None:
    """Raise PolicyError for the first limit opts breaks."""
    _check_choice("account", opts.account, site.accounts.allowed)
    _check_choice("qos", opts.qos, site.qos.allowed)
    if opts.partition is None:
        raise PolicyError("no partition given and the site config names no default partition")
    part = site.partitions.get(opts.partition)
    if part is None:
        valid = ", ".join(site.partitions) or "none configured"
        raise PolicyError(f"partition {opts.partition!r} is not allowed here; allowed: {valid}")
    where = f"partition {opts.partition!r}"
    _ceiling(
        f"time limit {_t(opts.time_limit_s)}",
        opts.time_limit_s,
        part.max_time,
        f"{where} allows at most {_t(part.max_time)}",
    )
    _ceiling(
        f"{opts.nodes} nodes",
        opts.nodes,
        part.max_nodes,
        f"{where} allows at most {part.max_nodes} nodes",
    )
    _ceiling(
        f"{opts.cpus_per_task} CPUs per task",
        opts.cpus_per_task,
        part.max_cpus_per_node,
        f"{where} has at most {part.max_cpus_per_node} CPUs per node",
    )
    _ceiling(
        f"memory {opts.mem_mb} MiB",
        opts.mem_mb,
        part.max_mem_per_node,
        f"{where} allows at most {part.max_mem_per_node} MiB per node",
    )
    _ceiling(
        f"{opts.gpus} GPUs",
        opts.gpus or None,
        part.max_gpus_per_node,
        f"{where} has {part.max_gpus_per_node} GPUs per node",
    )
    if opts.gpu_type and part.gpu_type and opts.gpu_type != part.gpu_type:
        raise PolicyError(f"GPU type {opts.gpu_type!r}: {where} has {part.gpu_type!r} GPUs")


def _check_choice(what: str, value: str | None, allowed: list[str]) -> None:
    if value is not None and allowed and value not in allowed:
        raise PolicyError(f"{what} {value!r} is not allowed here; allowed: {', '.join(allowed)}")


def _ceiling(request: str, value: int | None, limit: int | None, rule: str) -> None:
    if value is not None and limit is not None and value > limit:
        raise PolicyError(f"{request} refused: {rule}")


def _t(seconds: int | None) -> str:
    return "unset" if seconds is None else format_time_limit(seconds)

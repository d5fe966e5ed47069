"""`jobsmith site init`: a starting SiteConfig built from the live cluster's facts (pure).

The result copies the cluster's own limits (so `site check` finds no error in it) and
leaves policy at the model's conservative defaults; a person is expected to read it and
tighten it. Choices that the facts cannot settle:

- accounts and QoS: all the user's associations allow; a default only when there is
  exactly one account (otherwise none, and Slurm's own default account applies);
- partitions: those that admit at least one of the user's accounts;
- paths: the home directory is an allowed root; scratch defaults to `<home>/scratch`
  unless the caller (which may look at the filesystem) passes the site's scratch.

Where the centre has a site file (`/etc/jobsmith/site.yaml`, a ceiling: ceiling.py), the
user's file is read over it, so beneath_centre() leaves out of the user's file what the
centre's file states: its values apply, and a file that restated the live cluster's
(a partition the centre leaves out, a QoS it does not allow) would be refused on every
later command. The defaults are then fitted to the centre's default partition, and
scratch to its allowed roots.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from jobsmith.errors import ConfigError
from jobsmith.site_config.expand import centre_environ
from jobsmith.site_config.facts import ClusterFacts, PartitionFacts
from jobsmith.site_config.fieldtypes import Dir, file_context
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


#: sections a centre's file states as a whole (ceiling.py: a later file may remove a
#: partition, never add one, and a listed partition's unstated limits are the model's):
#: beneath one, the user's file writes none of its own
_WHOLE = frozenset({("partitions",)})


def beneath_centre(
    config: SiteConfig, centre: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The site-file data of config (init_site's) without what the centre's file (its
    parsed data) states, the defaults fitted to the centre's default partition and
    scratch to the centre's allowed roots (module doc). environ expands the centre's
    paths as the loader will."""
    from jobsmith.site_config.dump import site_data

    data = site_data(config.model_copy(update=_fitted(config, centre, environ)))
    return _unstated(data, centre, ())


def _fitted(
    config: SiteConfig, centre: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """config's defaults and paths, fitted to the partitions and roots the centre states."""
    update: dict[str, Any] = {}
    context = file_context(centre_environ(environ))
    stated = centre.get("partitions")
    if isinstance(stated, dict):
        try:
            partitions = {
                name: Partition.model_validate(limits, context=context)
                for name, limits in stated.items()
                if isinstance(limits, dict)
            }
        except ValidationError:
            partitions = {}  # the loader names the centre's bad value
        update["defaults"] = _defaults(partitions)
    roots = _dig(centre, "paths", "allowed_roots")
    if isinstance(roots, list) and roots:
        try:
            expanded = TypeAdapter(list[Dir]).validate_python(roots, context=context)
        except ValidationError:
            expanded = []
        scratch = config.paths.scratch
        if expanded and not any(scratch.is_relative_to(r) for r in expanded):
            # the centre's roots bound where jobs write: scratch goes where they allow
            update["paths"] = Paths(scratch=expanded[0], allowed_roots=expanded)
    return update


def _unstated(data: dict[str, Any], centre: Any, path: tuple[str, ...]) -> dict[str, Any]:
    """data without every key the centre's data states (a mapping it states is walked
    into, except the _WHOLE ones, which go whole)."""
    if not isinstance(centre, dict):
        return data
    kept: dict[str, Any] = {}
    for key, value in data.items():
        here = (*path, key)
        if key not in centre:
            kept[key] = value
        elif isinstance(value, dict) and here not in _WHOLE:
            inner = _unstated(value, centre[key], here)
            if inner:
                kept[key] = inner
    return kept


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data

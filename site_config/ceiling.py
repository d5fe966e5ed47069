"""The centre's site file is a ceiling: later layers may tighten its limits, never loosen them.

The admin's `/etc/jobsmith/site.yaml` is the centre's word on what jobsmith may do for
its users. The other layers (`--site FILE`, $JOBSMITH_SITE, the user's
~/.config/jobsmith/site.yaml) merge over it as they always did (layers.py), but where the
centre's file states one of the limits below, the merged value may be tighter than the
centre's and never looser, as in Slurm's own limit hierarchy (an association's limit
cannot exceed its parent's). A looser value is refused, not ignored: a person who wrote
it must learn that it does not apply. The ConfigError names the file and line that wrote
it, the field, its value, and the centre's limit with its file and line.

The limits (CEILINGS, the one list of them):

- policy: the approval thresholds and budgets (model tokens included), at most that
  much, and `null` (no limit) is looser than any number; max_concurrent_jobs and
  max_requeues likewise;
  the canary cannot be turned off, start at larger arrays or run fewer tasks; the
  actions that always need a person (approval.risky_actions) and the variables never
  passed to jobs (secret_env) may be added to, never shortened; model.tainted_actions
  `policy` is looser than `person`; the node blocklist (policy.blocklist) is on or off
  as the centre's file says, and where on, may count fewer failures, over a longer
  window, and keep a node out longer, never the reverse (it spares the user's allocation
  and the site's broken nodes, as the canary does; where the centre turned it off, its
  users' jobs exclude no node on their own);
- partitions: which exist (a later layer may remove one with `NAME: null`, never add
  one), and each one's max_time, max_nodes, max_cpus_per_node, max_mem_per_node and
  max_gpus_per_node;
- accounts.allowed and qos.allowed: a later layer may narrow them, but not to an empty
  list, which lets a request name any account or QoS (policy.py's _check_choice);
- scheduler.slurm_conf: the slurm.conf Slurm's commands read is the centre's, where it
  names one (another copy could carry a plugin that rewrites checked jobs); and
  scheduler.adjusts, the changes its plugins make on purpose that are not held against a
  job, may only be fewer (none, where the centre's file declares none);
- jobs.sbatch_options, the sbatch options a user's own script may pass unjudged, may only
  be fewer (none, where the centre's file names none);
- paths.allowed_roots: each root of a later layer must lie within one of the centre's,
  compared resolved (symlinks and `..` followed), as submission resolves paths against
  the roots (agent/runtime/submission/request/jobs.py, job_templates/paths.py).

Only what the centre's file states is a limit. A field it leaves out keeps jobsmith's
default, which a later layer may change: an unset limit is no limit, as in Slurm. A
partition the file lists is stated whole: a limit it leaves out has the model's value
(none, and for max_gpus_per_node, 0: no GPUs).

Everything else is a preference a user sets freely: defaults, env_setup, the rest of
the scheduler block, scratch and template_dirs, the default account, QoS and partition, gpu_type,
notify, staging, advice, budgets.pipeline_at_limit, jobs.environment.allow, jobs.checkpoint,
brain and the rest of `model`.

Without a centre file nothing is a ceiling: the base (`--site`, $JOBSMITH_SITE) and the
user's file are both the user's own choice, so a limit in one could not bind the other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from jobsmith.errors import ConfigError
from jobsmith.site_config.diagnostics import describe_validation_error, dotted
from jobsmith.site_config.fieldtypes import Dir, Name, file_context
from jobsmith.site_config.layers import Provenance, merge_documents
from jobsmith.site_config.model import (
    Choice,
    Compared,
    ModelSettings,
    Partition,
    Policy,
    SiteConfig,
)
from jobsmith.site_config.yamlfile import KeyPath, YamlDocument
from jobsmith.units import format_duration, format_memory

#: how a later value can loosen the centre's:
#: most: a larger number, or None (no limit); least: a smaller number;
#: some_of: a name the centre's list (or mapping) lacks, or an empty list where the
#: centre's is not (an empty accounts.allowed or qos.allowed lets a request name any);
#: all_of: leaving out a name the centre's list has;
#: within: a directory outside every one of the centre's; kept: None where the centre
#: set one; ranked: a later entry of Ceiling.ranks (strictest first); fewer_of: a name
#: the centre's list lacks (an empty list is the strictest); same: any other value;
#: switch: on (a value) where the centre's is off (None), or off where it is on
Kind = Literal[
    "most", "least", "some_of", "all_of", "within", "kept", "ranked", "fewer_of", "same", "switch"
]

#: a partition the centre's file lists, in a Ceiling's path
EACH = "*"


def _number(value: float) -> str:
    """100.0 as 100, 0.5 as 0.5: as a person wrote it in the file."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


@dataclass(frozen=True)
class Ceiling:
    """One limit of the centre's file: where it is and what loosens it."""

    path: KeyPath
    kind: Kind
    show: Callable[[Any], str] = _number
    ranks: tuple[str, ...] = ()
    #: a limit even where the centre's file is silent: its default is the strictest
    always: bool = False


def _at_most(*path: str) -> Ceiling:
    """A number in policy (None: no limit) a later layer may lower, never raise."""
    return Ceiling(("policy", *path), "most")


def _partition(field: str, show: Callable[[Any], str] = _number) -> Ceiling:
    return Ceiling(("partitions", EACH, field), "most", show)


CEILINGS: tuple[Ceiling, ...] = (
    _at_most("max_concurrent_jobs"),
    _at_most("max_requeues"),
    _at_most("approval", "core_hours"),
    _at_most("approval", "gpu_hours"),
    _at_most("approval", "nodes"),
    Ceiling(("policy", "approval", "risky_actions"), "all_of"),
    _at_most("budgets", "node_hours_per_day"),
    _at_most("budgets", "gpu_hours_per_day"),
    _at_most("budgets", "submissions_per_hour"),
    _at_most("budgets", "max_failures_in_a_row"),
    _at_most("budgets", "model_tokens_per_session"),
    _at_most("budgets", "model_tokens_per_day"),
    Ceiling(("policy", "canary"), "kept"),
    _at_most("canary", "above_tasks"),
    Ceiling(("policy", "canary", "tasks"), "least"),
    Ceiling(("policy", "secret_env"), "all_of"),
    Ceiling(("policy", "blocklist"), "switch"),
    _at_most("blocklist", "failures"),
    Ceiling(("policy", "blocklist", "window"), "least", format_duration),
    Ceiling(("policy", "blocklist", "expires_after"), "least", format_duration),
    Ceiling(("model", "tainted_actions"), "ranked", ranks=("person", "policy")),
    Ceiling(("partitions",), "some_of"),
    _partition("max_time", format_duration),
    _partition("max_nodes"),
    _partition("max_cpus_per_node"),
    _partition("max_mem_per_node", format_memory),
    _partition("max_gpus_per_node"),
    Ceiling(("accounts", "allowed"), "some_of"),
    Ceiling(("qos", "allowed"), "some_of"),
    Ceiling(("paths", "allowed_roots"), "within"),
    Ceiling(("scheduler", "slurm_conf"), "same", str),
    Ceiling(("scheduler", "adjusts"), "fewer_of", always=True),
    Ceiling(("jobs", "sbatch_options"), "fewer_of", always=True),
)


class _Roots(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    allowed_roots: list[Dir] | None = None


class _Slurm(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    slurm_conf: Dir | None = None
    adjusts: list[Compared] = []


class _Stated(BaseModel):
    """The sections of the centre's file that hold limits, read alone with the site's
    own types (a centre file may leave any of them to other layers)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    partitions: dict[Name, Partition | None] | None = None
    accounts: Choice | None = None
    qos: Choice | None = None
    paths: _Roots | None = None
    scheduler: _Slurm = _Slurm()
    policy: Policy | None = None
    model: ModelSettings | None = None


def check_ceilings(
    centre: YamlDocument,
    config: SiteConfig,
    provenance: Provenance,
    environ: Mapping[str, str],
) -> None:
    """Raise ConfigError for the first value of config looser than centre states.

    config is the validated merge of every layer, centre first; provenance says which
    file set each of its values.
    """
    limits = _read_limits(centre, environ)
    centre_origins = merge_documents([centre])[1]
    for ceiling in CEILINGS:
        stated = [ceiling.path] if ceiling.always else _stated_paths(ceiling.path, centre.data)
        for path in stated:
            limit, value = _at(limits, path), _at(config, path)
            if limit is _ABSENT or value is _ABSENT:
                continue  # a partition a later layer removed, a canary turned off
            for where, problem in _loosenings(ceiling, path, value, limit):
                origin = _later_origin(provenance, where, centre.file)
                centre_at = ", ".join(str(o) for o in centre_origins.origins_of(path))
                raise ConfigError(
                    f"{origin}: {dotted(where)}: {problem} ({centre_at}); a site file may "
                    "tighten the centre's limits, never loosen them"
                )


def _read_limits(centre: YamlDocument, environ: Mapping[str, str]) -> _Stated:
    try:
        return _Stated.model_validate(centre.data, context=file_context(environ))
    except ValidationError as exc:
        # reached only when a later layer replaced the centre's bad value: the merged
        # config validated, but a limit that does not parse limits nothing
        _, provenance = merge_documents([centre])
        message = describe_validation_error(exc, _Stated, provenance, [centre.file])
        raise ConfigError(message) from exc


def _stated_paths(pattern: KeyPath, data: Mapping[str, Any]) -> Iterator[KeyPath]:
    """The paths matching pattern that the centre's file states: EACH stands for every
    partition it lists, and a listed partition states all its fields."""
    if EACH in pattern:
        at = pattern.index(EACH)
        entries = _raw_at(data, pattern[:at])
        if isinstance(entries, dict):
            for name, entry in entries.items():
                if isinstance(entry, dict):
                    yield (*pattern[:at], name, *pattern[at + 1 :])
        return
    if _raw_at(data, pattern) is not _ABSENT:
        yield pattern


_ABSENT: Any = object()


def _raw_at(data: Any, path: KeyPath) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return _ABSENT
        data = data[key]
    return data


def _at(value: Any, path: KeyPath) -> Any:
    """The value at path in a model (or mapping); _ABSENT where there is none."""
    for key in path:
        if isinstance(value, dict):
            value = value.get(key, _ABSENT)
        elif isinstance(value, BaseModel) and isinstance(key, str):
            value = getattr(value, key, _ABSENT)
        else:
            return _ABSENT  # below a None (a canary turned off) or a scalar
        if value is _ABSENT:
            return _ABSENT
    return value


def _loosenings(
    ceiling: Ceiling, path: KeyPath, value: Any, limit: Any
) -> Iterator[tuple[KeyPath, str]]:
    """(where, what is looser) for each way value loosens limit."""
    show = ceiling.show
    if ceiling.kind == "most" and limit is not None:
        if value is None:
            yield path, f"no limit (null) is looser than {show(limit)}, the centre's limit"
        elif value > limit:
            yield path, f"{show(value)} is above {show(limit)}, the centre's limit"
    elif ceiling.kind == "least" and value < limit:
        yield path, f"{show(value)} is below {show(limit)}, the centre's minimum"
    elif ceiling.kind == "switch" and (limit is None) != (value is None):
        if value is None:
            yield path, "off (null) turns off what the centre's file turns on"
        else:
            yield path, "on, where the centre's file turns it off (null)"
    elif ceiling.kind == "kept" and limit is not None and value is None:
        yield path, f"no canary (null) turns off the centre's ({_describe_canary(limit)})"
    elif ceiling.kind == "ranked" and ceiling.ranks.index(value) > ceiling.ranks.index(limit):
        yield path, f"{value!r} is looser than the centre's {limit!r}"
    elif ceiling.kind == "some_of":
        shown = ", ".join(limit)
        if limit and not value:  # an empty accounts.allowed lets a request name any
            yield path, f"an empty list allows any, looser than the centre's ({shown})"
        for name in value:
            if name not in limit:
                where = (*path, name) if isinstance(value, dict) else path
                yield where, f"{name!r} is not in the centre's {dotted(path)} ({shown})"
    elif ceiling.kind == "fewer_of":
        for name in value:
            if name not in limit:
                shown = ", ".join(map(str, limit)) or "none"
                yield path, f"{str(name)!r} is not in the centre's {dotted(path)} ({shown})"
    elif ceiling.kind == "same" and value != limit:
        given, shown = ("the system's" if v is None else show(v) for v in (value, limit))
        yield path, f"{given} is not the centre's {dotted(path)} ({shown})"
    elif ceiling.kind == "all_of":
        kept = {str(name).casefold() for name in value}
        for name in limit:
            if str(name).casefold() not in kept:
                yield path, f"leaves out {name!r}, which the centre's list has ({', '.join(limit)})"
    elif ceiling.kind == "within":
        roots = [Path(os.path.realpath(root)) for root in limit]
        for index, root in enumerate(value):
            real = Path(os.path.realpath(root))
            if not any(real.is_relative_to(r) for r in roots):
                resolved = f" (resolves to {real})" if real != root else ""
                shown = ", ".join(str(r) for r in limit)
                problem = f"{root}{resolved} is not within the centre's allowed_roots ({shown})"
                yield (*path, index), problem


def _describe_canary(canary: Any) -> str:
    return f"above_tasks {canary.above_tasks}, tasks {canary.tasks}"


def _later_origin(provenance: Provenance, path: KeyPath, centre: Path) -> str:
    """FILE:LINE of the layer after the centre's that set the value at path."""
    later = [o for o in provenance.origins_of(path) if o.file != centre]
    return str(later[0]) if later else "a site file"

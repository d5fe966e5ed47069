"""The Snakemake profile (`config.yaml`) generated from the site's resolved policy.

Every value here reaches Snakemake twice interpreted: the profile's scalars go through
`os.path.expandvars`, and `default-resources` values are evaluated as Python expressions
(snakemake/resources.py, `cli_evaluator`) before they become sbatch options. Site strings
(partition, account, QoS) are therefore written as Python string literals with `$`
escaped, so a hostile name stays a name: neither a YAML key, nor code, nor a variable.
"""

from __future__ import annotations

import io
import math
from typing import Any

from ruamel.yaml import YAML

from jobsmith.adapters.workflow import EngineSite, PartitionLimits

#: under the launch directory; one profile for every attempt (it depends on the site only)
PROFILE_DIR = ".jobsmith/profile"
PROFILE_FILE = f"{PROFILE_DIR}/config.yaml"
#: the plugin writes efficiency_report_<run uuid>.csv into this directory
EFFICIENCY_DIR = ".jobsmith/efficiency"


def python_literal(value: str) -> str:
    """A Python string literal Snakemake's resource evaluation turns back into `value`.

    `$` becomes `\\x24` inside the literal, because Snakemake expands environment
    variables in the expression text before it evaluates it.
    """
    return repr(value).replace("$", "\\x24")


def doubling(base: int, cap: int | None) -> str:
    """An expression of Snakemake's `attempt` (1, 2, …): base, twice that, … up to `cap`.

    The site's retries are meant for tasks killed for memory or time; a retry that asks
    for the same again would be killed again.
    """
    grown = f"{base} * 2 ** (attempt - 1)"
    return grown if cap is None else f"min({grown}, {max(cap, base)})"


def _limits(site: EngineSite) -> PartitionLimits | None:
    return next((p for p in site.partitions if p.name == site.partition), None)


def default_resources(site: EngineSite) -> dict[str, Any]:
    """The plugin's resources every rule gets unless the rule sets its own."""
    limits = _limits(site)
    max_mem = limits.max_mem_mb if limits else None
    max_minutes = limits.max_time_s // 60 if limits and limits.max_time_s else None
    resources: dict[str, Any] = {"slurm_partition": python_literal(site.partition)}
    if site.account:
        resources["slurm_account"] = python_literal(site.account)
    if site.qos:
        # the resource, not the plugin's `slurm-qos` setting: top-level profile scalars are
        # expanded as variables and rewritten to a path when a file of that name exists
        resources["qos"] = python_literal(site.qos)
    resources["mem_mb"] = doubling(site.default_mem_mb, max_mem)
    # Snakemake's `runtime` is in minutes (the plugin passes it to sbatch -t)
    resources["runtime"] = doubling(max(1, math.ceil(site.default_time_s / 60)), max_minutes)
    if site.default_cpus > 1:
        # a rule's own `threads` still wins when it asks for more
        resources["cpus_per_task"] = f"max(threads, {site.default_cpus})"
    return resources


#: the limiter's window, seconds. Snakemake (9.27) re-checks the limit after each
#: scheduling pass with a threading.Timer of the whole window, not a daemon thread: the
#: process cannot exit before the last one fires. With an hour's window a finished run's
#: head job lingered for up to an hour (seen on the lab cluster); with 10 s it is 10 s.
RATE_WINDOW_S = 10


def rate_limit(per_hour: int) -> str:
    """The hourly submission budget as Snakemake's limiter (`N/Ts`; retries and local jobs
    count too): never more than per_hour in an hour, in windows of RATE_WINDOW_S, or one
    job per longer window where the budget is below one per window."""
    per_window = per_hour * RATE_WINDOW_S // 3600
    if per_window >= 1:
        return f"{per_window}/{RATE_WINDOW_S}s"
    return f"1/{-(-3600 // per_hour)}s"


def profile(site: EngineSite) -> dict[str, Any]:
    """The profile's keys, as Snakemake's command-line options without the dashes."""
    rate: dict[str, Any] = {}
    if site.submissions_per_hour:
        rate["max-jobs-per-timespan"] = rate_limit(site.submissions_per_hour)
    return {
        "executor": "slurm",
        "jobs": site.max_concurrent_tasks,
        **rate,
        "default-resources": default_resources(site),
        # Snakemake retries every failure, not only kills for memory or time (which the
        # doubling above is for): a rule that fails for good costs max_retries more jobs
        "retries": site.max_retries,
        # a run the head job lost mid-rule (time limit, scancel) left incomplete outputs
        "rerun-incomplete": True,
        # independent samples go on after one fails: the resume then has less to do, and
        # the agent reports the failure at once from the console anyway
        "keep-going": True,
        "printshellcmds": True,
        # per-job MaxRSS and CPU efficiency from sacct, once at the end (one query)
        "slurm-efficiency-report": True,
        "slurm-efficiency-report-path": EFFICIENCY_DIR,
        # the plugin deletes a successful job's Slurm log at once; the agent reads task
        # logs there (EngineTask.log), and the plugin still prunes them after 10 days
        "slurm-keep-successful-logs": True,
    }


def profile_yaml(site: EngineSite) -> str:
    """`profile(site)` as YAML text; values are quoted scalars, never keys."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    out = io.StringIO()
    yaml.dump(profile(site), out)
    return out.getvalue()

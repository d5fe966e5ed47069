"""The `nextflow.config` jobsmith writes for a launch: the site's Slurm policy for the tasks.

It is passed with `-c`, so its settings take precedence over the generic `process { … }`
settings of the pipeline's own `nextflow.config` while the pipeline's `withLabel`/`withName`
selectors and its processes' own directives still refine them. What it sets, from
`EngineSite` only:

- every task goes to Slurm, charged to the site's account and QoS (`clusterOptions`);
- the partition: where the site allows several partitions with known maxima, `queue` is a
  closure that picks, per task, the site's own partition if the task's cpus, memory and
  time fit it, else the first other allowed partition (in the site's order) that fits,
  else the site's partition anyway (Slurm then says why it cannot run). A partition whose
  maxima are unknown fits every task: the ones after it are never tried, and a site's own
  partition without maxima takes every task. Choosing by resources rather than by nf-core
  labels (`process_long`, `process_high_memory`) works for any pipeline, since labels only
  set resources and resources are what a partition limits;
- defaults (cpus, memory, time) for processes that set none; memory and time double on
  every retry, capped at the largest partition maxima, and `resourceLimits` caps whatever
  the pipeline asks for at those same maxima;
- retry a task killed for memory (exit 137) or time (140), `maxRetries` times; any other
  failure terminates the run, so a person sees it at once rather than after the rest;
- how many tasks are queued at once (`queueSize`) and how fast they are submitted
  (`submitRateLimit`, `N/1h` from the hourly budget);
- the trace (raw units: bytes and milliseconds, exact and unambiguous to parse), the report
  and the timeline, per attempt, overwritten if they exist.

Every value that comes from the site is a Groovy string literal (groovy.string_literal).
Slurm names must also be single words without control characters: Nextflow writes them
into `#SBATCH` lines of each task's script, where a line break would start a shell command.
"""

from __future__ import annotations

from jobsmith.adapters.nextflow.files import AttemptFiles
from jobsmith.adapters.nextflow.groovy import string_literal
from jobsmith.adapters.nextflow.units import duration_literal, memory_literal
from jobsmith.adapters.workflow import EngineSite, PartitionLimits

#: exit statuses worth a retry with more resources: killed for memory (128+9), for time
RETRY_EXIT_STATUSES = (137, 140)

#: the trace's columns: Nextflow's defaults plus what tells attempts, resources and places apart
TRACE_FIELDS = (
    "task_id",
    "hash",
    "native_id",
    "process",
    "tag",
    "name",
    "status",
    "exit",
    "attempt",
    "error_action",
    "queue",
    "cpus",
    "memory",
    "time",
    "submit",
    "start",
    "complete",
    "duration",
    "realtime",
    "%cpu",
    "peak_rss",
    "peak_vmem",
    "workdir",
)


def slurm_word(value: str, what: str) -> str:
    """`value` if it can stand in an `#SBATCH` line as one word; ValueError otherwise."""
    if not value or any(char.isspace() or not char.isprintable() for char in value):
        raise ValueError(f"{what} {value!r} is not a single word Slurm can be given")
    return value


def _cluster_options(site: EngineSite) -> str | None:
    options = []
    if site.account:
        options.append(f"--account={slurm_word(site.account, 'account')}")
    if site.qos:
        options.append(f"--qos={slurm_word(site.qos, 'QoS')}")
    return " ".join(options) or None


def _largest(values: list[int | None]) -> int | None:
    known = [value for value in values if value]
    return max(known) if known else None


def _maxima(site: EngineSite) -> tuple[int | None, int | None, int | None]:
    """The largest cpus, memory (MiB) and time (s) any allowed partition offers."""
    parts = site.partitions
    return (
        _largest([p.max_cpus for p in parts]),
        _largest([p.max_mem_mb for p in parts]),
        _largest([p.max_time_s for p in parts]),
    )


def _fit_condition(limits: PartitionLimits) -> str | None:
    """A Groovy condition that a task fits `limits`; None if it has no known limit."""
    tests = []
    if limits.max_cpus:
        tests.append(f"task.cpus <= {limits.max_cpus}")
    if limits.max_mem_mb:
        tests.append(f"(!task.memory || task.memory.toMega() <= {limits.max_mem_mb})")
    if limits.max_time_s:
        tests.append(f"(!task.time || task.time.toSeconds() <= {limits.max_time_s})")
    return " && ".join(tests) or None


def _candidates(site: EngineSite) -> list[PartitionLimits]:
    """The partitions in the order the queue closure tries them: the site's own first."""
    own = [p for p in site.partitions if p.name == site.partition]
    others = [p for p in site.partitions if p.name != site.partition]
    return [*(own or [PartitionLimits(name=site.partition)]), *others]


def _queue(site: EngineSite) -> str:
    """`queue = …`: a literal, or a closure when a task may need another partition."""
    for name in (site.partition, *(limits.name for limits in site.partitions)):
        slurm_word(name, "partition")
    tried: list[str] = []
    fallback = site.partition
    for limits in _candidates(site):
        condition = _fit_condition(limits)
        if condition is None:  # fits every task: the partitions after it are never needed
            fallback = limits.name
            break
        tried.append(f"        {condition} ? {string_literal(limits.name)} :")
    if not tried:
        return string_literal(fallback)
    return "\n".join(["{", *tried, f"        {string_literal(fallback)}", "    }"])


def _doubling(base: str, cap: str | None) -> str:
    scaled = f"{base} * (2 ** (task.attempt - 1))"
    return f"{{ [{scaled}, {cap}].min() }}" if cap else f"{{ {scaled} }}"


def _process(site: EngineSite) -> list[str]:
    max_cpus, max_mem, max_time = _maxima(site)
    mem_cap = memory_literal(max_mem) if max_mem else None
    time_cap = duration_literal(max_time) if max_time else None
    retry = ", ".join(str(status) for status in RETRY_EXIT_STATUSES)
    lines = [
        "process {",
        "    executor = 'slurm'",
        f"    queue = {_queue(site)}",
    ]
    options = _cluster_options(site)
    if options:
        lines.append(f"    clusterOptions = {string_literal(options)}")
    lines += [
        f"    cpus = {min(site.default_cpus, max_cpus or site.default_cpus)}",
        f"    memory = {_doubling(memory_literal(site.default_mem_mb), mem_cap)}",
        f"    time = {_doubling(duration_literal(site.default_time_s), time_cap)}",
        f"    errorStrategy = {{ task.exitStatus in [{retry}] ? 'retry' : 'terminate' }}",
        f"    maxRetries = {site.max_retries}",
    ]
    limits = [
        f"cpus: {max_cpus}" if max_cpus else None,
        f"memory: {mem_cap}" if mem_cap else None,
        f"time: {time_cap}" if time_cap else None,
    ]
    known = [limit for limit in limits if limit]
    if known:
        lines.append(f"    resourceLimits = [{', '.join(known)}]")
    return [*lines, "}"]


def _executor(site: EngineSite) -> list[str]:
    lines = ["executor {", "    name = 'slurm'", f"    queueSize = {site.max_concurrent_tasks}"]
    if site.submissions_per_hour:
        lines.append(f"    submitRateLimit = '{site.submissions_per_hour}/1h'")
    return [*lines, "}"]


def _records(files: AttemptFiles) -> list[str]:
    lines = [
        "trace {",
        "    enabled = true",
        f"    file = {string_literal(files.trace)}",
        "    overwrite = true",
        "    raw = true",
        f"    fields = {string_literal(','.join(TRACE_FIELDS))}",
        "}",
    ]
    for scope, path in (("report", files.report), ("timeline", files.timeline)):
        lines += [
            f"{scope} {{",
            "    enabled = true",
            f"    file = {string_literal(path)}",
            "    overwrite = true",
            "}",
        ]
    return lines


def render_config(site: EngineSite, files: AttemptFiles) -> str:
    """The text of the config for this attempt (module docstring); ValueError on bad names."""
    header = [
        f"// Written by jobsmith for launch attempt {files.attempt}: the site's Slurm policy",
        "// for this pipeline's tasks. Passed with -c; edits are overwritten on the next launch.",
        "",
    ]
    body = [*_process(site), "", *_executor(site), "", *_records(files)]
    return "\n".join([*header, *body, ""])

"""Plans: several jobs and the dependencies between them, run as Slurm's own dependencies.

A plan is a small YAML document of named steps, each a job from a template (its
parameters and resources, as `submit` takes them) and the steps it waits for:

    name: transcode
    steps:
      chunks:
        template: ffmpeg_chunks
        params: {input: clip.mp4, output_dir: chunks, duration_s: 12, chunk_seconds: 4}
        time: "30:00"
        mem: 2G
      join:
        template: ffmpeg_concat
        params: {chunk_dir: chunks, chunks: 3, output: clip.mkv}
        after_ok: [chunks]

A step's resources take sbatch's names and units, as `submit` does (docs/sbatch-options.md):
partition, account, qos, time, mem, cpus_per_task, gpus (per job), gpus_per_node, nodes,
ntasks, ntasks_per_node, job_name, array ('0-9%2'), constraint, exclude, log_dir. Files
written before (`mem_mb`, `time_limit_s`) still load, with a note naming the new field.
Only the file speaks these names: a step inside jobsmith (a RunPlan in a session log, what
the model sends) keeps the JobFields names, where `gpus` counts per node (read_plan_file,
plan_text).

Fan-out is an array template (one step, many tasks); fan-in is a step waiting for
several. `jobsmith plan run` submits every step at once, in dependency order, each with
`--dependency` on the job ids of the steps it waits for (known, since those were
submitted first): Slurm holds and releases them, nothing of ours waits. The executor
runs a plan as one step (agent/runtime/submission/executor.py: policy and approval for the plan as
a whole, each job a submit step of its own, so crash recovery covers each).

Everything here is pure: reading and checking the document, the order, each step's
request given the job ids of the steps before it, and the text a person approves.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from jobsmith.adapters.capabilities import OwnScripts
from jobsmith.adapters.options import Dependency, DependencyKind
from jobsmith.agent.runtime.submission.request.jobs import JobFields, JobRequest, split_array
from jobsmith.agent.runtime.submission.request.user_scripts import read_request
from jobsmith.errors import InputError
from jobsmith.site_config.diagnostics import describe_validation_error
from jobsmith.site_config.fieldtypes import Name
from jobsmith.site_config.layers import Provenance
from jobsmith.site_config.yamlfile import DocumentKind, YamlDocument, read_yaml
from jobsmith.text import slurm_word
from jobsmith.units import format_duration, format_memory, parse_duration, parse_memory
from jobsmith.workload_caps import MAX_PLAN_STEPS, OverCap, check_count

PLAN_FILE = DocumentKind("plan file", "name:, steps:", InputError)
#: a plan larger than this is a workflow engine's job (jobsmith/workload_caps.py)
MAX_STEPS = MAX_PLAN_STEPS

#: the plan file's words for each dependency, in the order they are written
_KINDS: dict[str, DependencyKind] = {
    "after_ok": DependencyKind.AFTEROK,
    "after_any": DependencyKind.AFTERANY,
    "after_not_ok": DependencyKind.AFTERNOTOK,
}


class PlanStep(JobFields):
    """One job of a plan: what `submit` takes, and the steps it waits for."""

    # built when a plan is first read, not by every command that imports it (issue 26)
    model_config = ConfigDict(defer_build=True)

    after_ok: list[Name] = Field(default_factory=list, description="start when these succeeded")
    after_any: list[Name] = Field(default_factory=list, description="start when these ended")
    after_not_ok: list[Name] = Field(default_factory=list, description="start if these failed")

    def waits_for(self) -> list[str]:
        """Every step this one waits for, in the order written."""
        return [*self.after_ok, *self.after_any, *self.after_not_ok]


class Plan(BaseModel):
    """A plan document (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: Name = Field(description="the plan's name (sessions and job names show it)")
    steps: dict[Name, PlanStep] = Field(
        min_length=1, max_length=MAX_STEPS, description="the jobs, by name"
    )

    @model_validator(mode="after")
    def _dependencies_are_steps_without_cycles(self) -> Plan:
        # "site_config": the error's own words are shown as they are (diagnostics.py)
        for name, step in self.steps.items():
            unknown = [d for d in step.waits_for() if d not in self.steps]
            if unknown:
                valid = ", ".join(self.steps)
                said = f"step {name} waits for {unknown[0]}, which is no step (steps: {valid})"
                raise PydanticCustomError("site_config", said)
            if name in step.waits_for():
                raise PydanticCustomError("site_config", f"step {name} waits for itself")
        try:
            self.order()
        except ValueError as exc:
            raise PydanticCustomError("site_config", str(exc)) from None
        return self

    def order(self) -> list[str]:
        """The steps, each after every step it waits for (else in the order written): of
        the steps ready, always the one written first. Kahn's algorithm over a heap of
        written positions, O(edges + steps log steps) (the first version rescanned every
        step per step, worse than quadratic: issue 24)."""
        position = {name: i for i, name in enumerate(self.steps)}
        waiting = {name: len(set(step.waits_for())) for name, step in self.steps.items()}
        waited_by: dict[str, list[str]] = {name: [] for name in self.steps}
        for name, step in self.steps.items():
            for dep in set(step.waits_for()):
                if dep in waited_by:
                    waited_by[dep].append(name)
        ready = [position[n] for n, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        names = list(self.steps)
        done: list[str] = []
        while ready:
            name = names[heapq.heappop(ready)]
            done.append(name)
            for later in waited_by[name]:
                waiting[later] -= 1
                if waiting[later] == 0:
                    heapq.heappush(ready, position[later])
        if len(done) < len(names):
            finished = set(done)
            left = [n for n in names if n not in finished]
            raise ValueError(f"steps {', '.join(left)} wait for each other in a cycle")
        return done

    def request(self, name: str, job_ids: Mapping[str, str | tuple[str, ...]]) -> JobRequest:
        """Step name's request, waiting for job_ids[d] of each step d it waits for (a step
        whose job id is not given yet is left out: `check` renders without it). A step fed
        in parts has several jobs (feeding/followers.py): all of them are waited for."""
        step = self.steps[name]
        dependencies = []
        for field, kind in _KINDS.items():
            given = [job_ids[d] for d in getattr(step, field) if d in job_ids]
            ids = tuple(i for g in given for i in ((g,) if isinstance(g, str) else g))
            if ids:
                dependencies.append(Dependency(kind=kind, job_ids=ids))
        fields = step.model_dump(exclude={"after_ok", "after_any", "after_not_ok"})
        return JobRequest(**fields, dependencies=tuple(dependencies))

    def depth(self, name: str) -> int:
        """How many steps deep name is (0: waits for none): the tree's indentation."""
        return self._depths[name]

    @cached_property
    def _depths(self) -> dict[str, int]:
        """Every step's depth, once, in dependency order (a recursion without memory was
        exponential: a 30-step plan, each step waiting on all earlier ones, never ended)."""
        depths: dict[str, int] = {}
        for name in self.order():
            waits = self.steps[name].waits_for()
            depths[name] = 0 if not waits else 1 + max(depths[d] for d in waits)
        return depths

    def edges(self, name: str) -> dict[str, list[str]]:
        """The step's dependencies by kind, as written (for documents)."""
        step = self.steps[name]
        return {field: list(getattr(step, field)) for field in _KINDS if getattr(step, field)}


def plan_name(kind: str, path: Path) -> str:
    """A plan's name made from a file's: `KIND_STEM`, the stem cut to what a Slurm name
    may hold: accents dropped (scène -> scene), any other character '_', and a stem with
    no ASCII letter or digit left (映画.mp4) named by its hash instead (an accented name
    crashed building the plan: issue 24)."""
    return f"{kind}_{slurm_word(path.stem)}"


#: a plan file's resource names that differ from the step's field (sbatch's names, as the
#: CLI's): the field, and the reader of its value (None: taken as it is)
_FILE_NAMES: dict[str, tuple[str, Callable[[object], int] | None]] = {
    "time": ("time_limit_s", parse_duration),
    "mem": ("mem_mb", parse_memory),
    "gpus": ("gpus_per_job", None),
    "gpus_per_node": ("gpus", None),
}
#: names plan files had before issue 25, still read, and the name that replaces each
_OLD_NAMES = {"time_limit_s": ("time", "time: 1:00:00"), "mem_mb": ("mem", "mem: 4G")}


def load_plan(path: Path) -> Plan:
    """The plan in path; InputError naming the file, line and field on any problem."""
    return read_plan_file(path)[0]


def read_plan_file(path: Path, scripts: ScriptSource | None = None) -> tuple[Plan, tuple[str, ...]]:
    """The plan in path and a note for each older field name it still uses (the caller
    shows them); InputError naming the file, line and field on any problem. scripts: how
    a step's `script:` is read (none: such a step is refused)."""
    doc = read_yaml(path, PLAN_FILE)
    steps = doc.data.get("steps") if isinstance(doc.data, dict) else None
    old: dict[str, list[str]] = {}
    data = doc.data
    if isinstance(steps, dict):
        try:  # before each step is read (the model checks it too, after)
            check_count(len(steps), MAX_STEPS, "steps", "a larger workflow is a workflow engine's")
        except OverCap as exc:
            raise InputError(f"{path}: {exc}") from None
        read = {
            name: _file_step(doc, str(name), step, old, scripts) for name, step in steps.items()
        }
        data = {**doc.data, "steps": read}
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        provenance = Provenance()
        provenance.record(doc, ())
        message = describe_validation_error(exc, Plan, provenance, [path], PLAN_FILE.name)
        raise InputError(message) from None
    notes = tuple(
        f"{path}: {field} (step {', '.join(names)}) still loads, but the field is now "
        f"{_OLD_NAMES[field][0]}, in Slurm's units as submit takes them ({_OLD_NAMES[field][1]})"
        for field, names in old.items()
    )
    return plan, notes


@dataclass(frozen=True)
class ScriptSource:
    """How a plan step's `script: FILE` is read: the scheduler's reader of batch scripts
    and the sbatch options the site passes as written (user_scripts.read_request)."""

    reader: OwnScripts
    site_allows: tuple[str, ...] = ()


def _file_keys() -> list[str]:
    """A plan file step's keys, in the order the fields are declared (older names left out)."""
    renamed = {field: key for key, (field, _) in _FILE_NAMES.items()}
    return [renamed.get(f, f) for f in PlanStep.model_fields] + ["args"]


def _file_step(
    doc: YamlDocument,
    name: str,
    step: object,
    old: dict[str, list[str]],
    scripts: ScriptSource | None = None,
) -> object:
    """A step as the file has it, in the step's field names: sbatch's names and units
    read, an older name kept and listed in old, a `script:` file read with its `#SBATCH`
    lines (the step's own fields win over them, as sbatch's command line does)."""
    if not isinstance(step, dict):
        return step  # the model's own error names it

    def fault(key: str, said: str) -> InputError:
        line = doc.lines.get(("steps", name, key))
        where = f"{doc.file}:{line}" if line else str(doc.file)
        return InputError(f"{where}: steps.{name}.{key}: {said}")

    valid = _file_keys()
    for key in step:
        if key not in valid and key not in _OLD_NAMES:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise fault(key, f"unknown key {key!r}{hint}; valid keys here: {', '.join(valid)}")
    out = {k: v for k, v in step.items() if k not in _FILE_NAMES and k != "array"}
    for key, (field, parse) in _FILE_NAMES.items():
        if key not in step:
            continue
        if field in step and field not in _FILE_NAMES:
            raise fault(key, f"given twice, as {key} and as {field} (its older name): keep {key}")
        try:
            out[field] = parse(step[key]) if parse else step[key]
        except PydanticCustomError as exc:
            raise fault(key, str(exc)) from None
    if "array" in step:
        try:
            spec, throttle = split_array(str(step["array"]), step.get("array_throttle"))
        except InputError as exc:
            raise fault("array", str(exc)) from None
        out.update(array=spec, array_throttle=throttle)
    for field in _OLD_NAMES:
        if field in step:
            old.setdefault(field, []).append(name)
    if isinstance(step.get("script"), str):
        out = _script_step(doc.file.parent, step, out, scripts, fault)
    elif "args" in step:
        raise fault("args", "args go with script: FILE (a template takes parameters)")
    return out


def _script_step(
    base: Path,
    step: Mapping[str, Any],
    out: dict[str, Any],
    scripts: ScriptSource | None,
    fault: Callable[[str, str], InputError],
) -> dict[str, Any]:
    """A step naming its own batch script: the script's request (its directives) under the
    step's own fields; the script's path is relative to the plan file."""
    if "template" in step:
        raise fault("script", "a step names a template or a script, not both")
    if scripts is None:
        raise fault("script", "this site's scheduler cannot read batch scripts")
    args = step.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) for a in args):
        raise fault("args", "expected a list of words, e.g. [sample1, 8]")
    words = ["--", str(step["script"]), *(str(a) for a in args)]
    try:
        request = read_request(scripts.reader, words, scripts.site_allows, base).request
    except InputError as exc:
        raise fault("script", str(exc)) from None
    if request.dependencies:
        raise fault("script", "its --dependency is the plan's to say: use after_ok and the like")
    given = request.model_dump(exclude_none=True, exclude={"dependencies", "params"})
    kept = {k: v for k, v in out.items() if k not in ("script", "args")}
    return {**given, **kept}


def file_step(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A step's fields (as model_dump gives them) in the plan file's names and units: what
    _file_step reads back into the same fields."""
    out = dict(fields)
    if "gpus" in out:
        out["gpus_per_node"] = out.pop("gpus")
    if "gpus_per_job" in out:
        out["gpus"] = out.pop("gpus_per_job")
    if "time_limit_s" in out:
        out["time"] = format_duration(out.pop("time_limit_s"))
    if "mem_mb" in out:
        out["mem"] = format_memory(out.pop("mem_mb"))
    return out


def plan_text(plan: Plan, made_by: str) -> str:
    """plan as a plan file (what load_plan reads back into an equal plan), under a comment
    naming what made it: a command that plans by rules writes the very document a person
    writes and the model's run_plan tool takes."""
    from jobsmith.site_config.yamlfile import dump_yaml

    header = f"# plan made by {made_by}; `jobsmith plan run FILE` submits it\n"
    data = plan.model_dump(mode="json", exclude_defaults=True)
    data["steps"] = {name: file_step(step) for name, step in data["steps"].items()}
    return header + dump_yaml(data)


def approval_text(plan: Plan, scripts: Mapping[str, str], workload: str | None = None) -> str:
    """What a person approves for a whole plan: every step's script, in order, each under
    a line naming the step and what it waits for (the dependencies' job ids are added at
    submission: they do not exist yet); then, for a step fed in parts, what is fed and
    what follows it (feeding/followers.py)."""
    parts = []
    for name in plan.order():
        waits = "; ".join(f"{k} {', '.join(v)}" for k, v in plan.edges(name).items())
        parts.append(f"### step {name}" + (f" ({waits})" if waits else "") + "\n" + scripts[name])
    if workload is not None:
        parts.append(f"### workload: {workload}\n")
    return "\n".join(parts)


def summary_of(plan: Plan, job_ids: Mapping[str, str]) -> dict[str, Any]:
    """A plan step's result: the plan's name and each step's job id, in order (a step fed
    in parts, and the steps after it, have none yet: feeding/followers.py)."""
    jobs = {name: job_ids[name] for name in plan.order() if name in job_ids}
    return {"plan": plan.name, "jobs": jobs}

"""Plans: several jobs and the dependencies between them, run as Slurm's own dependencies.

A plan is a small YAML document of named steps, each a job from a template (its
parameters and resources, as `submit` takes them) and the steps it waits for:

    name: transcode
    steps:
      chunks:
        template: ffmpeg_chunks
        params: {input: clip.mp4, output_dir: chunks, duration_s: 12, chunk_seconds: 4}
      join:
        template: ffmpeg_concat
        params: {chunk_dir: chunks, chunks: 3, output: clip.mkv}
        after_ok: [chunks]

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

import heapq
import unicodedata
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from jobsmith.adapters.options import Dependency, DependencyKind
from jobsmith.agent.runtime.submission import hashing
from jobsmith.agent.runtime.submission.jobs import JobFields, JobRequest
from jobsmith.errors import InputError
from jobsmith.site_config.diagnostics import describe_validation_error
from jobsmith.site_config.fieldtypes import Name
from jobsmith.site_config.layers import Provenance
from jobsmith.site_config.yamlfile import DocumentKind, read_yaml

PLAN_FILE = DocumentKind("plan file", "name:, steps:", InputError)
#: a plan larger than this is a workflow engine's job (Nextflow, Snakemake), not a plan's
MAX_STEPS = 100

#: the plan file's words for each dependency, in the order they are written
_KINDS: dict[str, DependencyKind] = {
    "after_ok": DependencyKind.AFTEROK,
    "after_any": DependencyKind.AFTERANY,
    "after_not_ok": DependencyKind.AFTERNOTOK,
}


class PlanStep(JobFields):
    """One job of a plan: what `submit` takes, and the steps it waits for."""

    after_ok: list[Name] = Field(default_factory=list, description="start when these succeeded")
    after_any: list[Name] = Field(default_factory=list, description="start when these ended")
    after_not_ok: list[Name] = Field(default_factory=list, description="start if these failed")

    def waits_for(self) -> list[str]:
        """Every step this one waits for, in the order written."""
        return [*self.after_ok, *self.after_any, *self.after_not_ok]


class Plan(BaseModel):
    """A plan document (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

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

    def request(self, name: str, job_ids: Mapping[str, str]) -> JobRequest:
        """Step name's request, waiting for job_ids[d] of each step d it waits for (a step
        whose job id is not given yet is left out: `check` renders without it)."""
        step = self.steps[name]
        dependencies = []
        for field, kind in _KINDS.items():
            ids = tuple(job_ids[d] for d in getattr(step, field) if d in job_ids)
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
    folded = unicodedata.normalize("NFKD", path.stem).encode("ascii", "ignore").decode()
    stem = "".join(c if c.isalnum() or c in "_-" else "_" for c in folded)[:40]
    if not stem.strip("_-"):
        stem = hashing.script_sha256(path.stem)[:12]
    return f"{kind}_{stem}"


def load_plan(path: Path) -> Plan:
    """The plan in path; InputError naming the file, line and field on any problem."""
    doc = read_yaml(path, PLAN_FILE)
    try:
        return Plan.model_validate(doc.data)
    except ValidationError as exc:
        provenance = Provenance()
        provenance.record(doc, ())
        message = describe_validation_error(exc, Plan, provenance, [path], PLAN_FILE.name)
        raise InputError(message) from None


def plan_text(plan: Plan, made_by: str) -> str:
    """plan as a plan file (what load_plan reads back into an equal plan), under a comment
    naming what made it: a command that plans by rules writes the very document a person
    writes and the model's run_plan tool takes."""
    from jobsmith.site_config.yamlfile import dump_yaml

    header = f"# plan made by {made_by}; `jobsmith plan run FILE` submits it\n"
    return header + dump_yaml(plan.model_dump(mode="json", exclude_defaults=True))


def approval_text(plan: Plan, scripts: Mapping[str, str]) -> str:
    """What a person approves for a whole plan: every step's script, in order, each under
    a line naming the step and what it waits for (the dependencies' job ids are added at
    submission: they do not exist yet)."""
    parts = []
    for name in plan.order():
        waits = "; ".join(f"{k} {', '.join(v)}" for k, v in plan.edges(name).items())
        parts.append(f"### step {name}" + (f" ({waits})" if waits else "") + "\n" + scripts[name])
    return "\n".join(parts)


def summary_of(plan: Plan, job_ids: Mapping[str, str]) -> dict[str, Any]:
    """A plan step's result: the plan's name and each step's job id, in order."""
    return {"plan": plan.name, "jobs": {name: job_ids[name] for name in plan.order()}}

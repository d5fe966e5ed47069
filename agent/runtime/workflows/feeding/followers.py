"""A plan whose array step is over the site's submit limits: that step fed as a workload,
and the steps after it (its followers) submitted once every part has a job (pure).

A render of 40,000 frames, or a transcode with more chunks than the QoS allows queued,
is a plan whose array step Slurm would refuse whole. Like an array `submit`ted alone
(feeder.py), that step becomes a workload of parts that fit, recorded in the plan's
session and fed as room appears. The steps that wait for it (render-frames' check,
thumbs and encode; transcode's join, finish and strip) cannot be submitted with the
plan: Slurm's `--dependency` names job ids, and the parts' jobs do not exist yet. So they
are followers, recorded with the plan (its intent holds their scripts, as checked and
approved) and submitted by whichever actor feeds the workload's last part, or the next
one that feeds the session (the watcher, `wait`, a chat), each waiting through Slurm for
ALL the parts' job ids with the plan's own edge (`afterok:P0:P1:…`, or `afterany`), in
plan order, a follower after a follower waiting for its job as any plan step does.
Slurm does the waiting; jobsmith only feeds.

- The plan is judged whole up front: the fed step at its whole cost (every task) but
  without the queue's limits, the plan's total against the budgets and thresholds, and
  the approval text names the workload (its tasks, its parts, its followers), so one
  approval covers all of it. Each part and each follower is judged again when it is
  submitted (the site's limits and budgets then); a full queue means "not now".
- Each follower is claimed in the session before its sbatch (a `claimed` event appended
  only if the follower's step has no event yet and the workload is not cancelled:
  claims.py's conditional append), so two actors never submit it twice, and a cancel
  recorded first stops it for good; one recorded while its sbatch ran is seen right
  after it, and its job cancelled. A follower claimed and not answered is a crashed
  submission: `sessions resume` settles it by its tag; feeding goes on after it.
- Supported shape: one fed step per plan, which waits for no step, and followers whose
  dependencies are the fed step (after_ok, after_any), other followers or steps submitted
  with the plan. Anything else is refused up front, naming the step (PlanShapeError).

- Slurm forgets an ended job after MinJobAge (30 s in the lab), and a dependency on a
  job it forgot is not one it checks, so a follower waits only for the parts that have
  not ended as its edge needs, as Slurm answers just before its sbatch (one status call
  for all the parts): a part that completed is met already and left out (all of them:
  no dependency on the workload at all); a part that ended otherwise under after_ok
  means the follower can never run, so it is not submitted, and the session notes why
  (cancel the workload, or re-run the part's failed tasks and submit what follows by
  hand: a re-run of a part is not yet followed by the followers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.workflows.feeding.split import Part, in_words
from jobsmith.agent.runtime.workflows.plans import Plan
from jobsmith.errors import PolicyError


class PlanShapeError(PolicyError):
    """A plan whose over-the-limits steps cannot be fed with followers (module docstring)."""


class FedStep(BaseModel):
    """The fed step of a plan as its intent records it: what the approval covers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str = Field(description="the plan step fed as a workload")
    followers: tuple[str, ...] = Field(description="the steps submitted after its parts, in order")
    tasks: int = Field(description="every task of the step")
    parts: tuple[dict[str, int | None], ...] = Field(description="its parts (split.py)")
    max_array_size: int = Field(description="the MaxArraySize the parts were cut for")

    def split(self) -> tuple[Part, ...]:
        """The parts as split.py's."""
        return tuple(Part(**p) for p in self.parts)  # type: ignore[arg-type]

    def words(self) -> str:
        """What the approval text and `plan check` say of it."""
        then = ", ".join(self.followers) or "nothing"
        return (
            f"step {self.step}: {self.tasks} tasks, over the site's limits at once, "
            f"{in_words(self.split())} as room appears; then {then}, submitted after its "
            "last part and waiting for all its parts"
        )


def fed_shape(plan: Plan, fed: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The fed step and its followers (every step downstream of it, in plan order), for
    the steps fed names (those over the site's limits); PlanShapeError naming the step
    where the plan is not the supported shape (module docstring)."""
    if len(fed) > 1:
        raise PlanShapeError(
            f"plan {plan.name}: steps {', '.join(fed)} are each over the site's submit "
            "limits; only one array step of a plan can be fed in parts: split the plan"
        )
    [step] = fed
    if plan.steps[step].waits_for():
        waits = ", ".join(plan.steps[step].waits_for())
        raise PlanShapeError(
            f"plan {plan.name}: step {step} is over the site's submit limits and waits for "
            f"{waits}; only a step that waits for no step can be fed in parts: run {waits} "
            "as a plan of its own first"
        )
    downstream = {step}
    for name in plan.order():
        if set(plan.steps[name].waits_for()) & downstream:
            downstream.add(name)
    followers = tuple(n for n in plan.order() if n in downstream and n != step)
    for name in followers:
        if step in plan.steps[name].after_not_ok:
            raise PlanShapeError(
                f"plan {plan.name}: step {name} waits for step {step} with after_not_ok, "
                f"but {step} is fed in parts; only after_ok and after_any can wait for all "
                "of its parts"
            )
    return step, followers


def with_parts(
    job_ids: Mapping[str, str], fed: str, part_ids: Sequence[str]
) -> dict[str, str | tuple[str, ...]]:
    """The job ids a follower's dependencies are built from (Plan.request): the plan's
    jobs, and the fed step as every one of its parts' jobs."""
    return {**job_ids, fed: tuple(part_ids)}


def parts_to_wait_for(
    plan: Plan, name: str, fed: str, parts: Mapping[str, JobState | None]
) -> tuple[str, ...] | None:
    """The parts' jobs follower name must still wait for, by its edge to the fed step and
    each part's state as Slurm answers now (None: not known): a part that ended as the
    edge needs is met already and left out (Slurm forgets an ended job after MinJobAge,
    and a dependency on a job it forgot is not one it checks); None if a part ended so
    that the edge can never be met (after_ok, a part failed): the follower is not
    submitted."""
    after_ok = fed in plan.steps[name].after_ok
    wait = []
    for job_id, state in parts.items():
        if state is None or not state.is_terminal:
            wait.append(job_id)
        elif after_ok and state is not JobState.COMPLETED:
            return None
    return tuple(wait)


def ready(plan: Plan, name: str, job_ids: Mapping[str, object]) -> bool:
    """Whether every step a follower waits for has its job(s)."""
    return all(d in job_ids for d in plan.steps[name].waits_for())

"""A fed workload as its session records it (pure reading, no Slurm): its `workload`
event, a later `cancelled` one, and its parts' steps `STEP.pN` (feeder.py writes them).
Kept apart from the feeder so that `status` and `report` read it without importing what
submits."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from jobsmith.adapters.options import JobOptions
from jobsmith.adapters.states import JobState
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.workflows.feeding.split import Part

#: a session's events by its id: SessionStore.read, or a command's own reads kept so that
#: it reads each log once (`status` finds a workload and its parts in a session before its
#: poll, and counts its tasks after: agent/faces/cli.py)
Reader = Callable[[str], Sequence[Event]]

#: a part's job name: the workload's, with `.pN` before its own tag (partscript.py)
_PART_NAME = re.compile(r"\.p\d+\.js-[0-9a-f]{12}$")


def is_part(job_name: str) -> bool:
    """Whether a job jobsmith submitted is a fed workload's part, by its name alone (the
    watcher looks no further into sessions with none)."""
    return _PART_NAME.search(job_name) is not None


@dataclass(frozen=True)
class Workload:
    """A workload as its `workload` event records it."""

    session_id: str
    step_id: str
    template: str
    script: str
    options: JobOptions
    step: Mapping[str, Any]
    cwd: str
    tasks: int
    parts: tuple[Part, ...]
    cancelled: bool = False
    #: a plan's fed step (followers.py): the plan's step, and the steps submitted after
    #: the last part, waiting for all the parts
    plan_step: str | None = None
    followers: tuple[str, ...] = ()

    def part_step_id(self, part: Part) -> str:
        """The part's own step id."""
        return part_step_id(self.step_id, part.index)


def part_step_id(step_id: str, index: int) -> str:
    """The step id of a workload's part `index`."""
    return f"{step_id}.p{index}"


def workloads(session_id: str, events: Iterable[Event]) -> list[Workload]:
    """The session's workloads, a later `cancelled` event marking its workload."""
    found: dict[str, Workload] = {}
    for e in events:
        if e.kind is not EventKind.WORKLOAD or e.step_id is None:
            continue
        if e.data.get("cancelled"):
            if e.step_id in found:
                found[e.step_id] = replace(found[e.step_id], cancelled=True)
            continue
        found[e.step_id] = _workload_of(session_id, e.step_id, e.data)
    return list(found.values())


def part_data(part: Part) -> dict[str, Any]:
    return {
        "index": part.index,
        "offset": part.offset,
        "count": part.count,
        "throttle": part.throttle,
    }


def _workload_of(session_id: str, step_id: str, data: Mapping[str, Any]) -> Workload:
    return Workload(
        session_id=session_id,
        step_id=step_id,
        template=str(data["template"]),
        script=str(data["script"]),
        options=JobOptions.model_validate(data["options"]),
        step=dict(data["step"]),
        cwd=str(data.get("cwd") or "."),
        tasks=int(data["tasks"]),
        parts=tuple(Part(**p) for p in data["parts"]),
        plan_step=str(data["plan_step"]) if data.get("plan_step") else None,
        followers=tuple(str(f) for f in data.get("followers") or ()),
    )


def part_jobs(events: Sequence[Event], step_id: str) -> dict[int, str | None]:
    """Each fed part's job id (None while its submission has no result)."""
    prefix = f"{step_id}.p"
    jobs: dict[int, str | None] = {}
    for e in events:
        if e.step_id is None or not e.step_id.startswith(prefix):
            continue
        index = int(e.step_id[len(prefix) :])
        if e.kind is EventKind.RESULT and e.data.get("job_id"):
            jobs[index] = str(e.data["job_id"])
        else:
            jobs.setdefault(index, None)
    return jobs


def live_jobs(job_ids: Iterable[str | None], job_states: Mapping[str, str]) -> list[str]:
    """The jobs among job_ids (a workload's parts, a plan's followers) whose end the
    session has not recorded, in order, as job_states (the session's fold:
    SessionFold.job_states) last saw them; None, a part whose sbatch has not answered,
    is no job. The one rule for "still live" that `status` of a part (which polls them:
    progress.unended_parts) and a workload's cancel (which cancels them:
    feeder.stop_feeding) share: a job not seen ending counts, as only a poll can tell."""
    found = []
    for job_id in job_ids:
        state = JobState.known(job_states.get(job_id)) if job_id else None
        if job_id and not (state is not None and state.is_terminal):
            found.append(job_id)
    return found


def follower_jobs(events: Sequence[Event], plan_step: str, followers: Sequence[str]) -> list[str]:
    """The job ids of a plan's followers submitted so far (followers.py): their submit
    steps `PLAN.NAME` are the plan's own (planrun.sub_step_id)."""
    wanted = {f"{plan_step}.{name}" for name in followers}
    return [
        str(e.data["job_id"])
        for e in events
        if e.kind is EventKind.RESULT and e.step_id in wanted and e.data.get("job_id")
    ]

"""The rule brain: the default decision-maker for unattended runs, with no model.

When a job ends in failure it diagnoses every failed task (or the job), then: if every
failure is one a retry with more resources can fix (out of memory, time limit) and the
retry budget allows, it re-runs only the failed tasks with the memory or time the
diagnosis suggests (memory grows geometrically: MaxRSS at a sampled kill is only a lower
bound), capped by the partition; otherwise it stops and reports (missing input, a bad
command, a dependency that can never be met …). Every decision is first written to the
session as model_output with its reason, and the re-run goes through the same executor,
policy, approvals and budgets as any other step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobsmith.adapters.scheduler import JobStatus
from jobsmith.agent.diagnose_job import StderrTail, diagnose_record
from jobsmith.agent.diagnosis import Diagnosis
from jobsmith.agent.events import Event, EventKind
from jobsmith.agent.executor import ApprovalNeeded, Executor
from jobsmith.agent.jobstate import StateChange
from jobsmith.agent.session_log import SessionLog
from jobsmith.agent.steps import Rerun
from jobsmith.errors import JobsmithError


@dataclass
class RuleBrain:
    """Decides the next step after a failure (see the module docstring)."""

    executor: Executor
    stderr_tail: StderrTail
    max_retries: int = 2

    def on_failure(self, change: StateChange, status: JobStatus) -> dict[str, Any]:
        """Diagnose, then re-run or report; returns what was decided."""
        log = SessionLog(self.executor.store, change.session_id)
        failed = [t for t in status.tasks if t.state.is_failure] or (
            [status.record] if status.record is not None else []
        )
        site = self.executor.site
        diagnoses = [diagnose_record(r, site, self.stderr_tail, status.reason) for r in failed]
        decision = self._decide(change.job_id, diagnoses, log.events())
        log.append(EventKind.MODEL_OUTPUT, {"brain": "rules", **decision}, None)
        if decision["action"] == "rerun":
            decision |= self._rerun(change, decision)
        return decision

    def _decide(
        self, job_id: str, diagnoses: list[Diagnosis], events: list[Event]
    ) -> dict[str, Any]:
        verdicts = sorted({d.verdict.value for d in diagnoses})
        summary = {
            "job_id": job_id,
            "verdicts": verdicts,
            "remedies": sorted({d.remedy for d in diagnoses}),
            "evidence": [e for d in diagnoses for e in d.evidence][:10],
            # what could not be read (a task's stderr): the person sees what the verdict lacks
            "notes": [n for d in diagnoses for n in d.notes][:10],
        }
        depth = retry_depth(events, job_id)
        if not diagnoses or not all(d.retryable for d in diagnoses):
            return {**summary, "action": "report", "reason": "a retry cannot fix this"}
        if depth >= self.max_retries:
            return {
                **summary,
                "action": "report",
                "reason": f"retry budget spent ({depth} of {self.max_retries} re-runs)",
            }
        mem = max(
            (int(d.suggested["mem_mb"]) for d in diagnoses if "mem_mb" in d.suggested), default=None
        )
        time = max(
            (int(d.suggested["time_limit_s"]) for d in diagnoses if "time_limit_s" in d.suggested),
            default=None,
        )
        return {
            **summary,
            "action": "rerun",
            "mem_mb": mem,
            "time_limit_s": time,
            "reason": f"{', '.join(verdicts)}: re-run {len(diagnoses)} failed "
            f"task(s) (retry {depth + 1} of {self.max_retries})",
        }

    def _rerun(self, change: StateChange, decision: dict[str, Any]) -> dict[str, Any]:
        step = Rerun(
            job_id=change.job_id,
            failed_only=True,
            mem_mb=decision["mem_mb"],
            time_limit_s=decision["time_limit_s"],
            reason=str(decision["reason"]),
        )
        try:
            result = self.executor.run(change.session_id, step)
        except ApprovalNeeded as err:
            return {"outcome": "awaiting_approval", "step_id": err.step_id}
        except JobsmithError as err:
            return {"outcome": "refused_or_failed", "error": str(err)}
        return {"outcome": result.outcome.value, "new_job_id": result.summary.get("job_id")}


def retry_depth(events: list[Event], job_id: str) -> int:
    """How many re-runs led to job_id (following rerun_of back to the first submission)."""
    step_of_job = {
        str(e.data["job_id"]): e.step_id
        for e in events
        if e.kind is EventKind.RESULT and e.data.get("submitted")
    }
    parent_of_step = {
        e.step_id: str(e.data["rerun_of"])
        for e in events
        if e.kind is EventKind.INTENT and e.data.get("rerun_of")
    }
    depth, current = 0, job_id
    while (step := step_of_job.get(current)) in parent_of_step:
        current = parent_of_step[step]
        depth += 1
    return depth

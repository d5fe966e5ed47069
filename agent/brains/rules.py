"""The rule brain: the default decision-maker for unattended runs, with no model.

When a job ends in failure it diagnoses every failed task (or the job), then: if every
failure is one a retry with more resources can fix (out of memory, time limit) and the
retry budget allows, it re-runs only the failed tasks with the memory or time the
diagnosis suggests (memory grows geometrically: MaxRSS at a sampled kill is only a lower
bound), capped by the partition; otherwise it stops and reports (missing input, a bad
command, a dependency that can never be met …). It only decides (agent/brains/protocol.py): the
runner records the decision in the session, and the re-run goes through the same
executor, policy, approvals and budgets as any other step.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobsmith.agent.brains.protocol import Action, Decision, FailureView
from jobsmith.agent.diagnosis.table import Diagnosis
from jobsmith.agent.runtime.session.events import Event, EventKind
from jobsmith.agent.runtime.session.payloads import intent_payload, result_payload
from jobsmith.agent.runtime.submission.steps import Rerun


@dataclass(frozen=True)
class RuleBrain:
    """Decides the next step after a failure (see the module docstring); a Brain."""

    max_retries: int = 2
    name: str = "rules"

    def decide(self, view: FailureView) -> Decision:
        """Re-run what more memory or time can fix, within the retry budget; else report."""
        diagnoses = view.diagnoses
        job_id = view.change.job_id
        verdicts = tuple(sorted({d.verdict.value for d in diagnoses}))
        report = Decision(
            brain=self.name,
            job_id=job_id,
            action=Action.REPORT,
            reason="a retry cannot fix this",
            verdicts=verdicts,
            remedies=tuple(sorted({d.remedy for d in diagnoses})),
            evidence=tuple(e for d in diagnoses for e in d.evidence)[:10],
            # what could not be read (a task's stderr): the person sees what the verdict lacks
            notes=tuple(n for d in diagnoses for n in d.notes)[:10],
        )
        depth = retry_depth(list(view.events), job_id)
        if not diagnoses or not all(d.retryable for d in diagnoses):
            return report
        if depth >= self.max_retries:
            reason = f"retry budget spent ({depth} of {self.max_retries} re-runs)"
            return report.model_copy(update={"reason": reason})
        reason = (
            f"{', '.join(verdicts)}: re-run {len(diagnoses)} failed "
            f"task(s) (retry {depth + 1} of {self.max_retries})"
        )
        rerun = Rerun(
            job_id=job_id,
            failed_only=True,
            mem_mb=_largest(diagnoses, "mem_mb"),
            time_limit_s=_largest(diagnoses, "time_limit_s"),
            reason=reason,
        )
        return report.model_copy(
            update={"action": Action.RERUN, "reason": reason, "steps": (rerun,)}
        )


def _largest(diagnoses: tuple[Diagnosis, ...], key: str) -> int | None:
    """The largest of the diagnoses' suggestions for key (None if none suggests it)."""
    return max((int(d.suggested[key]) for d in diagnoses if key in d.suggested), default=None)


def retry_depth(events: list[Event], job_id: str) -> int:
    """How many re-runs led to job_id (following rerun_of back to the first submission)."""
    step_of_job = {
        str(result.job_id): e.step_id
        for e in events
        if e.kind is EventKind.RESULT and (result := result_payload(e)).submitted
    }
    parent_of_step = {
        e.step_id: intent.rerun_of
        for e in events
        if e.kind is EventKind.INTENT and (intent := intent_payload(e)).rerun_of
    }
    depth, current = 0, job_id
    while (step := step_of_job.get(current)) in parent_of_step:
        current = parent_of_step[step]
        depth += 1
    return depth

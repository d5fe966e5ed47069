"""A test-only brain that always leaves a failed job to a person (issue 8: a second brain
plugs in through configuration alone). Named in a site file as `brain: hold_brain:HoldBrain`."""

from __future__ import annotations

from dataclasses import dataclass

from jobsmith.agent.brains.protocol import Action, Decision, FailureView


@dataclass(frozen=True)
class HoldBrain:
    """Decides nothing but "a person should look": no steps, whatever the failure."""

    name: str = "hold"

    def decide(self, view: FailureView) -> Decision:
        verdicts = tuple(sorted({d.verdict.value for d in view.diagnoses}))
        return Decision(
            brain=self.name,
            job_id=view.change.job_id,
            action=Action.HOLD,
            reason=f"left to a person ({', '.join(verdicts) or 'no verdict'})",
            verdicts=verdicts,
        )

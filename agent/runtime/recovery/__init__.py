"""Recovery: resuming a session after a crash, replaying it under a policy, adopting a
job jobsmith did not submit, re-running a job's own script, settling stand-in rows."""

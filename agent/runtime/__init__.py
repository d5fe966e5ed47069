"""The runtime: the session log, typed steps and the executor that runs them under policy.

Everything that acts goes through here: store and session_log (the append-only log),
events, claims (one actor per step), steps and executor, policy, approvals and the
ledger of submissions, jobs (assembling a script), rerun, adopt and resume.
"""

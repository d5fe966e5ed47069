"""Submission: a request assembled (jobs), judged (judge: policy, limits, advice,
approvals, the person-first rules) and run as typed steps by the executor; the script's
hash, the user's SBATCH_* defaults and MCP's check tokens."""

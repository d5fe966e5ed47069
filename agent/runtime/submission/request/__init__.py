"""A request assembled into a job: from a template (jobs), or a batch script (user_scripts)."""

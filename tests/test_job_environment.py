"""What of jobsmith's own environment reaches a job (adapters/environment_rule.py).

sbatch hands the environment it runs in to the job, so the environment the local
transport gives its commands is the job's. Issue 24 found MYSQL_PWD, SLACK_WEBHOOK_URL,
GH_PAT and a proxy URL carrying `user:pass@` arriving in real jobs past a denylist of
names; the lab test in tests/test_cli.py reads a real job's `env`.
"""

from __future__ import annotations

import pytest

from jobsmith.adapters.slurm.transport import LocalTransport

#: what the hostile run found in jobs' environments, with values to look for
FOUND_IN_JOBS = {
    "MYSQL_PWD": "s3cr3t-mysql",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0/B0/s3cr3t-slack",
    "GH_PAT": "ghp_s3cr3tpat",
}
PROXY = "http://proxyuser:s3cr3t-proxy@proxy.example:3128"


def seen_by_commands(monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]) -> dict[str, str]:
    """The environment the local transport gives a command (sbatch's, so the job's)."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    res = LocalTransport().run(["env", "-0"], timeout=10)
    assert res.returncode == 0, res.stderr
    return dict(entry.split("=", 1) for entry in res.stdout.split("\0") if entry)


def test_the_secrets_the_hostile_run_found_never_reach_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = seen_by_commands(monkeypatch, {**FOUND_IN_JOBS, "https_proxy": PROXY})
    for name, value in FOUND_IN_JOBS.items():
        assert name not in seen
        assert not any(value in v for v in seen.values()), name
    assert not any("s3cr3t-proxy" in v or "proxyuser" in v for v in seen.values())
    assert seen.get("PATH")  # the command still runs with the submitter's PATH

"""What a `jobsmith submit` imports and builds stays what it needs (issue 26).

A submit's start-up was most of its cost over the sbatch it wraps: modules imported for
other commands (reports, chat, MCP, pipelines, the advice it was told to skip) and the
pydantic models in them, each built at import. This guards the structure, not a time
(benchmarks/bench_submit_latency.py measures that): a fresh process runs one whole
`submit command --no-advice` through the CLI, and the test asserts which modules it
never imported and which models' validators it never built.

Slurm here is a DOUBLE (an idle cluster that accepts the job): the lab's submit tests
(test_cli.py) run the same path against Slurm, which this test does not need: it asks
what Python loaded, not what Slurm did.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lab_cli import LAB_SITE, write_user_site

#: modules a submit has no use for: other commands' (reports, chat, MCP, the brains,
#: pipelines, diagnosis, the watcher's loop) and, with --no-advice, the advice's
NOT_IMPORTED = (
    "jobsmith.agent.views.report",
    "jobsmith.agent.views.report_html",
    "jobsmith.agent.views.report_text",
    "jobsmith.agent.views.glance",
    "jobsmith.agent.views.advice",
    "jobsmith.agent.faces.chat",
    "jobsmith.agent.faces.mcp_server",
    "jobsmith.agent.faces.mcp_tools",
    "jobsmith.agent.brains.conversation",
    "jobsmith.agent.brains.ask_tools",
    "jobsmith.agent.runtime.workflows.pipelines",
    "jobsmith.agent.runtime.workflows.pipelinerun",
    "jobsmith.agent.diagnosis.job",
    "jobsmith.agent.watcher.watcher",
    "jobsmith.agent.runtime.submission.advising.advice",
    "jobsmith.agent.runtime.submission.advising.sizing",
)

#: models a submit imports (their modules hold what it uses) but never validates: their
#: validators are built on first use (defer_build), so these stay unbuilt
NOT_BUILT = (
    "jobsmith.agent.runtime.submission.steps:Status",
    "jobsmith.agent.runtime.submission.steps:RunPlan",
    "jobsmith.agent.runtime.documents:PlanCheckDocument",
    "jobsmith.agent.runtime.documents:StatusDocument",
    "jobsmith.agent.runtime.documents:DiagnosisDocument",
    "jobsmith.agent.runtime.session.payloads:PlanJobPayload",
    "jobsmith.agent.runtime.session.payloads:PipelinePayload",
    "jobsmith.adapters.workflow:EngineSite",
    "jobsmith.agent.runtime.workflows.plans:Plan",
    "jobsmith.agent.diagnosis.table:Diagnosis",
    "jobsmith.agent.runtime.workflows.progress:WorkProgress",
)

#: what the submit does use, built when it did (the guard's own check: were these not
#: built, the NOT_BUILT assertion could not tell a deferred model from a broken probe)
BUILT = (
    "jobsmith.agent.runtime.submission.steps:Submit",
    "jobsmith.agent.runtime.documents:SubmissionDocument",
)

SUBMIT = r"""
import importlib, json, sys
from pathlib import Path

from jobsmith.adapters.transport import CommandResult
from jobsmith.agent.app import App, UserDirs
from jobsmith.agent.faces.cli import cli


class IdleSlurmDouble:
    "An idle one-node cluster that accepts every job as 4242 (a Transport double)."

    def run(self, argv, *, timeout, stdin=None, env=None):
        argv = list(argv)
        if argv[:2] == ["sbatch", "--version"]:
            return CommandResult(tuple(argv), 0, "slurm-wlm 22.05.8\n", "")
        if argv[:2] == ["sbatch", "--parsable"]:
            return CommandResult(tuple(argv), 0, "4242\n", "")
        return CommandResult(tuple(argv), 0, "", "")


home, site = Path(sys.argv[1]), Path(sys.argv[2])
env = {"HOME": str(home), "USER": "alice", "PATH": "/usr/bin:/bin"}
app = App(
    paths=UserDirs(config_dir=home / "config", state_dir=home / "state"),
    environ=env,
    site_file=site,
    transport_override=IdleSlurmDouble(),
)
argv = ["submit", "command", "-P", "command=true", "--no-advice", "--json"]
cli.main(argv, obj=app, standalone_mode=False)
def built(name):
    module, cls = name.split(":")
    return bool(getattr(importlib.import_module(module), cls).__pydantic_complete__)
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m.startswith("jobsmith")),
    "built": {name: built(name) for name in sys.argv[3:]},
}))
"""


def test_a_submit_imports_and_builds_only_what_it_uses_with_slurm_double(
    tmp_path: Path,
) -> None:
    (tmp_path / "config").mkdir()
    write_user_site(tmp_path / "config", tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", SUBMIT, str(tmp_path), str(LAB_SITE), *NOT_BUILT, *BUILT],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    *submitted, last = out.stdout.strip().splitlines()
    assert json.loads("\n".join(submitted))["job_id"] == "4242"  # the submit went through
    seen = json.loads(last)
    assert "jobsmith.agent.runtime.submission.executor" in seen["modules"]
    assert [m for m in NOT_IMPORTED if m in seen["modules"]] == []
    assert [m for m in NOT_BUILT if seen["built"][m]] == []
    assert [m for m in BUILT if not seen["built"][m]] == []

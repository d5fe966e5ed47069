"""Plans (issue 10, part 1): a plan file read with errors that name the file, line and step;
its order and requests (pure); and on the lab cluster, a diamond of real jobs run as
Slurm's own dependencies (visible in `scontrol show job`), `plan status` as a tree, a
plan approved once as a whole, a plan the policy refuses naming the step, and a plan
whose process is killed mid-submission, resumed without a job submitted twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lab_cli import LAB_SITE, js
from test_documents import documented_keys

from jobsmith.adapters.options import DependencyKind
from jobsmith.agent.runtime.workflows.plans import (
    Plan,
    approval_text,
    load_plan,
    plan_text,
    read_plan_file,
)
from jobsmith.errors import InputError

lab = pytest.mark.usefixtures("lab_cluster")
JOBSMITH = str(Path(sys.executable).with_name("jobsmith"))

DIAMOND = """\
name: diamond
steps:
  a:
    template: command
    params: {command: "echo a > a.txt"}
  b:
    template: command
    params: {command: "cat a.txt > b.txt; echo b >> b.txt"}
    after_ok: [a]
  c:
    template: command
    params: {command: "cat a.txt > c.txt; echo c >> c.txt"}
    after_ok: [a]
  d:
    template: command
    params: {command: "cat b.txt c.txt > d.txt"}
    after_ok: [b, c]
"""


def write(tmp_path: Path, text: str, name: str = "plan.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- the document (pure) ---------------------------------------------------------------------


def test_the_order_puts_each_step_after_what_it_waits_for(tmp_path: Path) -> None:
    reversed_diamond = DIAMOND.replace("  a:\n", "  z:\n")  # a step named after the others
    plan = load_plan(write(tmp_path, DIAMOND))
    assert plan.order() == ["a", "b", "c", "d"]
    assert [plan.depth(n) for n in plan.order()] == [0, 1, 1, 2]
    with pytest.raises(InputError):
        load_plan(write(tmp_path, reversed_diamond))  # b now waits for an 'a' that is gone

    written_late = {
        "name": "late",
        "steps": {
            "merge": {"template": "command", "after_ok": ["one", "two"]},
            "two": {"template": "command", "after_any": ["one"]},
            "one": {"template": "command"},
        },
    }
    assert Plan.model_validate(written_late).order() == ["one", "two", "merge"]


def test_a_request_waits_for_the_job_ids_of_its_steps_by_kind() -> None:
    plan = Plan.model_validate(
        {
            "name": "kinds",
            "steps": {
                "x": {"template": "command"},
                "y": {"template": "command"},
                "z": {
                    "template": "command",
                    "params": {"command": "true"},
                    "mem_mb": 100,
                    "after_ok": ["x"],
                    "after_not_ok": ["y"],
                },
            },
        }
    )
    request = plan.request("z", {"x": "101", "y": "102"})
    kinds = {d.kind: d.job_ids for d in request.dependencies}
    assert kinds == {DependencyKind.AFTEROK: ("101",), DependencyKind.AFTERNOTOK: ("102",)}
    assert (request.template, request.mem_mb, request.params) == (
        "command",
        100,
        {"command": "true"},
    )
    assert plan.request("z", {}).dependencies == ()  # for checking: rendered without them


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            DIAMOND.replace("after_ok: [b, c]", "after_ok: [b, e]"),
            "step d waits for e, which is no step (steps: a, b, c, d)",
        ),
        (DIAMOND.replace("after_ok: [b, c]", "after_ok: [d]"), "step d waits for itself"),
        (
            DIAMOND.replace("    after_ok: [a]\n  c:", "    after_ok: [a, d]\n  c:"),
            "steps b, d wait for each other in a cycle",
        ),
        (DIAMOND.replace("after_ok: [b, c]", "afterok: [b, c]"), "afterok"),
        ("name: empty\nsteps: {}\n", "steps"),
        ("steps:\n  a: {template: command}\n", "required, but no plan file sets it"),
    ],
)
def test_a_bad_plan_is_one_error_naming_the_file_and_what_is_wrong(
    tmp_path: Path, text: str, said: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_plan(path)
    assert str(path) in str(err.value) and said in str(err.value)


def test_the_unknown_key_error_lists_the_valid_ones_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, DIAMOND.replace("after_ok: [b, c]", "afterok: [b, c]"))
    with pytest.raises(InputError) as err:
        load_plan(path)
    assert f"{path}:17" in str(err.value) and "after_ok" in str(err.value)


SBATCH_NAMES = """\
name: sbatch_names
steps:
  a:
    template: command
    params: {command: "true"}
    partition: long
    time: "1:00:00"
    mem: 4G
    cpus_per_task: 2
    gpus: 2
    nodes: 1
    ntasks: 1
    job_name: first
    array: 0-9%2
    constraint: intel&ib
    exclude: n[01-03]
  b:
    template: command
    params: {command: "true"}
    gpus_per_node: 1
    time: 30
    mem: 500
    after_ok: [a]
"""


def test_a_plan_file_takes_sbatchs_names_and_units(tmp_path: Path) -> None:
    plan, notes = read_plan_file(write(tmp_path, SBATCH_NAMES))
    assert notes == ()
    a, b = plan.request("a", {}), plan.request("b", {"a": "7"})
    assert (a.partition, a.time_limit_s, a.mem_mb, a.cpus_per_task) == ("long", 3600, 4096, 2)
    assert (a.gpus_per_job, a.gpus, a.nodes, a.ntasks, a.job_name) == (2, None, 1, 1, "first")
    assert (a.array, a.array_throttle, a.constraint, a.exclude) == (
        "0-9",
        2,
        "intel&ib",
        "n[01-03]",
    )
    assert (b.gpus, b.gpus_per_job, b.time_limit_s, b.mem_mb) == (1, None, 1800, 500)
    # written back in the file's names, it reads back equal and without a note
    again, notes = read_plan_file(write(tmp_path, plan_text(plan, "a test"), "again.yaml"))
    assert (again, notes) == (plan, ())
    assert "time: 01:00:00" in plan_text(plan, "x") and "mem_mb" not in plan_text(plan, "x")


def test_a_plan_file_with_the_older_names_loads_with_a_note_naming_the_new_field(
    tmp_path: Path,
) -> None:
    older = SBATCH_NAMES.replace('time: "1:00:00"', "time_limit_s: 3600").replace(
        "mem: 4G", "mem_mb: 4096"
    )
    path = write(tmp_path, older.replace("time: 30", "time_limit_s: 1800"))
    plan, notes = read_plan_file(path)
    assert plan == read_plan_file(write(tmp_path, SBATCH_NAMES, "new.yaml"))[0]
    assert notes == (
        f"{path}: time_limit_s (step a, b) still loads, but the field is now time, "
        "in Slurm's units as submit takes them (time: 1:00:00)",
        f"{path}: mem_mb (step a) still loads, but the field is now mem, "
        "in Slurm's units as submit takes them (mem: 4G)",
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("mem: 4G", "mem: 4X"), ":8: steps.a.mem: invalid memory size '4X'"),
        (("time: 30", "time: soon"), ":21: steps.b.time: invalid duration 'soon'"),
        (("mem: 500", "mem: 500\n    mem_mb: 500"), "steps.b.mem: given twice, as mem and as"),
        (("gpus: 2", "gpu: 2"), ":10: steps.a.gpu: unknown key 'gpu' (did you mean 'gpus'?)"),
        (("array: 0-9%2", "array: 0-9%x"), ":14: steps.a.array: --array '0-9%x': expected"),
        (("gpus_per_node: 1", "gpus_per_node: 1\n    gpus: 1"), "per job and per node"),
    ],
)
def test_a_bad_sbatch_named_field_is_one_error_naming_the_file_line_and_field(
    tmp_path: Path, change: tuple[str, str], said: str
) -> None:
    path = write(tmp_path, SBATCH_NAMES.replace(*change))
    with pytest.raises(InputError) as err:
        read_plan_file(path)
    assert str(path) in str(err.value) and said in str(err.value)


def test_plan_check_shows_the_note_on_stderr_and_the_directives(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """(The CLI: the note is on stderr, so --json stays one document.)"""
    older = (
        SBATCH_NAMES.replace("mem: 4G", "mem_mb: 4096")
        .replace("    gpus: 2\n", "")
        .replace("    gpus_per_node: 1\n", "")
    )
    checked = js("plan", "check", str(write(workdir, older)), "--json")
    assert checked.exit_code == 0, checked.output
    assert "mem_mb (step a) still loads, but the field is now mem" in checked.stderr
    scripts = {s["name"]: s["job"]["script"] for s in json.loads(checked.stdout)["steps"]}
    for directive in (
        "--partition=long", "--time=01:00:00", "--mem=4096M", "--cpus-per-task=2",
        "--job-name=first.js-", "--array=0-9%2", "--constraint=intel&ib", "--exclude=n[01-03]",
    ):  # fmt: skip
        assert f"#SBATCH {directive}" in scripts["a"], directive


def test_what_a_person_approves_names_each_step_and_what_it_waits_for(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, DIAMOND))
    text = approval_text(plan, {n: f"#!/bin/bash\necho {n}\n" for n in plan.order()})
    assert text.splitlines()[0] == "### step a"
    assert "### step d (after_ok b, c)\n#!/bin/bash\necho d\n" in text


def test_plan_check_without_slurm_prints_every_script_and_the_total(
    tmp_path: Path, jobsmith_home: Path
) -> None:
    out = js("plan", "check", str(write(tmp_path, DIAMOND)), "--json")
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["order"] == ["a", "b", "c", "d"]
    waits = [s["waits_for"] for s in doc["steps"]]
    assert waits == [{}, {"after_ok": ["a"]}, {"after_ok": ["a"]}, {"after_ok": ["b", "c"]}]
    assert doc["cost"]["tasks"] == 4 and doc["policy"]["verdict"] == "allow"
    assert "cat b.txt c.txt > d.txt" in doc["steps"][3]["job"]["script"]
    text = js("plan", "check", str(write(tmp_path, DIAMOND)))
    assert text.stdout.rstrip().splitlines()[-1].startswith("### plan diamond: 4 jobs")


def test_plan_check_exits_3_naming_the_step_the_policy_refuses(
    tmp_path: Path, jobsmith_home: Path
) -> None:
    greedy = DIAMOND.replace(
        '    params: {command: "cat b.txt c.txt > d.txt"}',
        '    params: {command: "cat b.txt c.txt > d.txt"}\n    cpus_per_task: 9999',
    )
    out = js("plan", "check", str(write(tmp_path, greedy)))
    assert out.exit_code == 3, out.output
    assert "d" in out.stderr and ("9999" in out.stderr or "cpus" in out.stderr)


# --- on the lab cluster ---------------------------------------------------------------------


def scontrol_dependency(job_id: str) -> str:
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout
    return next(w for w in shown.split() if w.startswith("Dependency="))


@lab
def test_a_diamond_runs_as_slurm_dependencies_and_plan_status_shows_the_tree(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site()
    ran = js("plan", "run", str(write(workdir, DIAMOND)), "--json")
    assert ran.exit_code == 0, ran.output
    doc = json.loads(ran.stdout)
    assert set(doc) == documented_keys("`plan run`")
    jobs = doc["jobs"]
    assert list(jobs) == ["a", "b", "c", "d"]
    # Slurm holds d for both b and c: its own dependency, visible in scontrol
    dependency = scontrol_dependency(jobs["d"])
    assert f"afterok:{jobs['b']}" in dependency and f"afterok:{jobs['c']}" in dependency

    done = js("wait", *jobs.values(), "--timeout", "180")
    assert done.exit_code == 0, done.output
    assert (workdir / "d.txt").read_text() == "a\nb\na\nc\n"

    status = json.loads(js("plan", "status", doc["session_id"], "--json").stdout)
    assert status["plan"] == "diamond" and status["outcome"] == "done"
    rows = [(s["name"], s["depth"], s["job_id"], s["state"]) for s in status["steps"]]
    assert rows == [(n, d, jobs[n], "COMPLETED") for n, d in zip("abcd", (0, 1, 1, 2), strict=True)]
    tree = js("plan", "status").stdout.splitlines()  # the newest plan by default
    assert tree[0].startswith(f"plan diamond (session {doc['session_id']}): done")
    assert tree[4].startswith(f"    └ d  {jobs['d']}  COMPLETED") and "(after_ok b, c)" in tree[4]


@lab
def test_a_plan_above_the_threshold_is_approved_once_as_a_whole(
    user_site: Callable[[str], None], workdir: Path, jobsmith_home: Path
) -> None:
    user_site("policy:\n  approval:\n    core_hours: 1.5\n")  # each job 0.5, the plan 2
    held = js("plan", "run", str(write(workdir, DIAMOND)))
    assert held.exit_code == 8, held.output
    (item,) = json.loads(js("pending", "--json").stdout)["pending"]
    assert item["action"] == "run_plan" and "the plan as a whole" in item["reason"]
    assert item["script"].count("### step ") == 4 and item["cost"]["core_hours"] == 2.0
    assert not list((jobsmith_home / "state" / "jobs").glob("*.json"))  # nothing submitted

    approved = js("approve", item["step_id"], "--json")
    assert approved.exit_code == 0, approved.output
    jobs = json.loads(approved.stdout)["summary"]["jobs"]
    assert len(set(jobs.values())) == 4
    assert js("wait", *jobs.values(), "--timeout", "180").exit_code == 0
    assert (workdir / "d.txt").read_text() == "a\nb\na\nc\n"
    assert json.loads(js("pending", "--json").stdout)["pending"] == []


@pytest.mark.parametrize(
    "fault",
    [
        {"JOBSMITH_FAULT_KILL_AFTER_EVENTS": "4"},  # b's intent is written, its sbatch not run
        {"JOBSMITH_FAULT_KILL_IN_SBATCH": "2"},  # b's sbatch runs on after the process died
    ],
    ids=["before-sbatch", "in-sbatch"],
)
@lab
def test_a_plan_killed_mid_submission_is_resumed_without_a_job_twice(
    user_site: Callable[[str], None],
    workdir: Path,
    jobsmith_home: Path,
    fault: dict[str, str],
) -> None:
    user_site()
    path = write(workdir, DIAMOND)
    killed = subprocess.run(
        [JOBSMITH, "--site", str(LAB_SITE), "plan", "run", str(path)],
        env={**os.environ, **fault},
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    assert killed.returncode == -9, killed
    session = json.loads(js("sessions", "list", "--json").stdout)["sessions"][-1]["id"]
    resumed = js("sessions", "resume", session, "--json")
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["undecided"] == {}, report

    status = json.loads(js("plan", "status", session, "--json").stdout)
    jobs = {s["name"]: s["job_id"] for s in status["steps"]}
    assert None not in jobs.values() and len(set(jobs.values())) == 4
    assert js("wait", *jobs.values(), "--timeout", "180").exit_code == 0
    assert (workdir / "d.txt").read_text() == "a\nb\na\nc\n"
    ledger = [json.loads(p.read_text()) for p in (jobsmith_home / "state" / "jobs").glob("*.json")]
    names = [r["options"]["job_name"] for r in ledger]
    assert len(names) == 4 == len(set(names))  # each job once, in Slurm and in the ledger
    outcome = json.loads(js("plan", "status", session, "--json").stdout)["outcome"]
    assert outcome == "done"


OOM_THEN_NEXT = """\
name: oom
steps:
  hog:
    template: command
    params: {command: "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(6)'"}
    mem_mb: 100
  next:
    template: command
    params: {command: "echo after the hog > next.txt"}
    after_ok: [hog]
"""


@lab
def test_a_failed_step_is_rerun_alone_and_the_step_after_it_waits_for_the_rerun(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """The hog runs out of memory; Slurm leaves `next` pending (DependencyNeverSatisfied);
    the watcher's rule brain re-runs the hog with more memory, and `next` is pointed at
    the re-run's job id, so it runs once the re-run succeeds: nothing else runs again."""
    import time

    user_site()
    ran = json.loads(js("plan", "run", str(write(workdir, OOM_THEN_NEXT)), "--json").stdout)
    hog, after = ran["jobs"]["hog"], ran["jobs"]["next"]
    decisions: list[dict[str, object]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not decisions:
        decisions += json.loads(js("watch", "--once", "--json").stdout)["decisions"]
        time.sleep(2)
    (decision,) = decisions
    assert (decision["job_id"], decision["action"]) == (hog, "rerun")
    rerun = str(decision["new_job_id"])
    assert scontrol_dependency(after).startswith(f"Dependency=afterok:{rerun}")

    assert js("wait", rerun, after, "--timeout", "180").exit_code == 0
    assert (workdir / "next.txt").read_text() == "after the hog\n"
    status = json.loads(js("plan", "status", ran["session_id"], "--json").stdout)
    rows = {s["name"]: (s["job_id"], s["state"]) for s in status["steps"]}
    assert rows == {"hog": (rerun, "COMPLETED"), "next": (after, "COMPLETED")}
    kinds = [
        e["kind"]
        for e in json.loads(js("sessions", "show", ran["session_id"], "--json").stdout)["events"]
    ]
    assert kinds.count("plan_job") == 1


@lab
def test_genomics_align_a_sample_sheet_then_merge_with_flagstat(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """bwa over a sample sheet as one array, then samtools merge, index and flagstat after
    it; the merge checks that every read of every sample is in the merged BAM."""
    from template_examples import write_bwa_inputs

    user_site()
    write_bwa_inputs(workdir, ["s1", "s2", "s3"])
    genomics = """\
name: genomics
steps:
  align:
    template: bwa_align
    params: {reference: genome.fa, samples: reads/samples.tsv, output_dir: aligned}
    cpus_per_task: 1
    mem_mb: 1000
  merge:
    template: samtools_merge
    params: {bam_dir: aligned, samples: reads/samples.tsv, output: merged/all.bam}
    cpus_per_task: 1
    mem_mb: 1000
    log_dir: logs
    after_ok: [align]
"""
    ran = js("plan", "run", str(write(workdir, genomics)), "--json")
    assert ran.exit_code == 0, ran.output
    jobs = json.loads(ran.stdout)["jobs"]
    assert js("wait", *jobs.values(), "--timeout", "300").exit_code == 0
    flagstat = (workdir / "merged" / "all.bam.flagstat.txt").read_text()
    assert flagstat.split()[0] == "300"  # 3 samples x 50 pairs x 2 reads
    assert (workdir / "merged" / "all.bam.bai").exists()
    status = json.loads(js("status", jobs["align"], "--json").stdout)["jobs"][0]
    assert status["task_counts"] == {"COMPLETED": 3}
    said = (workdir / "logs" / f"samtools_merge_{jobs['merge']}.out").read_text()
    assert "merge: ok, 300 reads from 3 samples" in said


OOM_THEN_TWO = (
    OOM_THEN_NEXT
    + """\
  last:
    template: command
    params: {command: "echo after next > last.txt"}
    after_ok: [next]
"""
)


@pytest.fixture
def kills_invalid_dependencies() -> Iterator[None]:
    """The lab as a site with DependencyParameters=kill_invalid_depend, for one test."""
    lab_sbin = "/usr/local/sbin/jobsmith-slurm-lab"
    switch = ["sudo", "-n", lab_sbin, "kill-invalid-depend"]
    subprocess.run([*switch, "on"], check=True, timeout=120)
    try:
        yield
    finally:
        subprocess.run([*switch, "off"], check=True, timeout=120)


@lab
@pytest.mark.disruptive  # changes slurmctld's configuration for every job on the lab
@pytest.mark.usefixtures("kills_invalid_dependencies")
def test_where_slurm_kills_the_steps_after_a_failure_they_are_submitted_again_after_the_rerun(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    """Slurm cancels `next` and `last` as soon as the hog fails (their dependency can
    never be met); the rule brain's re-run of the hog submits them again, each waiting
    for the new jobs, their scripts as the plan checked them; the hog's first job and
    nothing that ran is submitted twice."""
    import time

    user_site()
    ran = json.loads(js("plan", "run", str(write(workdir, OOM_THEN_TWO)), "--json").stdout)
    hog, after, last = (ran["jobs"][n] for n in ("hog", "next", "last"))
    reruns: list[dict[str, object]] = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not reruns:
        decisions = json.loads(js("watch", "--once", "--json").stdout)["decisions"]
        reruns += [d for d in decisions if d["action"] == "rerun"]
        time.sleep(2)
    (decision,) = reruns
    assert decision["job_id"] == hog
    rerun = str(decision["new_job_id"])
    killed = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", f"{after},{last}", "-o", "JobID,State,Elapsed"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert killed == [f"{after}|CANCELLED|00:00:00", f"{last}|CANCELLED|00:00:00"]

    status = json.loads(js("plan", "status", ran["session_id"], "--json").stdout)
    now = {s["name"]: s["job_id"] for s in status["steps"]}
    assert now["hog"] == rerun and now["next"] not in (after, None)
    assert now["last"] not in (last, None)
    assert scontrol_dependency(now["next"]).startswith(f"Dependency=afterok:{rerun}")
    assert js("wait", *now.values(), "--timeout", "180").exit_code == 0
    assert (workdir / "next.txt").read_text() == "after the hog\n"
    assert (workdir / "last.txt").read_text() == "after next\n"
    events = json.loads(js("sessions", "show", ran["session_id"], "--json").stdout)["events"]
    assert [e["data"]["step"] for e in events if e["kind"] == "plan_job"] == [
        "next",
        "last",
        "hog",
    ]

"""The watcher: one poll per cycle for all jobs, a shared-home lock, no false failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab_cli import (
    LAB_SITE,
    Watched,
    submit_oom_array,
    watch_until,
    webhook_receiver,
    write_user_site,
)
from lab_cli import js as lab_js

from jobsmith.agent.watcher.cycle import WatchCycle, next_interval
from jobsmith.agent.watcher.lock import WatcherRunning, WatchLock
from jobsmith.agent.watcher.running import jobsmith_program
from jobsmith.errors import ConfigError


def test_one_watcher_per_user_and_stale_takeover(tmp_path: Path) -> None:
    path = tmp_path / "watch.lock"
    first = WatchLock(path, stale_after_s=60)
    first.acquire()
    second = WatchLock(path, stale_after_s=60)
    with pytest.raises(WatcherRunning, match="already running"):
        second.acquire()
    old = time.time() - 120  # the first watcher's login node went away
    os.utime(path, (old, old))
    second.acquire()
    with pytest.raises(WatcherRunning, match="lost"):
        first.heartbeat()
    second.heartbeat()
    first.release()  # not its lock any more: must not remove it
    assert path.exists()
    second.release()
    assert not path.exists()


RACER = Path(__file__).with_name("lock_racer.py")


def _dead_watchers_lock(path: Path, holder: str) -> None:
    """The lock of a watcher that died: a new file whose heartbeat is two minutes old."""
    tmp = path.with_name(".dead")
    tmp.write_text(json.dumps({"holder": holder, "at": time.time() - 120}))
    old = time.time() - 120
    os.utime(tmp, (old, old))
    os.replace(tmp, path)


def test_a_stale_lock_is_taken_over_by_exactly_one_of_many_racing_processes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "watch.lock"
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), str(path), "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        for round_ in range(40):
            _dead_watchers_lock(path, f"deadnode:{round_}:0000")
            for racer in racers:  # one burst: all try the same stale lock at once
                assert racer.stdin is not None
                racer.stdin.write("go\n")
                racer.stdin.flush()
            answers = [racer.stdout.readline().split() for racer in racers if racer.stdout]
            winners = [answer[1] for answer in answers if answer[0] == "won"]
            assert len(winners) == 1, f"round {round_}: {answers}"
            assert json.loads(path.read_text())["holder"] == winners[0]
    finally:
        for racer in racers:
            if racer.stdin is not None:
                racer.stdin.close()
        for racer in racers:
            assert racer.wait(timeout=30) == 0
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".watch.lock.")]
    assert [name for name in left if ".takeover." not in name] == []  # claims wait for a sweep


def test_a_takeover_in_progress_blocks_others_and_an_abandoned_one_does_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "watch.lock"
    _dead_watchers_lock(path, "deadnode:1:0000")
    claim = tmp_path / ".watch.lock.takeover.deadnode_1_0000.0"
    claim.write_text(json.dumps({"holder": "othernode:2:1111"}))
    with pytest.raises(WatcherRunning, match=r"othernode:2:1111\) is taking over"):
        WatchLock(path, stale_after_s=60).acquire()
    old = time.time() - 120  # that watcher died between its claim and its lock
    os.utime(claim, (old, old))
    taker = WatchLock(path, stale_after_s=60)
    taker.acquire()
    assert json.loads(path.read_text())["holder"] == taker.me
    assert (tmp_path / ".watch.lock.takeover.deadnode_1_0000.1").exists()
    assert not claim.exists()  # swept once older than stale_after


def test_the_crontab_line_names_the_jobsmith_program_not_the_test_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in-process, as under pytest: argv[0] is pytest, the console script is beside Python
    assert jobsmith_program() == Path(sys.executable).parent.absolute() / "jobsmith"
    bare = tmp_path / "bin"
    bare.mkdir()
    monkeypatch.setattr(sys, "executable", str(bare / "python3"))
    monkeypatch.setenv("PATH", str(bare))
    with pytest.raises(ConfigError, match=r"cannot find the jobsmith program.*none on PATH"):
        jobsmith_program()
    (bare / "jobsmith").write_text("#!/bin/sh\n")
    (bare / "jobsmith").chmod(0o755)
    assert jobsmith_program() == bare / "jobsmith"


def test_backoff_while_slurm_is_silent() -> None:
    down = WatchCycle(watched=3, scheduler_ok=False, error="timeout")
    up = WatchCycle(watched=3, scheduler_ok=True)
    assert next_interval(down, 60, 60, 600) == 120
    assert next_interval(down, 480, 60, 600) == 600
    assert next_interval(up, 600, 60, 600) == 60


@pytest.fixture
def js(user_site):  # type: ignore[no-untyped-def]
    """Invoke the CLI in-process from workdir; returns click's Result."""
    return lab_js


@pytest.mark.usefixtures("lab_cluster")
def test_watch_once_polls_all_sessions_in_one_sacct_and_records_states(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    ids = [
        js(
            "submit", "command", "-P", f"command=sleep {i}", "--log-dir", str(workdir)
        ).stdout.strip()
        for i in (1, 2, 3)
    ]
    deadline = time.monotonic() + 120
    seen: dict[str, str] = {}
    while time.monotonic() < deadline and len(seen) < 3:
        out = js("watch", "--once", "--json")
        assert out.exit_code == 0, out.output
        cycle = json.loads(out.stdout)
        assert cycle["scheduler_ok"]
        seen |= {c["job_id"]: c["state"] for c in cycle["changes"] if c["state"] == "COMPLETED"}
        time.sleep(1)
    assert seen == dict.fromkeys(ids, "COMPLETED")
    quiet = json.loads(js("watch", "--once", "--json").stdout)
    assert quiet == {
        "watched": 0,
        "scheduler_ok": True,
        "error": None,
        "changes": [],
        "decisions": [],
        "woken": [],
        "pipelines": [],
        "warnings": [],
    }


@pytest.mark.usefixtures("lab_cluster")
def test_oom_array_task_is_rerun_alone_with_more_memory_unattended(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    array_id = submit_oom_array(workdir)  # task 2 needs ~300 MB; the array asks for 100M
    seen = watch_until(Watched.rerun_completed, timeout_s=240)
    (decision,), final = seen.decisions, seen.states
    assert decision["job_id"] == array_id and decision["action"] == "rerun"
    assert decision["verdicts"] == ["out_of_memory"]
    assert int(decision["mem_mb"]) >= 300  # type: ignore[call-overload]
    assert final[array_id] == "OUT_OF_MEMORY" or final[array_id] == "FAILED"
    rerun = json.loads(js("status", str(decision["new_job_id"]), "--json").stdout)["jobs"][0]
    assert [t["array_task_id"] for t in rerun["tasks"]] == [2]  # the failed task alone
    assert rerun["state"] == "COMPLETED"


@pytest.mark.usefixtures("lab_cluster")
def test_diagnose_command_on_real_failures(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    missing = js(
        "submit", "command", "-P", "command=cat /nonexistent/input.mov", "--log-dir", str(workdir)
    ).stdout.strip()
    nocmd = js(
        "submit", "command", "-P", "command=no-such-program --flag", "--log-dir", str(workdir)
    ).stdout.strip()
    js("wait", missing, nocmd, "--timeout", "120")
    first = json.loads(js("diagnose", missing, "--json").stdout)["diagnoses"][0]
    assert first["verdict"] == "missing_input" and not first["retryable"]
    assert any("/nonexistent/input.mov" in e for e in first["evidence"])
    second = json.loads(js("diagnose", nocmd, "--json").stdout)["diagnoses"][0]
    assert second["verdict"] == "command_not_found"
    text = js("diagnose", nocmd)
    assert "remedy:" in text.stdout


@pytest.mark.usefixtures("lab_cluster")
def test_next_command_tells_what_ended_once_and_never_in_json(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    ok = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir)).stdout.strip()
    bad = js("submit", "command", "-P", "command=exit 2", "--log-dir", str(workdir))
    bad_id = bad.stdout.strip()
    js("wait", ok, bad_id, "--json", "--timeout", "120")  # records the ends, tells nothing
    told = js("templates", "list")
    assert f"since you last looked: 1 job completed ({ok}); 1 job failed ({bad_id})" in (
        told.stderr
    )
    assert "since you last looked" not in js("templates", "list").stderr  # only once


@pytest.mark.usefixtures("lab_cluster")
def test_webhook_hears_of_ended_jobs_and_mail_goes_to_slurm(  # type: ignore[no-untyped-def]
    js, workdir: Path, jobsmith_home: Path
) -> None:
    with webhook_receiver() as (url, received):
        write_user_site(
            jobsmith_home / "config",
            workdir,
            f"notify:\n  webhook_url: {url}\n  webhook_for: job\n  mail_user: alice@example.org\n",
        )
        dry = json.loads(js("render", "command", "-P", "command=true", "--json").stdout)
        assert "#SBATCH --mail-type=END,FAIL" in dry["script"]
        assert "#SBATCH --mail-user=alice@example.org" in dry["script"]
        job = js("submit", "command", "-P", "command=exit 4", "--log-dir", str(workdir))
        job_id = job.stdout.strip()
        watch_until(lambda _: bool(received), timeout_s=120, every_s=1)
    assert received and received[0]["event"] == "job_ended"
    assert received[0]["job_id"] == job_id and received[0]["state"] == "FAILED"


@pytest.mark.usefixtures("lab_cluster")
def test_adopted_hand_submitted_job_is_watched_and_rerun_with_more_memory(  # type: ignore[no-untyped-def]
    js, workdir: Path
) -> None:
    (workdir / "job.sh").write_text(
        "#!/bin/bash\n#SBATCH --mem=100M\n#SBATCH -p debug\n"
        "python3 -c 'import time; x = bytearray(300 << 20); time.sleep(6)'\n"
    )
    job_id = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-o", f"{workdir}/hand_%j.out", "job.sh"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    adopted = js("adopt", job_id, "--json")
    assert adopted.exit_code == 0, adopted.output
    subprocess.run(["scontrol", "release", job_id], check=True)
    (decision,) = watch_until(lambda seen: bool(seen.decisions), timeout_s=180).decisions
    assert decision["job_id"] == job_id and decision["action"] == "rerun"
    new_id = str(decision["new_job_id"])
    waited = json.loads(js("wait", new_id, "--json", "--timeout", "120").stdout)["jobs"][0]
    assert waited["state"] == "COMPLETED"
    assert waited["record"]["req_mem_bytes"] >= 300 << 20


@pytest.mark.disruptive
@pytest.mark.usefixtures("lab_cluster")
def test_watcher_through_a_slurmctld_restart_reports_no_false_failure(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    job_id = js("submit", "command", "-P", "command=sleep 20", "--log-dir", str(workdir))
    job_id = job_id.stdout.strip()
    # a running job is followed by sacct alone, which slurmdbd answers without the
    # controller (issue 26): a job waiting on it needs squeue, so the cycles meet the outage
    after = js("submit", "command", "-P", "command=true", "-d", f"afterok:{job_id}",
               "--log-dir", str(workdir))  # fmt: skip
    assert after.exit_code == 0, after.output
    states: list[str] = []
    silent_cycles = 0
    outage = subprocess.Popen(
        ["sudo", "-n", "/usr/local/sbin/jobsmith-slurm-lab", "restart-ctld", "--pause", "8"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 150
    slowest = 0.0
    while time.monotonic() < deadline and "COMPLETED" not in states:
        started = time.monotonic()
        ran = js("watch", "--once", "--json")
        slowest = max(slowest, time.monotonic() - started)
        cycle = json.loads(ran.stdout)
        assert "scheduler_ok" in cycle, (ran.exit_code, ran.stdout, ran.stderr)
        silent_cycles += not cycle["scheduler_ok"]
        states += [c["state"] for c in cycle["changes"] if c["job_id"] == job_id]
        time.sleep(1)
    assert outage.wait(timeout=120) == 0
    # the watcher met the outage: Slurm's clients either failed (a silent cycle) or waited
    # for the controller to come back (a cycle blocked for seconds)
    assert silent_cycles > 0 or slowest >= 4, (silent_cycles, slowest)
    assert states[-1] == "COMPLETED"
    assert not [s for s in states if s not in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED")]


@pytest.mark.disruptive  # edits the lab user's real crontab: not alongside other tests
@pytest.mark.usefixtures("lab_cluster")
def test_watch_install_puts_one_line_in_the_crontab_that_runs_a_watcher_cycle(  # type: ignore[no-untyped-def]
    js, workdir: Path
) -> None:
    import shlex
    import shutil

    if shutil.which("crontab") is None:
        pytest.fail("crontab missing: scripts/setup installs Debian's cron")
    before = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
    try:
        for _ in range(2):  # idempotent: the second install replaces the first line
            out = js("watch", "--install", "--interval", "600", "--json")
            assert out.exit_code == 0, out.output
        table = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
    finally:
        restore = before if before.strip() else ""
        subprocess.run(["crontab", "-"], input=restore, text=True, check=False)
    lines = [x for x in table.splitlines() if "# jobsmith watch" in x]
    assert len(lines) == 1
    assert lines[0].startswith("*/10 * * * * ")
    words = shlex.split(lines[0].split(" ", 5)[5])
    redirect = next(i for i, w in enumerate(words) if w.startswith(">>"))
    assert words[redirect].endswith("/watch.log")  # each run logs to the state directory
    command = words[:redirect]
    assert command[1:] == ["--site", str(LAB_SITE), "watch", "--once"]
    assert Path(command[0]).name == "jobsmith" and Path(command[0]).is_absolute()
    # What cron would run, as cron runs it (as this user, a bare PATH), with --json added:
    # a watcher cycle that follows a job this test submitted.
    job_id = js("submit", "command", "-P", "command=true", "--log-dir", str(workdir)).stdout.strip()
    cron_env = {
        "HOME": os.environ["HOME"],
        "USER": os.environ["USER"],
        "LOGNAME": os.environ.get("LOGNAME", os.environ["USER"]),
        "SHELL": "/bin/sh",
        "PATH": "/usr/bin:/bin",
        # this test's private jobsmith home, where the job's session is
        **{k: v for k, v in os.environ.items() if k.startswith("JOBSMITH_")},
    }
    states: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "COMPLETED" not in states:
        ran = subprocess.run(
            [*command, "--json"], env=cron_env, capture_output=True, text=True, timeout=120
        )
        assert ran.returncode == 0, ran.stderr
        cycle = json.loads(ran.stdout)
        assert cycle["scheduler_ok"], cycle
        states += [c["state"] for c in cycle["changes"] if c["job_id"] == job_id]
        time.sleep(1)
    assert states and states[-1] == "COMPLETED", states


@pytest.mark.disruptive
@pytest.mark.usefixtures("lab_cluster")
def test_node_failure_for_real_is_diagnosed(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    job_id = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--no-requeue",
            "-p",
            "debug",
            "--mem=20M",
            "-o",
            f"{workdir}/nf_%j.out",
            "--wrap",
            "sleep 60",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deadline = time.monotonic() + 60
    while (
        "RUNNING"
        not in subprocess.run(
            ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
        ).stdout
    ):
        assert time.monotonic() < deadline, "job did not start"
        time.sleep(1)
    subprocess.run(
        ["sudo", "-n", "/usr/local/sbin/jobsmith-slurm-lab", "fail-node", "3"],
        check=True,
        capture_output=True,
    )
    deadline = time.monotonic() + 60
    while True:
        found = json.loads(js("diagnose", job_id, "--json").stdout)["diagnoses"][0]
        if found["verdict"] != "unknown" or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert found["verdict"] == "node_failure", found
    assert any("NODE_FAIL" in e for e in found["evidence"])
    assert found["retryable"]


@pytest.mark.usefixtures("lab_cluster")
def test_a_failure_seen_first_by_wait_still_gets_one_decision(js, workdir: Path) -> None:  # type: ignore[no-untyped-def]
    job_id = js(
        "submit", "command", "-P", "command=cat /nonexistent/in.mov", "--log-dir", str(workdir)
    ).stdout.strip()
    assert js("wait", job_id, "--timeout", "120").exit_code == 1  # records FAILED itself
    # right after the end, slurmdbd may still answer a cycle with its stand-in row, from
    # which nothing is decided (agent/runtime/recovery/standin.py): a later cycle decides
    cycles = []
    for _ in range(20):
        cycles.append(json.loads(js("watch", "--once", "--json").stdout))
        if cycles[-1]["decisions"]:
            break
        time.sleep(0.5)
    decided = [(d["job_id"], d["action"]) for c in cycles for d in c["decisions"]]
    assert decided == [(job_id, "report")], cycles
    again = json.loads(js("watch", "--once", "--json").stdout)
    assert again["decisions"] == [] and again["watched"] == 0  # decided once, then done

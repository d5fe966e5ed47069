"""The laptop stage is what it claims (issue 29): the SSH tests' login node is a cluster of
its own, which this machine reaches over SSH only, with this machine's Slurm commands
masked. `scripts/slurm-other laptop-test` runs these with the SSH tests; elsewhere they
skip (they are not lab tests: the lab is this machine's, and here nothing of it is used).

The stage itself fails when a masked command was called (its stubs' log); these check the
parts a test could silently get around.
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from login_node import Cluster, checked, login_node, write_file

SLURM_CLIENTS = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "sinfo", "sacctmgr", "srun")


@pytest.fixture
def cluster() -> Cluster:
    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    return node


def test_this_machines_slurm_commands_are_the_stub(cluster: Cluster) -> None:
    for name in SLURM_CLIENTS:
        found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
        assert found is not None, name
        assert "# jobsmith laptop stub" in Path(found).read_text(errors="replace"), found
    assert cluster.slurm_calls_here() == []


def test_the_cluster_is_another_machine_with_its_own_files(cluster: Cluster) -> None:
    assert checked(cluster, ["hostname"]).strip() == f"lab-{cluster.release}"
    assert socket.gethostname() != f"lab-{cluster.release}"
    mark = Path(f"/tmp/js-laptop-{uuid.uuid4().hex}")
    checked(cluster, ["touch", str(mark)])
    try:
        assert not mark.exists()  # the cluster's /tmp is not the laptop's
    finally:
        cluster.run(["rm", "-f", str(mark)])
    assert checked(cluster, ["test", "-d", "/scratch/alice"]) == ""  # the cluster's scratch
    routes = checked(cluster, ["ip", "-4", "route"]).splitlines()
    assert routes and all("default" not in r and "/30 " in r for r in routes), routes  # the pair


def test_the_clusters_slurm_answers_over_ssh(cluster: Cluster) -> None:
    version = checked(cluster, ["sbatch", "--version"]).split()[-1]
    assert version.split(".")[0] == {"trixie": "24", "bookworm": "22"}[cluster.release]
    assert "debug" in checked(cluster, ["sinfo", "-h", "-o", "%P"])


def test_an_input_that_exists_only_on_the_cluster_is_submitted_from_the_laptop(
    cluster: Cluster, tmp_path: Path
) -> None:
    """What a laptop user does: the input is on the cluster's scratch, not the laptop's
    (issue 29 item 2: its path is resolved and checked on the cluster)."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    write_file(cluster, there / "in.txt", "only on the cluster\n")
    assert not (there / "in.txt").exists()  # not on the laptop
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", there)
        args = ["-P", f"files={there / 'in.txt'}", "-P", "program=cat"]
        sub = jobsmith(env, tmp_path, site, "submit", "file_array", *args, "--log-dir", str(there))
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.strip()
        done = jobsmith(env, tmp_path, site, "wait", job_id, "--timeout", "120")
        assert done.returncode == 0, done.stderr
        logs = jobsmith(env, tmp_path, site, "logs", f"{job_id}_0", "--json")
        assert "only on the cluster" in logs.stdout, logs.stdout
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])


def test_the_log_directory_is_made_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """jobsmith makes the log directory where the job runs, the cluster, never the laptop
    (issue 29 item 2). Slurm 24.11 makes a missing output directory itself (seen in this
    stage); 22.05 cannot open the output there and the job fails to launch, so on 22.05
    this fails if jobsmith made it on the laptop instead."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    work = tmp_path / "work"
    logs = work / "logs"
    work.mkdir()
    checked(cluster, ["mkdir", "-p", str(work)])  # the working directory is there; logs/ not
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", work)
        sub = jobsmith(env, work, site, "submit", "command", "-P", "command=echo made",
                       "--log-dir", str(logs))  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.strip()
        assert not logs.exists()  # not here, on the laptop
        assert checked(cluster, ["test", "-d", str(logs)]) == ""  # but there, before sbatch
        done = jobsmith(env, work, site, "wait", job_id, "--timeout", "120")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert checked(cluster, ["cat", str(logs / f"command_{job_id}.out")]) == "made\n"
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(work)])


def test_paths_out_of_the_clusters_roots_are_refused_naming_the_path_there(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The cluster's symlinks are resolved on the cluster: an input, or a log directory,
    that leads out of the allowed roots there is refused (exit 3), the message naming the
    path, where it leads there, the login node and the roots; so is a path outside them,
    and one missing there is missing there (issue 29 item 2)."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    checked(cluster, ["mkdir", "-p", str(there)])
    checked(cluster, ["ln", "-s", "/etc/hostname", str(there / "in.txt")])
    checked(cluster, ["ln", "-s", "/tmp", str(there / "logs")])
    write_file(cluster, there / "ok.txt", "fine\n")
    assert not there.exists()  # none of it on the laptop
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", there)
        login = f"on {cluster.user}@{cluster.address}:{sshd.port}"

        def submit(files: Path, log_dir: Path) -> tuple[int, str]:
            args = ["-P", f"files={files}", "-P", "program=cat", "--log-dir", str(log_dir)]
            res = jobsmith(env, tmp_path, site, "submit", "file_array", *args)
            return res.returncode, res.stdout + res.stderr

        code, said = submit(there / "in.txt", there)
        assert code == 3, said
        assert f"'{there / 'in.txt'}' (resolves to '/etc/hostname') {login}" in said, said
        assert "is outside the allowed roots: " in said, said
        code, said = submit(there / "ok.txt", there / "logs")
        assert code == 3, said
        assert f"log dir {there / 'logs'} (resolves to /tmp) {login}" in said, said
        code, said = submit(Path("/etc/hostname"), there)
        assert code == 3 and f"'/etc/hostname' {login} is outside" in said, said
        code, said = submit(there / "gone.txt", there)
        assert code == 2 and f"'{there / 'gone.txt'}' does not exist {login}" in said, said
        assert cluster.slurm_calls_here() == []
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])


def test_transcode_and_render_frames_name_the_clusters_files(
    cluster: Cluster, tmp_path: Path
) -> None:
    """transcode's SOURCE and render-frames' BLEND_FILE are files on the cluster over SSH:
    neither is on the laptop, the source is probed with the cluster's ffprobe, and both
    plans are judged with their paths checked there (--dry-run: nothing submitted); a
    source missing there is refused naming the login node (issue 29 item 2)."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    checked(cluster, ["mkdir", "-p", str(there)])
    checked(cluster, ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
                      "testsrc=duration=4:size=64x48:rate=10", "-c:v", "libx264", "-g", "10",
                      str(there / "clip.mp4")])  # fmt: skip
    write_file(cluster, there / "scene.blend", "not read before the job\n")
    assert not there.exists()
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", there)
        login = f"on {cluster.user}@{cluster.address}:{sshd.port}"
        clip, out = str(there / "clip.mp4"), str(there / "out.mkv")
        res = jobsmith(env, tmp_path, site, "transcode", clip, out, "--chunk-seconds", "1",
                       "--dry-run", "--json")  # fmt: skip
        assert res.returncode == 0, res.stderr
        steps = {step["name"]: step for step in json.loads(res.stdout)["steps"]}
        video = steps["video"]["job"]
        assert video["array_tasks"] == 4  # a key frame a second, seen by ffprobe there
        assert video["inputs"] == [clip]
        res = jobsmith(env, tmp_path, site, "transcode", str(there / "gone.mp4"), out,
                       "--dry-run")  # fmt: skip
        assert (
            res.returncode == 2
            and f"{there / 'gone.mp4'} is not a regular file {login}" in res.stderr
        )
        res = jobsmith(env, tmp_path, site, "render-frames", str(there / "scene.blend"),
                       str(there / "frames"), "--frames", "1-4", "--dry-run")  # fmt: skip
        assert res.returncode == 0, res.stderr
        assert not (there / "frames").exists()
        assert cluster.slurm_calls_here() == []
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])


def test_missing_only_decodes_the_clusters_frames_there_in_one_command(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`render-frames --missing-only` over SSH: the frames already rendered are the
    cluster's files, none of them on the laptop; they are looked at and decoded there
    (the cluster's ffmpeg), the whole range in one command, and only the missing, empty
    and broken frames are planned again (issue 29 item 2, its author's leftover (i))."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    frames = there / "frames"
    checked(cluster, ["mkdir", "-p", str(frames)])
    for frame in (1, 2, 4, 6):
        checked(cluster, ["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
                          "color=c=blue:s=32x24", "-frames:v", "1",
                          str(frames / f"frame_{frame:05d}.png")])  # fmt: skip
    write_file(cluster, frames / "frame_00005.png", "not a picture\n")
    checked(cluster, ["truncate", "-s", "0", str(frames / "frame_00006.png")])
    write_file(cluster, there / "scene.blend", "not read before the job\n")
    assert not there.exists()  # the frames are the cluster's only
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", there)
        login = f"on {cluster.user}@{cluster.address}:{sshd.port}"
        args = [str(there / "scene.blend"), str(frames), "--frames", "1-7", "--dry-run"]

        def commands(*more: str) -> tuple[Any, int]:
            """The command's result, and how many commands it ran on the login node."""
            before = sshd.log_text().count("Starting session: command")
            res = jobsmith(env, tmp_path, site, "render-frames", *args, *more)
            return res, sshd.log_text().count("Starting session: command") - before

        commands()  # what is learnt once about the cluster (its config) is kept
        whole, plain = commands("--json")
        assert whole.returncode == 0, whole.stderr
        repair, asked = commands("--missing-only", "--json")
        assert repair.returncode == 0, repair.stderr
        assert asked == plain + 1, (plain, asked)  # every frame in one command
        steps = {step["name"]: step for step in json.loads(repair.stdout)["steps"]}
        assert steps["render"]["job"]["params"]["blocks"] == ["3-3", "5-7"]
        assert steps["check"]["job"]["params"]["frame_start"] == 1  # the range, checked again
        for frame in (3, 5, 7):
            checked(cluster, ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                              "color=c=blue:s=32x24", "-frames:v", "1",
                              str(frames / f"frame_{frame:05d}.png")])  # fmt: skip
        checked(cluster, ["cp", str(frames / "frame_00001.png"), str(frames / "frame_00006.png")])
        done, _ = commands("--missing-only")
        assert done.returncode == 2, done.stderr
        assert f"1-7 in {frames} {login} is there and decodes" in done.stderr, done.stderr
        assert not there.exists()
        assert cluster.slurm_calls_here() == []
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])


def test_a_symlink_loop_on_the_cluster_is_refused_naming_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A loop among the cluster's symlinks is named as one, with the login node (exit
    2), where it used to be "does not exist" (issue 29 item 2, leftover (ii))."""
    from lab_cli import write_user_site
    from sshd import start_sshd
    from test_ssh_transport import jobsmith, laptop_env, remote_site

    there = Path(f"/scratch/{cluster.user}/js-laptop-{uuid.uuid4().hex[:12]}")
    checked(cluster, ["mkdir", "-p", str(there)])
    checked(cluster, ["ln", "-s", str(there / "b"), str(there / "a")])
    checked(cluster, ["ln", "-s", str(there / "a"), str(there / "b")])
    sshd = start_sshd(tmp_path / "sshd", node=cluster)
    try:
        known = tmp_path / "known_hosts"
        known.write_text(sshd.known_hosts_line())
        site = remote_site(tmp_path, sshd, known)
        env = laptop_env(tmp_path / "home")
        write_user_site(tmp_path / "home" / "config", there)
        login = f"on {cluster.user}@{cluster.address}:{sshd.port}"
        args = ["-P", f"files={there / 'a' / 'in.txt'}", "-P", "program=cat"]
        res = jobsmith(env, tmp_path, site, "submit", "file_array", *args, "--log-dir", str(there))
        said = res.stdout + res.stderr
        assert res.returncode == 2, said
        assert f"cannot resolve '{there / 'a' / 'in.txt'}' {login}: Symlink loop from '" in said
        assert cluster.slurm_calls_here() == []
    finally:
        sshd.stop()
        cluster.run(["rm", "-rf", str(there)])

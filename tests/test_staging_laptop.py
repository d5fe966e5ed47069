"""put and get over both transports (issue 29 item 3), against the real sshd of
tests/sshd.py: in the laptop stage (`scripts/slurm-other laptop-test`) on a cluster whose
files are not the laptop's, else on loopback. No Slurm command runs: staging asks the
login node's sh, realpath, stat, sha256sum, rsync and SFTP server only.

What is proved, for `openssh` (rsync through the ControlMaster) and `ssh` (SFTP over the
paramiko connection): a file put and got back is byte-identical to what the cluster holds,
and a second put sends nothing; a remote path outside the site's roots, or a symlink there
leading out of them, is refused naming the path there and the login node, and nothing is
copied; a 200 MB put killed mid-copy resumes, sending less than the file the second time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lab_cli import write_user_site
from login_node import Cluster, ThisMachine, checked, login_node, read_file
from sshd import Sshd, close_master, open_master, start_sshd
from test_ssh_transport import VENV_BIN, WRAPPER_TOOLS, jobsmith, laptop_env, remote_site

KINDS = ("openssh", "ssh")
BIG = 200 << 20


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    server = start_sshd(
        tmp_path_factory.mktemp("sshd"), extra_config="Subsystem sftp internal-sftp\n"
    )
    yield server
    server.stop()


@pytest.fixture
def there() -> Iterator[Path]:
    """A directory of the test's own in the scratch of the login node."""
    node = login_node()
    user = checked(node, ["id", "-un"]).strip()
    path = Path(f"/scratch/{user}/js-staging-{uuid.uuid4().hex[:12]}")
    checked(node, ["mkdir", "-p", str(path)])
    yield path
    node.run(["rm", "-rf", str(path)])


class Laptop:
    """jobsmith on the laptop, its site reaching the sshd by `kind`."""

    def __init__(self, kind: str, sshd: Sshd, known_hosts: Path, tmp: Path, there: Path):
        self.tmp = tmp
        self.env = laptop_env(tmp / "home")
        if "PYTHONPATH" in os.environ:  # a worktree's own code (asalice-wt), not the venv's
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        write_user_site(tmp / "home" / "config", there)
        site = remote_site(tmp, sshd, known_hosts)
        self.socket: Path | None = None
        if kind == "openssh":
            self.socket = Path(f"/tmp/js-cm-{os.getpid()}-{tmp.name[-12:]}.sock")
            open_master(sshd, known_hosts, self.socket)
            text = site.read_text().replace("  kind: ssh\n", "  kind: openssh\n")
            text = text.replace(
                f"  key_file: {sshd.client_key}\n", f"  control_path: {self.socket}\n"
            )
            site.write_text(text)
            tools = tmp / "ssh-bin"  # the laptop has ssh, rsync and cksum, and no Slurm command
            tools.mkdir()
            for name in ("ssh", "rsync", "cksum"):
                (tools / name).symlink_to(shutil.which(name) or f"/usr/bin/{name}")
            self.env["PATH"] += f":{tools}"
        self.site = site
        self.port = sshd.port

    def argv(self, *args: str) -> list[str]:
        return [str(VENV_BIN / "jobsmith"), "--site", str(self.site), *args]

    def run(self, *args: str) -> Any:
        return jobsmith(self.env, self.tmp, self.site, *args)

    def staged(self, *args: str) -> dict[str, Any]:
        """put or get with --json: the one file's entry."""
        res = self.run(*args, "--json")
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        files: list[dict[str, Any]] = json.loads(res.stdout)["files"]
        assert len(files) == 1
        return files[0]

    def close(self) -> None:
        if self.socket is not None:
            close_master(self.socket, self.port)


#: makes a Laptop of a kind ("openssh" or "ssh") on the module's sshd
LaptopOf = Callable[[str], Laptop]


@pytest.fixture
def laptop_of(sshd: Sshd, known_hosts: Path, tmp_path: Path, there: Path) -> Iterator[LaptopOf]:
    """Laptops the test makes, each closed after it."""
    made: list[Laptop] = []

    def make(kind: str) -> Laptop:
        made.append(Laptop(kind, sshd, known_hosts, tmp_path, there))
        return made[-1]

    yield make
    for laptop in made:
        laptop.close()


@pytest.fixture
def staged_dirs() -> Iterator[set[Path]]:
    """The cluster's directories the test's `@local:` files were staged into (the test
    adds them as it learns them): removed after it, whatever it asserted."""
    dirs: set[Path] = set()
    yield dirs
    for directory in dirs:
        login_node().run(["rm", "-rf", str(directory)])


@pytest.fixture(params=KINDS)
def laptop(request: pytest.FixtureRequest, laptop_of: LaptopOf) -> Laptop:
    return laptop_of(request.param)


def sha256_there(path: Path) -> str:
    return checked(login_node(), ["sha256sum", "--", str(path)]).split()[0]


def size_there(path: Path) -> int | None:
    res = login_node().run(["stat", "-c", "%s", "--", str(path)])
    return int(res.stdout) if res.returncode == 0 else None


def write_random(path: Path, size: int) -> str:
    """path holds size random bytes; their sha256."""
    digest = hashlib.sha256()
    with path.open("wb") as f:
        for _ in range(0, size, 1 << 20):
            block = os.urandom(min(1 << 20, size - f.tell()))
            digest.update(block)
            f.write(block)
    return digest.hexdigest()


def test_put_then_get_is_byte_identical_and_a_second_put_sends_nothing(
    laptop: Laptop, there: Path, tmp_path: Path
) -> None:
    local = tmp_path / "my clip's data.bin"  # a space and a quote, sent as they are
    digest = write_random(local, 3_000_001)
    put = laptop.staged("put", str(local), "--to", str(there))
    assert put["target"] == str(there / local.name)
    assert put["size"] == 3_000_001 and put["transferred"] >= 3_000_001 * 0.9, put
    assert put["via"] == ("stream" if laptop.socket else "sftp"), put  # a new file: streamed
    assert sha256_there(there / local.name) == digest
    if isinstance(login_node(), Cluster):
        assert not (there / local.name).exists()  # on the cluster, not the laptop
    again = laptop.staged("put", str(local), "--to", str(there))
    assert again["transferred"] == 0, again
    back = tmp_path / "back"
    got = laptop.staged("get", str(there / local.name), "--to", str(back))
    assert got["target"] == str((back / local.name).resolve())
    assert hashlib.sha256((back / local.name).read_bytes()).hexdigest() == digest
    assert laptop.staged("get", str(there / local.name), "--to", str(back))["transferred"] == 0


def test_paths_out_of_the_clusters_roots_are_refused_naming_them(
    laptop: Laptop, there: Path, tmp_path: Path
) -> None:
    node = login_node()
    checked(node, ["ln", "-s", "/tmp", str(there / "out")])
    checked(node, ["ln", "-s", "/etc/hostname", str(there / "name.txt")])
    local = tmp_path / "f.txt"
    local.write_text("x\n")
    user = checked(node, ["id", "-un"]).strip()
    login = f"on {user}@{node.address}:{laptop.port}"

    res = laptop.run("put", str(local), "--to", str(there / "out"))
    assert res.returncode == 3, res.stderr
    assert f"'{there / 'out'}' (resolves to '/tmp') {login}" in res.stderr, res.stderr
    assert f"{login} is outside the allowed roots" in res.stderr, res.stderr
    assert read_file(node, Path("/tmp/f.txt")) is None  # nothing went there

    res = laptop.run("put", str(local), "--to", "/etc")
    assert res.returncode == 3 and "path '/etc' " in res.stderr, res.stderr

    res = laptop.run("get", str(there / "name.txt"), "--to", str(tmp_path / "back"))
    assert res.returncode == 3, res.stderr
    assert f"'{there / 'name.txt'}' (resolves to '/etc/hostname') {login}" in res.stderr
    assert not (tmp_path / "back" / "hostname").exists()


def test_an_interrupted_put_of_200_mb_resumes_without_starting_over(
    laptop: Laptop, there: Path, tmp_path: Path
) -> None:
    local = tmp_path / "big.bin"
    digest = write_random(local, BIG)
    # 20 MiB a second: killed after about 60 MB, whatever the link's own speed
    argv = laptop.argv("put", str(local), "--to", str(there), "--bwlimit", "20480")
    proc = subprocess.Popen(argv, env=laptop.env, cwd=tmp_path, start_new_session=True)
    time.sleep(3)
    assert proc.poll() is None, "the throttled put ended before it was interrupted"
    os.killpg(proc.pid, signal.SIGTERM)  # jobsmith and its rsync and ssh, as Ctrl-C would
    proc.wait(timeout=30)
    time.sleep(1)
    assert size_there(there / local.name) is None  # no whole file: not finished
    partial = there / ".jobsmith-partial" / local.name  # rsync's --partial-dir
    if size_there(partial) is None:
        partial = there / f"{local.name}.jobsmith-partial"  # SFTP's
    kept = size_there(partial)
    assert kept is not None and 0 < kept < BIG, kept
    resumed = laptop.staged("put", str(local), "--to", str(there))
    print(f"{resumed['via']}: {kept} bytes kept of {BIG}, {resumed['transferred']} sent after")
    assert resumed["size"] == BIG
    assert resumed["via"] == ("rsync" if laptop.socket else "sftp"), resumed  # not streamed anew
    assert resumed["transferred"] < BIG - kept // 2, (resumed, kept)
    assert sha256_there(there / local.name) == digest
    assert size_there(partial) is None


def test_a_local_site_has_nothing_to_stage(tmp_path: Path) -> None:
    """put, get and wait --get on a site whose Slurm runs here: one line saying so, exit
    2, nothing asked of anyone (wait --get says so before it waits)."""
    from lab_cli import LAB_SITE

    env = laptop_env(tmp_path / "home")
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    (tmp_path / "f.txt").write_text("x\n")
    for args in (("put", "f.txt"), ("get", "/scratch/x/f.txt"), ("wait", "1", "--get", "x")):
        res = jobsmith(env, tmp_path, LAB_SITE, *args)
        assert res.returncode == 2, res.stderr
        assert res.stderr.startswith("jobsmith: error: nothing to stage: this site's Slurm runs")
        assert len(res.stderr.splitlines()) == 1


def test_a_clip_only_on_the_laptop_is_staged_transcoded_and_got_back(
    tmp_path: Path, there: Path, laptop_of: LaptopOf, staged_dirs: set[Path]
) -> None:
    """Issue 29 item 3's first 'done when', from the laptop stage: `transcode
    @local:clip.mp4` stages the clip (on the laptop only) to the cluster's scratch, the
    plan transcodes it there and verifies it there, and `get` brings out.mkv back
    byte-identical to what the cluster holds, as does `get SESSION` (the outputs the
    plan's templates declare); the session notes what was staged where; the clip staged
    again sends nothing."""
    from test_transcode import make_clip

    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    laptop = laptop_of("openssh")
    clip = make_clip(tmp_path / "clip.mp4", seconds=6)
    out = there / "out.mkv"
    res = laptop.run("transcode", f"@local:{clip}", str(out), "--chunk-seconds", "2",
                     "--preset", "ultrafast", "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stderr.splitlines() if x.startswith("jobsmith: staged "))
    staged = Path(line.split(" -> ", 1)[1].rsplit(" (", 1)[0])
    staged_dirs.add(staged.parent)
    assert staged.name == "clip.mp4" and staged.parent.parent.name == "jobsmith-staged"
    assert sha256_there(staged) == hashlib.sha256(clip.read_bytes()).hexdigest()
    jobs = json.loads(res.stdout)["jobs"]
    waited = laptop.run("wait", *jobs.values(), "--timeout", "300")
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    report = json.loads(checked(node, ["cat", f"{out}.verify.json"]))
    assert report["source_streams"] == report["output_streams"] == "audio,video"
    got = laptop.staged("get", str(out), "--to", str(tmp_path / "back"))
    assert got["size"] == size_there(out) and got["transferred"] > 0
    back = (tmp_path / "back" / "out.mkv").read_bytes()
    assert hashlib.sha256(back).hexdigest() == sha256_there(out)
    session = json.loads(res.stdout)["session_id"]
    log = laptop.run("sessions", "export", session)
    notes = [json.loads(x)["data"] for x in log.stdout.splitlines() if '"note"' in x]
    (staged_note,) = [n["staged"] for n in notes if "staged" in n]
    assert staged_note[0]["source"] == str(clip) and staged_note[0]["target"] == str(staged)
    fetched = laptop.run("get", session, "--to", str(tmp_path / "all"), "--json")
    assert fetched.returncode == 0, fetched.stderr
    targets = {Path(f["target"]).name: f for f in json.loads(fetched.stdout)["files"]}
    assert "out.mkv" in targets, targets  # the plan's declared outputs that are files
    assert (tmp_path / "all" / "out.mkv").read_bytes() == back
    again = laptop.run("transcode", f"@local:{clip}", str(there / "again.mkv"), "--dry-run")
    assert again.returncode == 0, again.stderr
    assert f"-> {staged} (0 bytes sent, rsync)" in again.stderr, again.stderr
    assert cluster_calls_none()


def cluster_calls_none() -> bool:
    """No Slurm command of the laptop was called (the stage's stubs log each call)."""
    node = login_node()
    return not isinstance(node, Cluster) or node.slurm_calls_here() == []


def staged_lines(stderr: str) -> dict[str, Path]:
    """The laptop's file -> where it went on the cluster, from the `jobsmith: staged` lines."""
    found = {}
    for line in stderr.splitlines():
        if line.startswith("jobsmith: staged "):
            source, rest = line.removeprefix("jobsmith: staged ").split(" -> ", 1)
            found[source] = Path(rest.rsplit(" (", 1)[0])
    return found


def test_a_bwa_align_array_over_fastq_only_on_the_laptop_is_staged_run_and_got_back(
    tmp_path: Path, there: Path, laptop_of: LaptopOf, staged_dirs: set[Path]
) -> None:
    """Issue 29 item 3's second 'done when', from the laptop stage, over SFTP (the clip above
    goes over rsync): a bwa-indexed reference and a sample sheet of two samples' FASTQ pairs
    exist on the laptop only; `submit bwa_align -P reference=@local:… -P samples=@local:…`
    stages the reference with its index (the template's `companions`), each FASTQ the sheet
    names and the sheet itself with its cells rewritten to the cluster's paths; the array's
    two tasks run Debian's bwa and samtools on the cluster, and `get` brings the BAMs and
    their indexes back byte-identical to what the cluster holds, named one by one and as
    `get SESSION` (the template's declared `output_dir`, a directory: its files below
    DIR/aligned/; a symlink put in it leading out of the roots there refuses it, naming the
    link). The session notes every file staged; none of it is on the laptop's side of the
    cluster's paths. Then a samtools_merge of the same sheet (its FASTQs not sent again) and
    `wait --get DIR`, which brings the merged BAM (the merge's declared output) back when
    the job has ended (issue 29 item 3's automatic fetch, asked for on the command line)."""
    from template_examples import write_bwa_inputs

    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    laptop = laptop_of("ssh")
    data = tmp_path / "data"
    write_bwa_inputs(data, ("S1", "S2"))  # genome.fa + index, reads/S*_[12].fq, sheet
    out = there / "aligned"
    res = laptop.run(
        "submit", "bwa_align", "-P", "reference=@local:data/genome.fa",
        "-P", "samples=@local:data/reads/samples.tsv", "-P", f"output_dir={out}",
        "-c", "1", "--mem", "1G", "-t", "10", "--log-dir", str(there / "logs"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    staged = staged_lines(res.stderr)
    staged_dirs.update(p.parent for p in staged.values())
    index = [f"genome.fa{s}" for s in ("", ".amb", ".ann", ".bwt", ".pac", ".sa")]
    fastq = [f"reads/S{n}_{e}.fq" for n in (1, 2) for e in (1, 2)]
    assert sorted(staged) == sorted(str(data / f) for f in [*index, *fastq, "reads/samples.tsv"])
    for name in [*index, *fastq]:
        assert (
            sha256_there(staged[str(data / name)])
            == hashlib.sha256((data / name).read_bytes()).hexdigest()
        ), name
    assert len({p.parent for p in staged.values()}) == 2  # one per laptop directory
    sheet = checked(node, ["cat", str(staged[str(data / "reads" / "samples.tsv")])])
    cells = [[str(staged[str(data / f"reads/S{n}_{e}.fq")]) for e in (1, 2)] for n in (1, 2)]
    rows = [f"S{n}\t{r1}\t{r2}" for n, (r1, r2) in zip((1, 2), cells, strict=True)]
    assert sheet.splitlines() == ["sample\tr1\tr2", *rows]
    submitted = json.loads(res.stdout)
    waited = laptop.run("wait", submitted["job_id"], "--timeout", "300")
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    files = [out / f"S{n}.bam{e}" for n in (1, 2) for e in ("", ".bai")]
    for n in (1, 2):
        mapped = checked(node, ["samtools", "view", "-c", "-F", "4", str(out / f"S{n}.bam")])
        assert int(mapped) > 90, mapped  # 50 error-free pairs, all mapped
    got = laptop.run("get", *map(str, files), "--to", str(tmp_path / "back"), "--json")
    assert got.returncode == 0, got.stderr
    assert [f["via"] for f in json.loads(got.stdout)["files"]] == ["sftp"] * 4
    for path in files:
        back = (tmp_path / "back" / path.name).read_bytes()
        assert hashlib.sha256(back).hexdigest() == sha256_there(path), path
        assert not path.exists()  # on the cluster only
    log = laptop.run("sessions", "export", submitted["session_id"])
    notes = [json.loads(x)["data"] for x in log.stdout.splitlines() if '"note"' in x]
    (note,) = [n["staged"] for n in notes if "staged" in n]
    assert {f["source"]: Path(f["target"]) for f in note} == staged

    # `get SESSION`: the declared output_dir is a directory; its files come back
    # below DIR/aligned/, listed there in one command, byte-identical
    session = submitted["session_id"]
    whole = laptop.run("get", session, "--to", str(tmp_path / "session"), "--json")
    assert whole.returncode == 0, whole.stderr
    document = json.loads(whole.stdout)
    assert document["not_got"] == [], document
    assert sorted(f["source"] for f in document["files"]) == sorted(map(str, files))
    for path in files:
        back = (tmp_path / "session" / "aligned" / path.name).read_bytes()
        assert hashlib.sha256(back).hexdigest() == sha256_there(path), path
    # a symlink there leading out of the roots refuses the directory, naming it
    checked(node, ["ln", "-s", "/etc/hostname", str(out / "name.bam")])
    refused = laptop.run("get", session, "--to", str(tmp_path / "refused"))
    assert refused.returncode == 3, refused.stderr
    assert f"'{out / 'name.bam'}' (resolves to '/etc/hostname') on " in refused.stderr
    assert not (tmp_path / "refused").exists()  # refused before anything was copied
    checked(node, ["rm", "--", str(out / "name.bam")])

    # the merge reads the same sheet: its FASTQs are there whole (0 bytes sent), and
    # `wait --get` brings the merged BAM (its declared output) back when it has ended
    merged = there / "merged" / "all.bam"
    res = laptop.run(
        "submit", "samtools_merge", "-P", f"bam_dir={out}", "-P", f"output={merged}",
        "-P", "samples=@local:data/reads/samples.tsv", "-c", "1", "--mem", "1G",
        "-t", "10", "--log-dir", str(there / "logs"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    again = staged_lines(res.stderr)
    assert sorted(again) == sorted(str(data / f) for f in [*fastq, "reads/samples.tsv"])
    for name in fastq:
        assert f"{staged[str(data / name)]} (0 bytes sent, sftp)" in res.stderr, res.stderr
    job = json.loads(res.stdout)["job_id"]
    waited = laptop.run("wait", job, "--timeout", "300", "--get", "merged-back", "--json")
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    document = json.loads(waited.stdout)
    assert [j["state"] for j in document["jobs"]] == ["COMPLETED"], document
    (copied,) = document["got"]["files"]
    assert copied["source"] == str(merged) and copied["transferred"] == copied["size"] > 0
    back = (tmp_path / "merged-back" / "all.bam").read_bytes()
    assert hashlib.sha256(back).hexdigest() == sha256_there(merged)
    assert cluster_calls_none()


def test_a_list_of_local_files_is_staged_item_by_item(
    tmp_path: Path, there: Path, laptop_of: LaptopOf, staged_dirs: set[Path]
) -> None:
    """`-P files=@local:a,CLUSTER_PATH,@local:b` (a `paths` value): each `@local:` item is
    staged and the job is given the cluster's paths in the order given, the cluster's own
    item as it was (a --dry-run: rendered and checked on the cluster, nothing submitted)."""
    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    laptop = laptop_of("openssh")
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(f"{name}\n")
    checked(node, ["sh", "-c", 'echo c > "$1"', "sh", str(there / "c.txt")])
    res = laptop.run(
        "submit", "file_array", "-P", f"files=@local:a.txt,{there / 'c.txt'},@local:b.txt",
        "-P", "program=cat", "--log-dir", str(there / "logs"), "--dry-run",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    staged = staged_lines(res.stderr)
    staged_dirs.update(p.parent for p in staged.values())
    assert sorted(staged) == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    words = [str(staged[str(tmp_path / "a.txt")]), str(there / "c.txt")]
    words.append(str(staged[str(tmp_path / "b.txt")]))
    assert "files=(" + " ".join(words) + ")" in res.stdout, res.stdout
    assert "#SBATCH --array=0-2" in res.stdout
    assert cluster_calls_none()


def test_a_local_sheet_or_reference_missing_a_file_here_is_refused_before_anything_is_sent(
    tmp_path: Path, there: Path, laptop_of: LaptopOf
) -> None:
    """Checked on the laptop before the first byte is sent: a sample sheet naming a FASTQ
    that is not here is refused naming the sheet, its line and column and the file; a
    reference without its index beside it names the index file missing. Exit 2, and no
    `staged` line: nothing went to the cluster."""
    from template_examples import write_bwa_inputs

    laptop = laptop_of("ssh")
    data = tmp_path / "data"
    write_bwa_inputs(data, ("S1", "S2"))
    (data / "reads" / "S2_2.fq").unlink()
    args = ("submit", "bwa_align", "-P", "reference=@local:data/genome.fa",
            "-P", "samples=@local:data/reads/samples.tsv", "-P", f"output_dir={there}",
            "--dry-run")  # fmt: skip
    res = laptop.run(*args)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(
        f"jobsmith: error: parameter 'samples': the sample sheet "
        f"'{data / 'reads' / 'samples.tsv'}' on this machine: line 3, column 'r2': "
        f"'{data / 'reads' / 'S2_2.fq'}' is not a regular file on this machine"
    ), res.stderr
    assert "staged" not in res.stderr
    write_bwa_inputs(data, ("S1", "S2"))
    (data / "genome.fa.bwt").unlink()
    res = laptop.run(*args)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(
        f"jobsmith: error: parameter 'reference': '{data / 'genome.fa.bwt'}' is not a "
        f"regular file on this machine ('{data / 'genome.fa'}' needs it beside it)"
    ), res.stderr
    assert "staged" not in res.stderr


@pytest.mark.parametrize(
    ("kind", "tool"), [("openssh", "rsync"), ("openssh", "stat"), ("ssh", "sha256sum")]
)
def test_a_login_node_without_the_tool_a_copy_needs_is_one_error_naming_it(
    kind: str, tool: str, tmp_path: Path, there: Path
) -> None:
    """put on a login node whose PATH lacks the login node's rsync (openssh), the stat
    that checks a copy's size after (openssh) or the sha256sum that checks it (ssh): one
    error naming the tool, the login node and the package (`ToolMissing`, exit 2), asked
    in the same command that needed it; rsync's own "connection unexpectedly closed"
    never reaches the user. With the tool back, the same put works."""
    from jobsmith.adapters.login_tools import WHAT

    node = login_node()
    bin_dir = (
        tmp_path / "login-bin"
        if isinstance(node, ThisMachine)
        else Path(f"/tmp/js-login-bin-{uuid.uuid4().hex[:12]}")
    )
    tools = ("sh", *WRAPPER_TOOLS, "realpath", "od", "tr", "mkdir", "stat", "sha256sum", "rsync")
    link = 'mkdir -p "$1" && cd "$1" && shift && for t do ln -sf "$(command -v "$t")" .; done'
    checked(node, ["sh", "-c", link, "sh", str(bin_dir), *tools])
    server = start_sshd(
        tmp_path / "sshd",
        login_env={"PATH": str(bin_dir)},
        extra_config="Subsystem sftp internal-sftp\n",
        node=node,
    )
    known = tmp_path / "known_hosts"
    known.write_text(server.known_hosts_line())
    laptop = Laptop(kind, server, known, tmp_path, there)
    try:
        local = tmp_path / "f.bin"
        write_random(local, 100_000)
        checked(node, ["mv", str(bin_dir / tool), str(bin_dir / f"{tool}.away")])
        try:
            res = laptop.run("put", str(local), "--to", str(there))
        finally:
            checked(node, ["mv", str(bin_dir / f"{tool}.away"), str(bin_dir / tool)])
        assert res.returncode == 2, res.stderr
        user = checked(node, ["id", "-un"]).strip()
        package = "rsync" if tool == "rsync" else "coreutils"
        assert res.stderr.startswith(
            f"jobsmith: error: the login node {user}@{node.address}:{server.port} has no "
            f"{WHAT[tool]} on the PATH jobsmith's commands get there ({tool}): install it "
            f"there (Debian: apt install {package})"
        ), res.stderr
        assert len(res.stderr.splitlines()) == 1, res.stderr
        assert laptop.staged("put", str(local), "--to", str(there))["size"] == 100_000
        if kind == "openssh":  # no cat or mv there: a new large file goes by rsync alone
            big = tmp_path / "big.bin"
            digest = write_random(big, 2 << 20)
            copied = laptop.staged("put", str(big), "--to", str(there))
            assert copied["via"] == "rsync" and copied["transferred"] >= 2 << 20, copied
            assert sha256_there(there / big.name) == digest
    finally:
        laptop.close()
        server.stop()
        node.run(["rm", "-rf", str(bin_dir)])


def test_the_watcher_copies_an_ended_sessions_outputs_back_where_the_users_file_asks(
    tmp_path: Path, there: Path, laptop_of: LaptopOf, staged_dirs: set[Path]
) -> None:
    """`staging.fetch_outputs_to` in the user's file: the watcher cycle that sees a
    session's work end copies the outputs its jobs declared into DIR/SESSION/ on the
    laptop (a clip's sound encoded on the cluster from a clip staged with `@local:`),
    byte-identical, and notes it in the session; later cycles copy nothing again."""
    from test_transcode import make_clip

    node = login_node()
    if not isinstance(node, Cluster):
        pytest.skip("runs in the laptop stage only: scripts/slurm-other laptop-test")
    laptop = laptop_of("openssh")
    fetched = tmp_path / "fetched"
    user_site = tmp_path / "home" / "config" / "site.yaml"
    user_site.write_text(user_site.read_text() + f"staging:\n  fetch_outputs_to: '{fetched}'\n")
    clip = make_clip(tmp_path / "clip.mp4", seconds=2)
    out = there / "sound.m4a"
    res = laptop.run(
        "submit", "ffmpeg_audio", "-P", f"input=@local:{clip}", "-P", f"output={out}",
        "-c", "1", "--mem", "1G", "-t", "10", "--log-dir", str(there / "logs"), "--json",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    staged = staged_lines(res.stderr)
    staged_dirs.update(p.parent for p in staged.values())
    session = json.loads(res.stdout)["session_id"]
    copy = fetched / session / "sound.m4a"
    deadline = time.monotonic() + 180
    while not copy.exists():
        assert time.monotonic() < deadline, "the watcher never copied the output back"
        cycle = laptop.run("watch", "--once")
        assert cycle.returncode == 0, cycle.stderr
        time.sleep(2)
    assert f"jobsmith: session {session} ended: 1 declared output(s) copied" in cycle.stderr
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == sha256_there(out)
    again = laptop.run("watch", "--once")
    assert again.returncode == 0 and "copied" not in again.stderr, again.stderr
    log = laptop.run("sessions", "export", session)
    notes = [json.loads(x)["data"] for x in log.stdout.splitlines() if '"note"' in x]
    (note,) = [n["fetched_outputs"] for n in notes if "fetched_outputs" in n]
    assert [f["target"] for f in note["files"]] == [str(copy.resolve())]
    assert cluster_calls_none()

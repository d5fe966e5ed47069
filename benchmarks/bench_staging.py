"""Staging's cost (issue 29 item 3): `jobsmith put` of one large file against plain rsync
and scp of the same file over the same link, through the same ControlMaster.

Run as the lab user (it starts its own sshd on loopback, with the SFTP subsystem, which
can log in only the user it runs as), from the checkout:

    runuser -u alice -- .venv/bin/python benchmarks/bench_staging.py              # 1 GiB, 3 rounds
    runuser -u alice -- .venv/bin/python benchmarks/bench_staging.py --mib 256 --rounds 5

Each round copies the file once each way below, to a directory emptied first, in an order
that rotates from round to round (so no way always goes first, with the page cache cold
or warm): plain `rsync` with the master's ssh as its remote shell, plain `scp` through
the master (OpenSSH's scp speaks SFTP), `jobsmith put` over `openssh` (a new file streamed
through the master, its CRC compared by cksum on both ends, its paths checked on the login
node first, its size compared after) and
`jobsmith put` over `ssh` (SFTP on paramiko's connection, and sha256sum on both sides
after). The jobsmith figures are whole commands: Python's start-up, the site file, the
roots asked of the login node. Printed: each round's seconds, the medians, and each
round's ratio to that round's plain rsync and plain scp (then the medians of those ratios).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from sshd import close_master, open_master, start_sshd  # noqa: E402

HOST = "127.0.0.1"
LAB_SITE = HERE.parent / "site_config" / "examples" / "lab.yaml"
JOBSMITH = Path(sys.executable).parent / "jobsmith"


def write_source(path: Path, mib: int) -> None:
    with path.open("wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))


def site_file(path: Path, kind: str, port: int, key: Path, known: Path, socket: Path) -> Path:
    """The lab's site file with its scheduler block reaching the bench's sshd by kind."""
    local = "  kind: local            # run sbatch & co. on this host (the login node)\n"
    lab = LAB_SITE.read_text()
    assert local in lab
    block = f"  kind: {kind}\n  host: {HOST}\n  port: {port}\n  known_hosts: {known}\n"
    block += f"  key_file: {key}\n" if kind == "ssh" else f"  control_path: {socket}\n"
    path.write_text(lab.replace(local, block))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="the file's size (MiB)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-staging-"))
    sshd = start_sshd(work / "sshd", extra_config="Subsystem sftp internal-sftp\n")
    known = work / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    socket = Path(f"/tmp/js-bench-staging-{os.getpid()}.sock")
    open_master(sshd, known, socket)
    try:
        run(work, sshd.port, sshd.client_key, known, socket, args.mib, args.rounds)
    finally:
        close_master(socket, sshd.port)
        sshd.stop()
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, port: int, key: Path, known: Path, socket: Path, mib: int, rounds: int) -> None:
    source = work / "big.bin"
    write_source(source, mib)
    target = work / "there"
    config = work / "config"
    config.mkdir()
    (config / "site.yaml").write_text(
        f"paths:\n  allowed_roots: ['~', '/scratch/$USER', '{work}']\n"
    )
    env = {
        **{k: os.environ[k] for k in ("HOME", "USER", "LOGNAME", "PATH") if k in os.environ},
        "LANG": "C.UTF-8",
        "JOBSMITH_CONFIG_DIR": str(config),
        "JOBSMITH_STATE_DIR": str(work / "state"),
        "JOBSMITH_WARM": "0",
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}),
    }
    ssh = ["ssh", "-S", str(socket), "-o", "ControlMaster=no", "-o", "BatchMode=yes",
           "-o", f"UserKnownHostsFile={known}", "-p", str(port)]  # fmt: skip
    sites = {
        k: site_file(work / f"{k}.yaml", k, port, key, known, socket) for k in ("openssh", "ssh")
    }

    def jobsmith(kind: str) -> list[str]:
        return [str(JOBSMITH), "--site", str(sites[kind]), "put", str(source), "--to", str(target)]

    ways: dict[str, list[str]] = {
        "rsync": ["rsync", "-s", "-t", "-e", shlex.join(ssh), str(source), f"{HOST}:{target}/"],
        "scp": [
            "scp",
            "-q",
            "-o",
            f"ControlPath={socket}",
            "-o",
            "ControlMaster=no",
            "-o",
            f"UserKnownHostsFile={known}",
            "-P",
            str(port),
            str(source),
            f"{HOST}:{target}/",
        ],
        "put openssh": jobsmith("openssh"),
        "put ssh (sftp)": jobsmith("ssh"),
    }
    names = list(ways)
    took: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    to_scp: dict[str, list[float]] = {name: [] for name in names}
    print(f"# {mib} MiB, {rounds} rounds; load {os.getloadavg()[0]:.2f} at start", flush=True)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        this: dict[str, float] = {}
        for name in order:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            this[name] = timed(lambda argv=ways[name]: check(argv, env))
            assert (target / source.name).stat().st_size == mib << 20, name
        for name in names:
            took[name].append(this[name])
            ratios[name].append(this[name] / this["rsync"])
            to_scp[name].append(this[name] / this["scp"])
        cells = "  ".join(f"{n} {this[n]:.2f}s ({this[n] / this['rsync']:.2f}x)" for n in names)
        print(f"round {r + 1} (order {', '.join(order)}): {cells}", flush=True)
    print(
        f"{'way':18} {'median s':>9} {'MiB/s':>7} {'x rsync':>8} {'x scp':>6}"
        "  (ratios: median of rounds)"
    )
    for name in names:
        m = statistics.median(took[name])
        x_rsync, x_scp = statistics.median(ratios[name]), statistics.median(to_scp[name])
        print(f"{name:18} {m:9.2f} {mib / m:7.1f} {x_rsync:8.3f} {x_scp:6.3f}")
    print(f"# load {os.getloadavg()[0]:.2f} at end")


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def check(argv: list[str], env: dict[str, str]) -> None:
    res = subprocess.run(argv, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({res.returncode}): {res.stderr[-800:]}")


if __name__ == "__main__":
    main()

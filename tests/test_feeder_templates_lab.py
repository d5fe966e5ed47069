"""blender_frames fed in parts on the lab cluster (issue 28, item 1): its blocks of frames
are picked by `$SLURM_ARRAY_TASK_ID`, so each part's offset must reach them. In QoS
`tiny` (MaxSubmitPU 5, made by `scripts/slurm-lab up`) seven one-frame blocks are two
parts (5 and 2); `wait` on the first part feeds the second and waits for it; Debian's
Blender renders every frame (the tiny Cycles scene of tests/test_render_frames.py).
Runs as alice (`asalice-wt WORKTREE tests/test_feeder_templates_lab.py`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from lab_cli import js, queued_in_tiny
from test_feeder_lab import SITE
from test_render_frames import make_scene

#: alone: it holds QoS tiny's per-user limit, as tests/test_feeder_lab.py does
pytestmark = [pytest.mark.usefixtures("lab_cluster"), pytest.mark.alone]


def test_blender_frames_over_maxsubmit_is_fed_and_renders_every_frame_once(
    user_site: Callable[[str], None], workdir: Path
) -> None:
    user_site(SITE.replace("core_hours: 10", "core_hours: 1000"))
    assert queued_in_tiny() == [], "another run left jobs in QoS tiny"
    scene = make_scene(workdir / "scene.blend")
    out = workdir / "frames"
    blocks = [f"{n}-{n}" for n in range(1, 8)]
    params = {"blend_file": str(scene), "output_dir": str(out), "blocks": blocks}
    (workdir / "params.yaml").write_text(json.dumps(params))  # JSON is YAML
    sub = js(
        "submit", "blender_frames", "--params-file", str(workdir / "params.yaml"),
        "--qos", "tiny", "-c", "1", "--mem", "1G", "-t", "5", "--log-dir", str(workdir),
        "--json",
    )  # fmt: skip
    assert sub.exit_code == 0, sub.output
    submitted = json.loads(sub.stdout)
    assert (submitted["workload_tasks"], submitted["workload_parts"]) == (7, 2)
    assert submitted["fed_parts"] == 1  # the second waits for room
    waited = js("wait", str(submitted["job_id"]), "--timeout", "300")
    assert waited.exit_code == 0, waited.output
    assert sorted(p.name for p in out.glob("frame_*.png")) == [
        f"frame_{n:05d}.png" for n in range(1, 8)
    ]
    [fed] = json.loads(js("status", "--json", str(submitted["job_id"])).stdout)["workloads"]
    assert (fed["tasks"], fed["done"], fed["not_submitted"]) == (7, 7, 0)

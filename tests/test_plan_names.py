"""A plan named after a file whose name is not ASCII (issue 24, part 5): transcode and
render-frames crashed building the plan's name from `scène.blend`; the name is now the
stem with its accents dropped, or its hash where no ASCII letter or digit is left."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobsmith.agent.runtime.workflows.frames import RenderRequest, render_plan
from jobsmith.agent.runtime.workflows.plans import plan_name

SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]+")


@pytest.mark.parametrize(
    ("stem", "expected"),
    [
        ("scène", "render_scene"),
        ("Ünïcödé clip", "render_Unicode_clip"),
        ("plain-name_01", "render_plain-name_01"),
    ],
)
def test_accents_are_dropped_and_the_rest_made_a_slurm_name(stem: str, expected: str) -> None:
    assert plan_name("render", Path(f"/x/{stem}.blend")) == expected


@pytest.mark.parametrize("stem", ["映画", "фильм", "---", "🎬"])
def test_a_stem_with_nothing_ascii_left_is_named_by_its_hash(stem: str) -> None:
    name = plan_name("transcode", Path(f"/x/{stem}.mp4"))
    assert SLURM_NAME.fullmatch(name) and re.fullmatch(r"transcode_[0-9a-f]{12}", name)
    assert name != plan_name("transcode", Path("/x/other.mp4"))


def test_a_render_plan_of_an_accented_file_is_built(tmp_path: Path) -> None:
    request = RenderRequest(
        blend_file=tmp_path / "scène.blend",
        output_dir=tmp_path / "frames",
        frame_start=1,
        frame_end=3,
        frames_per_task=2,
        engine="scene",
        image_format="PNG",
        video=None,
        fps=24,
    )
    plan = render_plan(request)
    assert plan.name == "render_scene" and SLURM_NAME.fullmatch(plan.name)

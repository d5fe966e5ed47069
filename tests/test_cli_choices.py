"""The commands that fill a template offer the choices its spec accepts, read from the spec
(issue 22: transcode's --preset lacked `veryslow`, which ffmpeg_segments accepts)."""

from __future__ import annotations

import click
import pytest

from jobsmith.agent.faces.cli import TemplateChoice, cli
from jobsmith.job_templates.loader import TemplateLibrary, shipped_library


def _template_choices() -> list[tuple[str, str, TemplateChoice]]:
    found = []
    for name, command in cli.commands.items():
        for param in command.params:
            if isinstance(param.type, TemplateChoice):
                found.append((name, param.name or "", param.type))
    return found


def test_every_template_choice_is_its_templates_list() -> None:
    found = _template_choices()
    assert {(c, p) for c, p, _ in found} >= {
        ("transcode", "preset"),
        ("transcode", "video_codec"),
        ("render-frames", "engine"),
        ("render-frames", "image_format"),
    }
    library = TemplateLibrary([shipped_library()])
    for _, _, kind in found:
        spec = library.get(kind._template).spec.params[kind._param]
        assert kind.choices == tuple(str(c) for c in spec.choices or ()) and kind.choices


def test_veryslow_is_a_preset_and_a_wrong_one_names_the_choices() -> None:
    preset = TemplateChoice("ffmpeg_segments", "preset")
    assert preset.convert("veryslow", None, None) == "veryslow"
    with pytest.raises(click.BadParameter) as err:
        preset.convert("glacial", None, None)
    assert "glacial" in str(err.value) and "veryslow" in str(err.value)


def test_templates_show_prints_the_body_it_promises() -> None:
    """`templates show` said it shows the body, and printed none (issue 25)."""
    from lab_cli import js

    from jobsmith.job_templates.loader import TemplateLibrary, shipped_library

    out = js("templates", "show", "command")
    assert out.exit_code == 0, out.output
    body = TemplateLibrary([shipped_library()]).get("command").body
    assert "body (Jinja2" in out.output and body.strip() in out.output


@pytest.mark.parametrize(
    ("command", "option", "template", "param"),
    [
        ("transcode", "video_codec", "ffmpeg_segments", "video_codec"),
        ("transcode", "preset", "ffmpeg_segments", "preset"),
        ("render-frames", "engine", "blender_frames", "engine"),
        ("render-frames", "image_format", "blender_frames", "image_format"),
    ],
)
def test_the_commands_choices_are_the_templates(
    command: str, option: str, template: str, param: str
) -> None:
    """Whatever kind of click.Choice the option has, it offers the template's list (before
    the lists were read from the specs, transcode's --preset lacked `veryslow`)."""
    kind = next(p.type for p in cli.commands[command].params if p.name == option)
    assert isinstance(kind, click.Choice)
    spec = TemplateLibrary([shipped_library()]).get(template).spec.params[param]
    assert tuple(kind.choices) == tuple(str(c) for c in spec.choices or ())

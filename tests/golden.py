"""Golden files: each shipped template rendered with its example values.

tests/test_templates.py compares a fresh render with tests/fixtures/rendered/<name>.sh and
never writes; `scripts/regen-fixtures` (this module's main) rewrites the files after an
intended change and names those that changed, for review. Keeping the writer out of the
tests means a test can never pass by comparing a file with what it just wrote, and CI,
which must check the committed files, refuses to regenerate.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from template_examples import example_params

from jobsmith.job_templates import Template, TemplateLibrary, render_body, shipped_library

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "rendered"


def golden_names() -> list[str]:
    """Every shipped template has a golden file."""
    return sorted(TemplateLibrary([shipped_library()]).names())


def reference_text(template: Template, root: Path) -> str:
    """The golden file's text: the render of template's examples under root (which must
    be an empty directory; its path is written as /ROOT)."""
    rendered = render_body(
        template, example_params(template, root), allowed_roots=[root], base_dir=root
    )
    return "\n".join(
        [
            f"# template: {template.name}",
            f"# sbatch: {json.dumps(rendered.sbatch_fields(), sort_keys=True)}",
            f"# inputs: {' '.join(map(str, rendered.input_paths))}",
            f"# outputs: {' '.join(map(str, rendered.output_paths))}",
            rendered.body,
        ]
    ).replace(str(root.resolve()), "/ROOT")


def regenerate(directory: Path = GOLDEN) -> list[str]:
    """Write every golden file into directory; the names whose text changed (or is new)."""
    library = TemplateLibrary([shipped_library()])
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name in golden_names():
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch) / "root"
            root.mkdir()
            text = reference_text(library.get(name), root)
        path = directory / f"{name}.sh"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(name)
    return changed


#: a checkpointable job's body (agent/runtime/submission/request/checkpoint.py): the
#: command template's example body under the trap, with these settings
CHECKPOINTED = GOLDEN / "checkpoint" / "command.sh"
CHECKPOINT_EXAMPLE = {"command": "touch ckpt.request", "signal_lead_s": 60, "max_requeues": 3}


def checkpointed_text() -> str:
    """The checkpoint golden file's text: the command template's example body, wrapped."""
    from jobsmith.agent.runtime.submission.request.checkpoint import CheckpointPlan, wrap

    library = TemplateLibrary([shipped_library()])
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        root.mkdir()
        template = library.get("command")
        body = render_body(
            template, example_params(template, root), allowed_roots=[root], base_dir=root
        ).body
    return wrap(body, CheckpointPlan.model_validate(CHECKPOINT_EXAMPLE))


def main() -> int:
    """scripts/regen-fixtures: rewrite the golden files, say which changed."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        print(
            "regen-fixtures: refused under CI: CI checks the committed golden files; "
            "regenerate on a development machine and commit the reviewed diff",
            file=sys.stderr,
        )
        return 2
    changed = regenerate()
    CHECKPOINTED.parent.mkdir(exist_ok=True)
    if not CHECKPOINTED.exists() or CHECKPOINTED.read_text() != checkpointed_text():
        CHECKPOINTED.write_text(checkpointed_text())
        print(f"changed: {CHECKPOINTED}")
    for name in changed:
        print(f"changed: {GOLDEN / name}.sh")
    print(
        f"{len(changed)} of {len(golden_names())} golden files changed"
        + ("; review them with `git diff tests/fixtures/rendered`" if changed else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

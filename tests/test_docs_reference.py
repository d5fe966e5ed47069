"""The generated reference pages are current (issue 25, item 3): docs/site-file-reference.md
is what site_config/model.py says, docs/cli.md what click's command tree says.

Each page is built in memory (tests/docs_reference.py) and compared with the committed
file; a stale one fails naming `scripts/docs-reference`, which rewrites both.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from docs_reference import COMMAND, REPO, generated


@pytest.mark.parametrize("path", list(generated()), ids=lambda p: p.name)
def test_the_generated_page_is_current(path: Path) -> None:
    fresh = generated()[path]
    name = path.relative_to(REPO)
    assert path.exists(), f"no {name}: run {COMMAND}, review the diff and commit it"
    committed = path.read_text()
    if committed != fresh:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    f"{name} (committed)",
                    f"{name} (from the code)",
                )
            )[:40]
        )
        pytest.fail(f"{name} is stale: run {COMMAND}, review the diff and commit it\n{diff}")


def test_the_reference_names_every_command_and_section() -> None:
    pages = generated()
    cli_page = next(text for path, text in pages.items() if path.name == "cli.md")
    for command in ("## `jobsmith submit`", "### `jobsmith plan check`", "`-P`, `--param`"):
        assert command in cli_page
    site_page = next(text for path, text in pages.items() if path.name != "cli.md")
    for section in ("## `policy.budgets`", "## `partitions.NAME`", "| `max_time` |"):
        assert section in site_page

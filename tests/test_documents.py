"""The view layer's documents are the shapes the README documents (issue 8, item 3).

The README's JSON table is the interface promise; agent/views/documents.py builds each of these
documents in one place. This reads the table and checks, both ways, that the documented
keys are the model's fields, so neither can drift from the other.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobsmith.agent.views.documents import (
    JobStatusDocument,
    RenderDocument,
    SubmissionDocument,
    _Document,
)

README = Path(__file__).resolve().parent.parent / "README.md"


def documented_keys(command: str, inside: str | None = None) -> set[str]:
    """The top-level keys of the JSON document the README shows for command (or of the
    objects in its list `inside`)."""
    row = next(
        line for line in README.read_text().splitlines() if line.startswith(f"| {command} |")
    )
    cell = row.split("|")[2].strip().strip("`")
    if inside is not None:
        cell = cell.split(f'"{inside}": [', 1)[1]
    depth, keys = 0, set()
    for match in re.finditer(r'[{}\[\]]|"(\w+)"', cell):
        token = match.group(0)
        if token in "{[":
            depth += 1
        elif token in "}]":
            depth -= 1
            if depth == 0:
                break
        elif depth == 1:
            keys.add(match.group(1))
    return keys


@pytest.mark.parametrize(
    ("command", "inside", "model"),
    [
        ("`status`, `wait`", "jobs", JobStatusDocument),
        ("`submit`", None, SubmissionDocument),
        ("`render`, `submit --dry-run`", None, RenderDocument),
    ],
)
def test_documented_keys_are_the_models_fields(
    command: str, inside: str | None, model: type[_Document]
) -> None:
    keys = documented_keys(command, inside)
    assert keys, f"no keys read for {command}"
    assert keys == set(model.model_fields), keys ^ set(model.model_fields)

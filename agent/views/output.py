"""Printing results: stable JSON for `--json`, readable text otherwise.

JSON goes to stdout only; progress and notes go to stderr, so `--json` output can always
be piped into another program.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel


def to_jsonable(value: Any) -> Any:
    """Models and containers of models as plain JSON data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def print_document(document: BaseModel) -> None:
    """A document (agent/views/documents.py) on stdout, serialised by pydantic's own
    encoder: the same JSON as print_json(document.full()), several times faster for the
    large ones (a 1,000-task array's status)."""
    sys.stdout.write(document.model_dump_json(indent=2))
    sys.stdout.write("\n")


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(value), indent=2, sort_keys=False, default=str))
    sys.stdout.write("\n")


def print_table(
    title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    """A plain table on stdout (rich is imported only here, when text output is wanted)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    Console(soft_wrap=True).print(table)


def note(message: str) -> None:
    """A line for the person at the terminal (stderr: never mixed into JSON)."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()

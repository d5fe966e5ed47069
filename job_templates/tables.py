"""Table parameters: a TSV file (a sample sheet) read and checked at render time.

The sheet is validated before submission (header, ids, every path inside the roots and
existing) and its rows are rendered into the body, so the job runs on exactly the rows
that were checked, even if the file changes while the job waits in the queue.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from jobsmith.files import read_bounded
from jobsmith.job_templates.params import ColumnType
from jobsmith.job_templates.values import check_text
from jobsmith.workload_caps import MAX_TABLE_ROWS, check_count

#: a sample id: safe as a file name and as a shell word, no leading dash or dot
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

Cell = str | int | Path
#: checks one path cell: (path relative to the sheet's directory, where) -> resolved path
PathCheck = Callable[[Path, str], Path]


class Table(BaseModel):
    """A validated table: the file it came from and its typed rows, in file order."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Path = Field(description="the resolved TSV file")
    columns: tuple[str, ...] = Field(description="the declared columns, in declared order")
    rows: tuple[dict[str, Cell], ...] = Field(description="one mapping per data line")

    def __len__(self) -> int:
        """Number of rows (what an array over the table counts)."""
        return len(self.rows)

    def paths(self) -> list[Path]:
        """Every path cell, row by row."""
        return [cell for row in self.rows for cell in row.values() if isinstance(cell, Path)]


def read_table(
    path: Path,
    columns: Mapping[str, ColumnType],
    check_path: PathCheck,
    read: Callable[[Path], bytes] = read_bounded,
) -> Table:
    """Parse and validate the TSV at path; ValueError naming the line and column if bad.

    The first line that is neither blank nor a `#` comment is the header; it must name
    every declared column (in any order) and nothing else. read: how the file is read
    (where the job runs: job_templates/paths.py), bounded, OSError if it cannot be.
    """
    try:
        text = read(path).decode("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read '{path}': {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"cannot read '{path}': {exc}") from None
    # counted from the text before a row is made (each row's paths are resolved and checked)
    check_count(text.count("\n") - 1, MAX_TABLE_ROWS, "rows", "split the sheet over several jobs")
    lines = [
        (number, line.removesuffix("\r"))
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip() and not line.startswith("#")
    ]
    if not lines:
        raise ValueError(f"'{path}' is empty; expected a header: {_tabs(columns)}")
    header = _header(*lines[0], columns)
    rows = tuple(
        _row(number, line, header, columns, path.parent, check_path) for number, line in lines[1:]
    )
    if not rows:
        raise ValueError(f"'{path}' has a header but no rows")
    _check_unique(rows, columns)
    return Table(path=path, columns=tuple(columns), rows=rows)


def _tabs(columns: Mapping[str, ColumnType]) -> str:
    return "<TAB>".join(columns)


def _header(number: int, line: str, columns: Mapping[str, ColumnType]) -> list[str]:
    header = line.split("\t")
    if sorted(header) != sorted(columns):
        raise ValueError(
            f"line {number}: header {'<TAB>'.join(header)!r} must name exactly the columns "
            f"{', '.join(columns)}, separated by tabs"
        )
    return header


def _row(
    number: int,
    line: str,
    header: list[str],
    columns: Mapping[str, ColumnType],
    base: Path,
    check_path: PathCheck,
) -> dict[str, Cell]:
    fields = line.split("\t")
    if len(fields) != len(header):
        raise ValueError(f"line {number}: {len(fields)} fields, expected {len(header)}")
    row: dict[str, Cell] = {}
    for name, text in zip(header, fields, strict=True):
        where = f"line {number}, column {name!r}"
        try:
            row[name] = _cell(text, columns[name], base, check_path, where)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return {name: row[name] for name in columns}


def _cell(text: str, kind: ColumnType, base: Path, check_path: PathCheck, where: str) -> Cell:
    check_text(text)
    if not text:
        raise ValueError("is empty")
    if kind is ColumnType.ID and not SAFE_ID.match(text):
        raise ValueError(f"{text!r} is not a safe id ([A-Za-z0-9][A-Za-z0-9._-]*)")
    if kind is ColumnType.INT:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError(f"{text!r} is not an integer")
        return int(text)
    if kind is ColumnType.PATH:
        return check_path(base / text, where)
    return text


def _check_unique(rows: tuple[dict[str, Cell], ...], columns: Mapping[str, ColumnType]) -> None:
    # Ids name output files: two rows with one id would overwrite each other's results.
    for name, kind in columns.items():
        seen: set[Cell] = set()
        for row in rows:
            if kind is ColumnType.ID and row[name] in seen:
                raise ValueError(f"column {name!r}: id {row[name]!r} appears twice")
            seen.add(row[name])

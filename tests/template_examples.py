"""Materialising a template's example values (inputs created on disk), for tests.

Shared by the template tests and the CLI/cluster tests (tests/ is on pytest's pythonpath).
"""

from __future__ import annotations

from pathlib import Path

from jobsmith.job_templates import Template
from jobsmith.job_templates.params import ColumnType, ParamSpec, ParamType, PathKind, PathRole


def create_input(path: Path, kind: PathKind) -> None:
    """Make an input path exist: a directory for kind dir, else an empty file."""
    if kind is PathKind.DIR:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def write_table(path: Path, spec: ParamSpec, first_path: str | None = None) -> None:
    """A valid two-row table for spec's columns, creating the files its path cells name."""
    assert spec.columns is not None
    lines = ["\t".join(spec.columns)]
    for sample in ("s1", "s2"):
        cells = []
        for column, kind in spec.columns.items():
            cell = {ColumnType.ID: sample, ColumnType.INT: "1", ColumnType.STR: "x"}.get(kind)
            if kind is ColumnType.PATH:
                cell = first_path or f"{sample}_{column}.fq"
                first_path = None
                create_input(path.parent / cell, spec.kind)
            cells.append(str(cell))
        lines.append("\t".join(cells))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def example_params(template: Template, root: Path) -> dict[str, object]:
    """The template's example values, with every example input created under root (also
    those not checked at render time, such as ffmpeg_concat's chunk_dir, so bodies run)."""
    for spec in template.spec.params.values():
        if not spec.required or spec.role is not PathRole.INPUT:
            continue
        examples = spec.example if isinstance(spec.example, list) else [spec.example]
        for example in examples:
            if spec.type is ParamType.TABLE:
                write_table(root / str(example), spec)
            else:
                create_input(root / str(example), spec.kind)
    return dict(template.examples())

"""Materialising a template's example values (inputs created on disk), for tests.

Shared by the template tests and the CLI/cluster tests (tests/ is on pytest's pythonpath).
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Sequence
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


def write_bwa_inputs(work: Path, samples: Sequence[str], seed: int = 7) -> None:
    """A random 5 kb reference (bwa-indexed) as work/genome.fa, 50 error-free read pairs
    per sample under work/reads/, and the sample sheet work/reads/samples.tsv."""
    rng = random.Random(seed)
    (work / "reads").mkdir(parents=True, exist_ok=True)
    reference = "".join(rng.choice("ACGT") for _ in range(5000))
    (work / "genome.fa").write_text(f">chr1\n{reference}\n")
    subprocess.run(["bwa", "index", str(work / "genome.fa")], check=True, capture_output=True)
    sheet = ["sample\tr1\tr2"]
    for sample in samples:
        _simulate_pairs(rng, reference, 50, work / "reads", sample)
        sheet.append(f"{sample}\t{sample}_1.fq\t{sample}_2.fq")
    (work / "reads" / "samples.tsv").write_text("\n".join(sheet) + "\n")


def _reverse_complement(seq: str) -> str:
    return seq.translate(str.maketrans("ACGT", "TGCA"))[::-1]


def _simulate_pairs(
    rng: random.Random, reference: str, pairs: int, directory: Path, sample: str
) -> None:
    """Error-free read pairs: 70 bp from each end of a 250 bp fragment."""
    with (
        (directory / f"{sample}_1.fq").open("w") as r1,
        (directory / f"{sample}_2.fq").open("w") as r2,
    ):
        for n in range(pairs):
            start = rng.randrange(len(reference) - 250)
            fragment = reference[start : start + 250]
            r1.write(f"@{sample}.{n}/1\n{fragment[:70]}\n+\n{'I' * 70}\n")
            r2.write(f"@{sample}.{n}/2\n{_reverse_complement(fragment[-70:])}\n+\n{'I' * 70}\n")

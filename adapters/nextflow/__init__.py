"""Nextflow as a workflow engine: the head job runs under Slurm (template `nextflow_head`)."""

from jobsmith.adapters.nextflow.engine import NextflowEngine

__all__ = ["NextflowEngine"]

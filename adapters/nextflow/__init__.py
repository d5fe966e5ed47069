"""Nextflow as a workflow engine: the head job runs under Slurm (template `nextflow_head`)."""

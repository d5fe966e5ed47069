"""Snakemake as a workflow engine: its main process runs as a Slurm head job.

Snakemake (9.x) with snakemake-executor-plugin-slurm (2.x) submits one Slurm job per rule
job; jobsmith generates the Snakemake profile from the site's policy (`profile`), builds
the command line (`command`) and follows the run through Snakemake's console output
(`console`, `parse`), whose words are mapped to jobsmith's task states in `states`.
"""

from jobsmith.adapters.snakemake.engine import SnakemakeEngine

__all__ = ["SnakemakeEngine"]

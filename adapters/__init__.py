"""Adapters to the systems jobsmith drives: the Slurm scheduler and workflow engines."""

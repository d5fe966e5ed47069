"""Advice at submission: right-sizing from history, and Slurm's start estimates."""

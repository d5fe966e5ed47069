"""What jobsmith writes for Slurm, and reads as sbatch would: argv, directives, scripts (pure)."""

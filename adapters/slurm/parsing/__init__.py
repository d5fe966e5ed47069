"""What Slurm prints, parsed into jobsmith's records and facts (pure)."""

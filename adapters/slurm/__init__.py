"""The Slurm adapter: pure argv builders and parsers, a Scheduler over a Transport."""

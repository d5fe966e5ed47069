"""Plans and workflows: plan files and their runs as Slurm dependencies, workflow
engines' head jobs (pipelines), and the plans transcode and render-frames build."""

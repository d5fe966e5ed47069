"""Allow `python -m jobsmith` (the same entry point as the `jobsmith` command)."""

from jobsmith.agent.faces.launch import main

main()

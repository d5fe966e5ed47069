"""Allow `python -m jobsmith`."""

from jobsmith.agent.faces.cli import main

main()

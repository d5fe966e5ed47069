"""Allow `python -m jobsmith`."""

from jobsmith.agent.cli import main

main()

"""jobsmith: a lightweight agent that uses a site's existing Slurm as its hands.

Importing this package does no work: subpackages are imported where used, so that
`jobsmith --help` starts fast on a busy login node.
"""

__version__ = "0.1.0"

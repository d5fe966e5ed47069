"""The user's node blocklist (issue 27): failures attributed to nodes (attribution.py),
kept per user and cluster in the state directory and folded into the nodes left out
(store.py), and merged into what a submission excludes (exclude.py)."""

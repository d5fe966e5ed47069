"""The brain side of jobsmith: the CLI entry point, and later steps, sessions, policy, brains."""

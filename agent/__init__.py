"""The brain side of jobsmith: CLI entry point, and later steps, session store, policy and brains."""

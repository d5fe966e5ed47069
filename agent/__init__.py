"""The agent, by plane, each importing only the planes below it (pyproject.toml's layers
contract): faces (the CLI, chat, the MCP server), app.py (the composition root: it builds
the object graph and hands the parts down; the only module of the agent that imports a
scheduler adapter), watcher (unattended polling), brains (who decides), views (how the
runtime's documents are shown), runtime (the session log, submission and its judge,
plans and workflows, recovery) and diagnosis.
"""

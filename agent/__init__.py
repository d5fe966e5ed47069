"""The agent, by plane: runtime (session log, steps, executor, policy), brains (who decides),
watcher (unattended polling), diagnosis, views (the documents shown) and faces (the CLI;
chat and MCP next). app.py is the composition root: the one place that builds the object
graph, and the only module of the agent that imports a scheduler adapter.
"""

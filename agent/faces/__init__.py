"""The faces people use: the command line (cli), chat and the MCP server (`site check`
and `site init` are the runtime's: agent/runtime/sitefile.py)."""

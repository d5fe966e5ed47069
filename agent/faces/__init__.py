"""The faces people use: the command line (cli) and `site check` / `site init` (sitecmd);
chat and the MCP server join here."""

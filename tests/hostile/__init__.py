"""Hostile-clone tests: a repository (or a request) built the way an attacker would, driven through the
real CLI or the real MCP server, where a user would meet it."""

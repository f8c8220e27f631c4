"""The built-in `deploy` executor (`node`) and its parts: sources, releases, targets, checks."""

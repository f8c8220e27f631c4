"""Prefect Blocks for configuration and secrets: the code-model endpoint, the sandbox policy, folders."""

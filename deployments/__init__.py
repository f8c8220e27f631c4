"""Deployment serving and the watchdog sensor that triggers deployments when a slot file changes."""

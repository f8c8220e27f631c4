"""Prefect tasks wrapping core calls: node execution, routing, sandbox runs, code generation, alerts."""

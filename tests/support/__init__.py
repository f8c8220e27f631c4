"""Helpers the tests share, one module per job (waiting, processes, services, the Prefect API, chains,
the MCP tools, ...): docs/contributing.md lists them.

A package, not a conftest: a test imports what it uses by name (`from tests.support.waiting import
wait_until`), and no helper depends on which folder's conftest pytest loaded. Test modules and conftests
are never imported as libraries (tests/test_test_imports.py).
"""

"""Helpers the tests share: waiting on a condition (`waiting`) and on a process (`processes`).

A package, not a conftest: a test imports what it uses by name (`from tests.support.waiting import
wait_until`), and no helper depends on which folder's conftest pytest loaded.
"""

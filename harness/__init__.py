"""What the tests and the benchmarks both run: chains and agent writes, the process workers of a pool, a
private PostgreSQL cluster and sshd, a served site to deploy, a stub code model, free ports.

A top-level package beside `tests/` and `bench/`, so that neither imports the other: the tests'
own helpers stay in `tests/support`, and `bench/` imports nothing from `tests/`. It is not installed
(pyproject's package list leaves it out): pytest and the benches find it at the repository's root.
"""

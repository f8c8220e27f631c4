"""Prefect flows: the compiled chain, slot routing, pen write, registry review, workspace refresh.

Flows wrap the core in `slotrelay/`; they hold orchestration, never domain logic.
"""

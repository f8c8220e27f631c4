"""Prefect flows: `chain` (a chain compiled to one flow run, `chain.py`, with its L4 alerts and L5
arbitration in `arbitration.py`), `pen-write` (`pen.py`) and `registry-review` (`registry_review.py`).

Flows wrap the core in `slotrelay/`; they hold orchestration, never domain logic.
"""

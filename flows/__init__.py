"""Prefect flows: `chain` (a chain compiled to one flow run, `chain.py`, with its L4 alerts and L5
arbitration in `arbitration.py`), `pen-write` (`pen.py`) and `registry-review` (`registry_review.py`);
`notes.py` holds the run notes they share (one message to the run log and the engine log).

Flows wrap the core in `slotrelay/`; they hold orchestration, never domain logic.
"""

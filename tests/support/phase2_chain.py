"""The phase-2 example's chain, copied to a test's folder, and its agent node's input as the engine writes it.

The agent node is `exec-review` (executor external): its input comes from `exec-enrich`'s route, its
post checks are a free-text check the agent attests and `data.approved == true`, and its route leads to
`exec-publish` (python), which needs `data.titles`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from slotrelay.chain.routing import WriteInput, route_finished, write_input
from slotrelay.chain.schema import load_chain
from slotrelay.chain.slots import content_hash, output_slot_document, slot_bytes

ROOT = Path(__file__).resolve().parents[2]
AGENT = "exec-review"
ATTESTED = "a person read every article"


def phase2_copy(folder: Path) -> Path:
    """The phase-2 example (chain file, pipeline, inbox) copied into `folder`; returns the chain file."""
    shutil.copytree(
        ROOT / "examples" / "phase2",
        folder,
        ignore=shutil.ignore_patterns("work", "slots", "alerts", "logs", "__pycache__"),
    )
    return folder / "node_chain.json"


def route_to_review(chain_path: Path, titles: list[str] | None = None) -> Path:
    """Write exec-review's input slot as exec-enrich's route does (through the one routing step)."""
    chain = load_chain(chain_path)
    enriched = output_slot_document(
        "exec-enrich",
        status="completed",
        data={
            "enriched_file": str(chain_path.parent / "enriched.json"),
            "items": titles or ["Atomic writes", "Watchdog tips"],
        },
        capabilities_used=["Read", "Write"],
    )
    routed = route_finished(
        chain, "exec-enrich", enriched, content_hash(slot_bytes(enriched)), state=_Settled()
    )
    [step] = [s for s in routed.steps if isinstance(s, WriteInput) and s.to_node == AGENT]
    write_input(step)
    return step.path


class _Settled:
    """A routing state where no node is still running (the enrich step is done)."""

    def pending(self, node_id: str) -> bool:
        return False


def right_answer(titles: list[str]) -> dict:
    """node_submit arguments that exec-review's checks accept."""
    return {
        "node_id": AGENT,
        "status": "completed",
        "data": {"approved": True, "titles": titles},
        "checks": {ATTESTED: True},
        "capabilities_used": ["Read"],
    }

"""Where a chain keeps its files, as a Prefect Block: the slots root, the alerts and the logs.

Save one (UI or Python) and pass its name to the `chain` flow as `folders_block`:

    ChainFolders(slots_root="/srv/chains/phase2", alerts="/srv/alerts/phase2",
    logs="/var/log/slotrelay").save("phase2")

Without a block a chain keeps the zero-setup layout: slots resolve against the chain file's folder
(or `--slots-root`), with `alerts/` and `logs/` inside it. Every machine that runs the chain must see
these folders at the same paths.
"""

from __future__ import annotations

from pathlib import Path

from prefect.blocks.core import Block
from pydantic import Field, field_validator


class ChainFolders(Block):
    """The folders of a chain's slots, Alert JSON files, engine log and run summaries."""

    _block_type_name = "slotrelay chain folders"
    _block_type_slug = "slotrelay-chain-folders"
    _description = "Where a slotrelay chain's slots, alerts and logs live (absolute paths)."

    slots_root: str | None = Field(
        default=None, description="folder relative slot paths resolve against; empty: the chain file's folder"
    )
    alerts: str | None = Field(default=None,
                               description="folder of Alert JSON files; empty: alerts/ in the slots root")
    logs: str | None = Field(
        default=None, description="folder of engine.log and run summaries; empty: logs/ in the slots root"
    )

    @field_validator("slots_root", "alerts", "logs")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # A relative path would mean something else on each worker, depending on its working folder.
        if value and not Path(value).is_absolute():
            raise ValueError(f"{value!r} is not an absolute path")
        return value or None

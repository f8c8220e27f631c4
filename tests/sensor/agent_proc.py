"""An agent outside the engine, in its own process: `python agent_proc.py SLOT_PATH DOCUMENT_JSON`.

Writes the document to the slot as most agents do (a temporary file renamed onto the slot).
"""

import os
import sys
import uuid
from pathlib import Path

if __name__ == "__main__":
    slot, document = Path(sys.argv[1]), sys.argv[2]
    slot.parent.mkdir(parents=True, exist_ok=True)
    staged = slot.with_name(f"{slot.name}.{uuid.uuid4().hex[:6]}.tmp")
    staged.write_text(document)
    os.replace(staged, slot)

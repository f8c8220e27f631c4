"""The `slotrelay` command of the running environment (the console script beside its Python), for the
tests and the benches that start it as a process."""

from __future__ import annotations

import sys
from pathlib import Path

SLOTRELAY = str(Path(sys.executable).with_name("slotrelay"))

"""The engine log: `logs/engine.log` beside a chain's slots, rotated at 5 MB, five files kept.

The seed's choice (logging.RotatingFileHandler instead of appending by hand). Under Prefect the same
records also go to the run's logger; this file is what stays on disk next to the slots.
"""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

MAX_BYTES = 5 * 1024 * 1024
BACKUP_COUNT = 5
_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def engine_logger(logs_dir: Path) -> logging.Logger:
    """The logger writing to `<logs_dir>/engine.log` (one handler per file, however often called).

    Parameters:
        logs_dir: the chain's logs folder (`Chain.logs_dir`).

    Returns:
        A logger named `slotrelay.engine.<folder>` that does not propagate to the root logger.
    """
    log_path = (logs_dir / "engine.log").resolve()
    logger = logging.getLogger(f"slotrelay.engine.{log_path.parent}")
    if not any(getattr(h, "baseFilename", None) == str(log_path) for h in logger.handlers):
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(log_path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT,
                                      encoding="utf-8")
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger

"""The engine log: `logs/engine.log` beside a chain's slots, rotated at 5 MB, five files kept.

The seed's choice (logging.RotatingFileHandler instead of appending by hand). Under Prefect the same
records also go to the run's logger; this file is what stays on disk next to the slots.

The logs folder sits beside an agent's slots, so the file is opened and rotated through
`slotrelay.fsio` as slots are written: an `engine.log` (or a `logs/` folder) that is a symbolic link, a
FIFO or a folder is refused, never followed or blocked on. The engine then says so once on stderr, and
its lines go to stderr instead (under Prefect, the run log has them too).
"""

from __future__ import annotations

import logging
import os
import sys
from io import TextIOWrapper
from logging.handlers import RotatingFileHandler
from pathlib import Path

from slotrelay import fsio
from slotrelay.chain.slots import walked

MAX_BYTES = 5 * 1024 * 1024
BACKUP_COUNT = 5
_FORMAT = "%(asctime)s %(levelname)s %(message)s"


class CheckedRotatingFileHandler(RotatingFileHandler):
    """A RotatingFileHandler whose file is opened, and whose backups are renamed, within folders fsio
    opened without following a link.

    It rotates as RotatingFileHandler does (before a line that would bring the file to `maxBytes`),
    but formats each line once and keeps the file's size in memory: read from the file when it is
    opened, then counted line by line. RotatingFileHandler formats every line twice and stats the file
    twice per line (about 0.1 ms a line on a busy machine), to learn what this process already knows.

    Raises (on construction):
        OSError: the file cannot be opened; `fsio.RefusedPath` when it, or a folder on its way, is a
            link or not what it should be.
    """

    _size = 0

    def _open(self) -> TextIOWrapper:
        folders, name = os.path.split(self.baseFilename)
        with fsio.open_dir(fsio.FS_ROOT, folders, create=True) as folder:
            fd = folder.open_append(name)
        self._size = os.fstat(fd).st_size
        return open(fd, "a", encoding=self.encoding, errors=self.errors)  # the handler closes it

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            size = len(line.encode(self.encoding or "utf-8", self.errors or "strict"))
            if self.stream is None:
                self.stream = self._open()
            if self.maxBytes > 0 and self._size + size >= self.maxBytes:
                self.doRollover()
            self.stream.write(line)
            self.stream.flush()
            self._size += size
        except Exception:  # noqa: BLE001 - logging's rule: a line that cannot be written never raises
            self.handleError(record)

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
            self.stream = None
        folders, name = os.path.split(self.baseFilename)
        with fsio.open_dir(fsio.FS_ROOT, folders) as folder:
            for number in range(self.backupCount - 1, 0, -1):
                if folder.lstat(f"{name}.{number}") is not None:
                    folder.replace(f"{name}.{number}", f"{name}.{number + 1}")
            if self.backupCount > 0 and folder.lstat(name) is not None:
                folder.replace(name, f"{name}.1")
        self.stream = self._open()

    def handleError(self, record: logging.LogRecord) -> None:
        """One line on stderr for a record the file refused (say, `engine.log` swapped for a link), never
        a traceback."""
        failure = sys.exc_info()[1]
        sys.stderr.write(f"slotrelay: engine log {self.baseFilename} not written: {failure}\n")


def engine_logger(logs_dir: Path) -> logging.Logger:
    """The logger writing to `<logs_dir>/engine.log` (one handler per file, however often called).

    Parameters:
        logs_dir: the chain's logs folder (`Chain.logs_dir`).

    Returns:
        A logger named `slotrelay.engine.<folder>` that does not propagate to the root logger. When the
        file is refused (see the module docstring), the logger writes to stderr, and says why once.
    """
    log_path = Path(walked(logs_dir / "engine.log"))
    logger = logging.getLogger(f"slotrelay.engine.{log_path.parent}")
    kept = (getattr(h, "baseFilename", None) or getattr(h, "refused", None) for h in logger.handlers)
    if str(log_path) not in kept:
        handler: logging.Handler
        try:
            handler = CheckedRotatingFileHandler(log_path, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT,
                                                 encoding="utf-8")
            refusal = None
        except OSError as refused:
            handler = logging.StreamHandler()
            handler.refused = str(log_path)  # type: ignore[attr-defined]
            refusal = refused
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        if refusal is not None:
            logger.error("engine log %s refused (%s): engine lines go to stderr", log_path, refusal)
    return logger
